"""Blobs: large values kept outside the log, streamed both ways.

A value too large for a run's frame (a page, a PDF, a long tool output)
is uploaded as a blob and referenced by its *reference value*, a short
string to put where the value would stand (a memory value, a tool output,
a message's text)::

    from continuum import blobs

    with run.atom() as atom:
        with open("page.html", "rb") as f:
            ref = blobs.put_blob(atom, f, media_type="text/html")
        atom.delta.set("page", ref.value)

    state = run.state()
    ref = blobs.parse_ref(state.memory["page"])
    with blobs.open_blob(client, run.id, ref) as body:
        for chunk in iter(lambda: body.read(1 << 20), b""):
            ...

Both directions stream (chunked upload, a response read as it arrives):
neither the client nor continuumd holds more than about a chunk of it.
The server checks every 1 MiB chunk of a download against the blob's
hash before it sends it; a damaged blob ends the transfer early, which
:meth:`BlobReader.read` raises as an error rather than return short
data as whole. continuumd's --blob-threshold moves every value of a
commit (and result of a call) above it into a blob on its own.
"""

from __future__ import annotations

import http.client
import io
import json
import re
import socket
from dataclasses import dataclass
from typing import IO, Any, Iterable, Optional, Tuple, Union
from urllib.parse import quote

from .errors import ContinuumError, error_from_answer

#: The start of a reference value (blob.ValuePrefix).
VALUE_PREFIX = "\x00continuum-blob:"

_VALUE = re.compile(r"\x00continuum-blob:([0-9a-f]{64})/(0|[1-9][0-9]{0,18})(?:;(.+))?\Z", re.S)

#: Bytes of each piece of a chunked upload.
_PIECE = 1 << 20


@dataclass(frozen=True)
class BlobRef:
    """A blob's reference: its tree hash (hex), size and media type."""

    hash: str
    size: int
    media_type: str = ""

    @property
    def value(self) -> str:
        """The reference value: put it in a delta to reference the blob."""
        v = f"{VALUE_PREFIX}{self.hash}/{self.size}"
        return v + (";" + self.media_type if self.media_type else "")

    def __str__(self) -> str:
        return f"blake3t:{self.hash}/{self.size}" + (" " + self.media_type if self.media_type else "")


def parse_ref(value: Union[str, bytes, None]) -> Optional[BlobRef]:
    """The reference a value holds (a memory value, a tool output, a
    message text of a state), or None if it is not a reference value."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    m = _VALUE.match(value)
    if not m or (m.group(3) is not None and "\x00" in m.group(3)):
        return None
    return BlobRef(m.group(1), int(m.group(2)), m.group(3) or "")


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def _connection(client: Any) -> http.client.HTTPConnection:
    """A new connection to the client's server, for one streamed
    exchange (the client's pooled connections read whole answers)."""
    ep = client._t.ep
    if ep.socket_path is not None:
        return _UnixHTTPConnection(ep.socket_path, ep.timeout)
    if ep.ssl_context is not None:
        return http.client.HTTPSConnection(ep.host, ep.port, timeout=ep.timeout, context=ep.ssl_context)
    return http.client.HTTPConnection(ep.host, ep.port, timeout=ep.timeout)


def _headers(client: Any) -> dict:
    h = {"Accept": "application/json"}
    if client._t.ep.token:
        h["Authorization"] = f"Bearer {client._t.ep.token}"
    return h


def _error(resp: http.client.HTTPResponse) -> ContinuumError:
    raw = resp.read()
    try:
        body = json.loads(raw)
    except ValueError:
        body = {"error": {"code": "internal", "message": raw.decode("utf-8", "replace")[:300]}}
    return error_from_answer(resp.status, body)


def _pieces(data: Union[bytes, bytearray, memoryview, IO[bytes], Iterable[bytes]]) -> Iterable[bytes]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        mv = memoryview(data)
        for off in range(0, len(mv), _PIECE):
            yield bytes(mv[off : off + _PIECE])
        return
    read = getattr(data, "read", None)
    if read is not None:
        while True:
            b = read(_PIECE)
            if not b:
                return
            yield b
        return
    for b in data:  # type: ignore[union-attr]
        if b:
            yield bytes(b)


def put_blob(
    atom: Any,
    data: Union[bytes, bytearray, memoryview, IO[bytes], Iterable[bytes]],
    *,
    media_type: str = "",
) -> BlobRef:
    """Uploads data (bytes, a binary file, or an iterable of bytes) as a
    blob of the atom's attempt, streamed with chunked transfer encoding,
    and returns its reference: put ``ref.value`` in the atom's delta to
    reference it. The blob is durable when this returns; the same bytes
    uploaded again are stored once. The upload is not retried (a file
    cannot be read twice): on a transport error, upload again."""
    atom._ensure()
    path = f"{atom._path}/blobs"
    conn = _connection(atom.run.client)
    try:
        headers = _headers(atom.run.client)
        if media_type:
            headers["Content-Type"] = media_type
        conn.request("POST", path, body=_pieces(data), headers=headers, encode_chunked=True)
        resp = conn.getresponse()
        if resp.status != 200:
            raise _error(resp)
        b = json.loads(resp.read())
        return BlobRef(str(b["hash"]), int(b["size"]), str(b.get("media_type") or ""))
    finally:
        conn.close()


class BlobReader(io.RawIOBase):
    """A blob's bytes as the server streams them; a transfer cut short
    (a damaged chunk, a lost connection) raises on read instead of ending
    early. Close it (or use it in a with block)."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, size: int) -> None:
        self._conn, self._resp, self._left = conn, resp, size

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._left == 0:
            return 0
        try:
            n = self._resp.readinto(b)
        except http.client.IncompleteRead as e:
            raise ContinuumError(f"the blob's transfer ended {self._left} bytes short: damaged on the server, or the connection was lost") from e
        if n == 0:
            raise ContinuumError(f"the blob's transfer ended {self._left} bytes short: damaged on the server, or the connection was lost")
        self._left -= n
        return n

    def close(self) -> None:
        if not self.closed:
            self._conn.close()
        super().close()


def _blob_path(run: str, ref: Union[BlobRef, str]) -> Tuple[BlobRef, str]:
    """Blob ref (a BlobRef, or a reference value) of run and the path that
    reads it; ValueError for a string that is no reference value."""
    if isinstance(ref, str):
        r = parse_ref(ref)
        if r is None:
            raise ValueError("not a reference value")
        ref = r
    path = f"/v1/runs/{quote(run, safe='')}/blobs/{ref.hash}/{ref.size}"
    if ref.media_type:
        path += "?media_type=" + quote(ref.media_type, safe="")
    return ref, path


def open_blob(client: Any, run: str, ref: Union[BlobRef, str]) -> BlobReader:
    """Opens the blob ref (a BlobRef, or a reference value) that run
    references, for streamed reading."""
    ref, path = _blob_path(run, ref)
    conn = _connection(client)
    try:
        conn.request("GET", path, headers=_headers(client))
        resp = conn.getresponse()
        if resp.status != 200:
            raise _error(resp)
    except BaseException:
        conn.close()
        raise
    return BlobReader(conn, resp, ref.size)
