"""What the suites share: the real continuumd binary on a temporary store,
and a fake downstream that counts effects per idempotency key.

The server is the binary named by CONTINUUMD_BIN (.ci/clients builds it);
without it, the harness builds one with `go build` once per test process.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional
from urllib.parse import parse_qs, quote, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
if SRC not in sys.path:
    sys.path.insert(0, SRC)

_built: Optional[str] = None

#: The transport of the clients Server.client and Server.async_client make
#: ("auto": frames, the default; CONTINUUM_TRANSPORT=http runs every
#: suite over HTTP/1.1). test_over_http sets it for the suites it repeats.
TRANSPORT = os.environ.get("CONTINUUM_TRANSPORT") or "auto"


def binary() -> str:
    global _built
    if os.environ.get("CONTINUUMD_BIN"):
        return os.environ["CONTINUUMD_BIN"]
    if _built is None:
        out = os.path.join(tempfile.mkdtemp(prefix="continuumd-bin-"), "continuumd")
        subprocess.run(["go", "build", "-o", out, "./cmd/continuumd"], cwd=REPO, check=True)
        _built = out
    return _built


def seed() -> int:
    """The seed of a randomized test: CONTINUUM_SEED, or the time."""
    s = int(os.environ.get("CONTINUUM_SEED") or time.time_ns() % (1 << 31))
    print(f"seed {s} (CONTINUUM_SEED={s} repeats it)", file=sys.stderr)
    return s


class Server:
    """continuumd on a store of its own, in a short temporary directory
    (a Unix socket path must stay under ~100 bytes)."""

    def __init__(self, *args: str, lease: str = "30s") -> None:
        self.dir = tempfile.mkdtemp(prefix="cd-", dir="/tmp")
        self.store = os.path.join(self.dir, "store")
        self.socket = os.path.join(self.dir, "store.sock")
        self.args = ["--store", self.store, "--socket", self.socket, "--lease", lease, "--log-level", "warn", *args]
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log = os.path.join(self.dir, "server.log")
        self.start()

    def start(self) -> None:
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([binary(), *self.args], stdout=logf, stderr=logf)
        logf.close()
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"continuumd exited {self.proc.returncode}:\n{self.read_log()}")
            if self.healthy():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"continuumd did not answer in 30 s:\n{self.read_log()}")
            time.sleep(0.01)

    def healthy(self) -> bool:
        try:
            status, _ = raw(self.socket, "GET", "/v1/health", token=self.token())
            return status in (200, 401)
        except OSError:
            return False

    def token(self) -> Optional[str]:
        if "--token-file" in self.args:
            with open(self.args[self.args.index("--token-file") + 1]) as f:
                return f.read().strip()
        return None

    def read_log(self) -> str:
        with open(self.log, errors="replace") as f:
            return f.read()

    def kill(self) -> None:
        """SIGKILL: no drain, no final checkpoint."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> int:
        """SIGTERM: the graceful stop. Returns the exit code."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(timeout=60)
        return self.proc.returncode if self.proc else 0

    def restart(self, kill: bool = True) -> None:
        self.kill() if kill else self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, **kw: Any) -> Any:
        import continuum

        kw.setdefault("token", self.token())
        kw.setdefault("transport", TRANSPORT)
        return continuum.Client(socket=self.socket, **kw)

    def async_client(self, **kw: Any) -> Any:
        import continuum

        kw.setdefault("token", self.token())
        kw.setdefault("transport", TRANSPORT)
        return continuum.AsyncClient(socket=self.socket, **kw)


def served(test: Any, *args: str, **kw: Any) -> "tuple[Server, Any]":
    """A server of its own for test (a unittest.TestCase) and a client of
    it that retries for 20 s, both closed by the test's cleanups. args and
    kw are Server's."""
    server = Server(*args, **kw)
    test.addCleanup(server.close)
    client = server.client(retry_for=20)
    test.addCleanup(client.close)
    return server, client


def raw(sock: str, method: str, path: str, body: Optional[bytes] = None, token: Optional[str] = None,
        headers: Optional[Dict[str, str]] = None) -> "tuple[int, Any]":
    """One request over the socket, without the client: (status, JSON)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    try:
        s.connect(sock)
    except OSError:
        s.close()
        raise
    conn = http.client.HTTPConnection("localhost")
    conn.sock = s
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    try:
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(data)
    except json.JSONDecodeError:
        return resp.status, data


class Downstream:
    """The fake outside world, on 127.0.0.1 in the test process: it
    outlives the agents it serves, and counts effects per idempotency key.

        POST /call {"tool", "args", "key", "idempotent"} -> the result (JSON)
        GET  /lookup?key=K -> 200 the result of K's first effect, or 404

    Idempotent calls honour the key (a repeated call returns the first
    result, with no new effect); others take effect every time, which is
    what makes a duplicate visible. before and after are hooks called with
    each call before its effect and after it (before the reply): a test
    kills an agent there. A call for which before returns False is dropped
    with no effect. latency delays every call, as a real service would.
    """

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.lock = threading.Lock()
        self.effects: Dict[str, int] = {}
        self.results: Dict[str, Any] = {}
        self.calls: List[Dict[str, Any]] = []
        self.before: Optional[Callable[[Dict[str, Any]], None]] = None
        self.after: Optional[Callable[[Dict[str, Any]], None]] = None
        ds = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _reply(self, status: int, v: Any) -> None:
                b = json.dumps(v).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(b)))
                self.end_headers()
                try:
                    self.wfile.write(b)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the agent was killed while the call ran

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                call = json.loads(self.rfile.read(n))
                if ds.latency:
                    time.sleep(ds.latency)
                if ds.before and ds.before(call) is False:
                    self.close_connection = True
                    return  # dropped before its effect: no effect, no reply
                result = ds.effect(call)
                if ds.after:
                    ds.after(call)
                self._reply(200, result)

            def do_GET(self) -> None:
                u = urlsplit(self.path)
                key = parse_qs(u.query).get("key", [""])[0]
                with ds.lock:
                    if key in ds.results:
                        self._reply(200, ds.results[key])
                    else:
                        self._reply(404, {"error": "no effect under this key"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def effect(self, call: Dict[str, Any]) -> Any:
        key = call["key"]
        with self.lock:
            self.calls.append(call)
            if call.get("idempotent") and key in self.results:
                return self.results[key]
            self.effects[key] = self.effects.get(key, 0) + 1
            result = {"tool": call["tool"], "key": key, "n": self.effects[key], "args": call.get("args")}
            self.results.setdefault(key, result)
            return result

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def call_downstream(url: str, tool: str, args: Any, key: str, idempotent: bool) -> Any:
    """What an agent's tool does: one POST /call. Raises on any failure."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=30)
    try:
        conn.request("POST", "/call", body=json.dumps({"tool": tool, "args": args, "key": key, "idempotent": idempotent}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"downstream answered {resp.status}")
        return json.loads(data)
    finally:
        conn.close()


def lookup_downstream(url: str, key: str) -> "tuple[bool, Any]":
    """What an agent asks to reconcile: did key take effect, and how."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=30)
    try:
        conn.request("GET", "/lookup?key=" + quote(key, safe=""))
        resp = conn.getresponse()
        data = resp.read()
        if resp.status == 404:
            return False, None
        if resp.status != 200:
            raise RuntimeError(f"downstream lookup answered {resp.status}")
        return True, json.loads(data)
    finally:
        conn.close()
