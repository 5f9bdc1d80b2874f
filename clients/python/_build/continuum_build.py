"""The build backend of continuum-client: PEP 517 (wheels, sdists) and
PEP 660 (editable installs) in the standard library alone.

pip builds a project in an isolated environment holding what its
pyproject.toml's build-system.requires names; with setuptools there, pip
needs the package index (or a wheel cache) to install the client. This
backend requires nothing, so ``pip install ./clients/python`` works on a
machine with only Python and pip, offline. The package is pure Python:
a wheel is src/continuum zipped with its metadata.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import tomllib
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE = "continuum"
_TAG = "py3-none-any"


def _project() -> dict:
    with open(os.path.join(_ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _dist_name(p: dict) -> str:
    return p["name"].replace("-", "_")


def _metadata(p: dict) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p['description']}",
        f"Requires-Python: {p['requires-python']}",
    ]
    lines += [f"Classifier: {c}" for c in p.get("classifiers", [])]
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    readme = p.get("readme")
    body = ""
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(_ROOT, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _package_files() -> list[tuple[str, str]]:
    """(path in the wheel, path on disk) of every file of the package."""
    out = []
    src = os.path.join(_ROOT, "src")
    for dirpath, dirnames, filenames in os.walk(os.path.join(src, _PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            disk = os.path.join(dirpath, name)
            out.append((os.path.relpath(disk, src).replace(os.sep, "/"), disk))
    return out


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory: str, files: list[tuple[str, bytes]]) -> str:
    p = _project()
    dist = f"{_dist_name(p)}-{p['version']}"
    info = f"{dist}.dist-info"
    files = files + [
        (f"{info}/METADATA", _metadata(p).encode()),
        (f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: continuum_build\nRoot-Is-Purelib: true\nTag: {_TAG}\n".encode()),
    ]
    record = [_record_line(path, data) for path, data in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    name = f"{dist}-{_TAG}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            zi = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def get_requires_for_build_wheel(config_settings=None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings=None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings=None) -> list[str]:
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    files = []
    for path, disk in _package_files():
        with open(disk, "rb") as f:
            files.append((path, f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    """A wheel holding a .pth file that puts the checkout's src on sys.path."""
    src = os.path.join(_ROOT, "src")
    return _write_wheel(wheel_directory, [(f"_{_PACKAGE}_editable.pth", (src + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None) -> str:
    p = _project()
    base = f"{_dist_name(p)}-{p['version']}"
    name = f"{base}.tar.gz"
    paths = ["pyproject.toml", "README.md", "_build/continuum_build.py"]
    paths += ["src/" + path for path, _ in _package_files()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in paths:
            t.add(os.path.join(_ROOT, rel), arcname=f"{base}/{rel}", recursive=False)
        pkg_info = _metadata(p).encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg_info)
        t.addfile(ti, io.BytesIO(pkg_info))
    return name
