"""HTTP/1.1 to continuumd over a Unix socket or TCP (TLS optional), with
the standard library only: a small HTTP/1.1 exchange over a socket for the
synchronous client (http.client's header parsing costs more CPU than the
rest of a request), and the same over asyncio streams for the asyncio
one. Connections
are kept alive and pooled; a request on a connection the server closed
fails like any transport error, and the caller retries it (every request
of the protocol may be repeated)."""

from __future__ import annotations

import asyncio
import functools
import http.client
import os
import socket
import ssl
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple
from urllib.parse import urlsplit

#: The transport errors after which a request is sent again.
TRANSPORT_ERRORS = (OSError, http.client.HTTPException, EOFError, asyncio.IncompleteReadError)


@dataclass(frozen=True)
class Endpoint:
    """Where the server is: a Unix socket path, or a TCP host and port
    (with TLS when ssl_context is set), and the bearer token if any."""

    socket_path: Optional[str]
    host: str
    port: int
    ssl_context: Optional[ssl.SSLContext]
    token: Optional[str]
    timeout: float

    @staticmethod
    def make(
        socket_path: Optional[str],
        url: Optional[str],
        token: Optional[str],
        ca_file: Optional[str],
        timeout: float,
    ) -> "Endpoint":
        if (socket_path is None) == (url is None):
            raise ValueError("give the server's socket path or its url, one of them")
        if socket_path is not None:
            return Endpoint(os.fspath(socket_path), "localhost", 0, None, token, timeout)
        assert url is not None
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"url {url!r}: want http://HOST:PORT or https://HOST:PORT")
        ctx = None
        if u.scheme == "https":
            ctx = ssl.create_default_context(cafile=ca_file)
        if token is None:
            raise ValueError("a TCP server needs its bearer token (token=...)")
        return Endpoint(None, u.hostname, u.port or (443 if ctx else 80), ctx, token, timeout)

    @functools.cached_property
    def fixed_headers(self) -> str:
        """The header lines every request carries, each ending in CRLF."""
        h = f"Host: {self.host if self.socket_path is None else 'localhost'}\r\nAccept: application/json\r\n"
        if self.token:
            h += f"Authorization: Bearer {self.token}\r\n"
        return h


def request_bytes(ep: Endpoint, method: str, path: str, body: Optional[bytes]) -> bytes:
    """The request, head and body, as one write."""
    if body is None:
        length = "" if method == "GET" else "Content-Length: 0\r\n"
        return f"{method} {path} HTTP/1.1\r\n{ep.fixed_headers}{length}\r\n".encode("latin-1")
    head = f"{method} {path} HTTP/1.1\r\n{ep.fixed_headers}Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode("latin-1") + body


def parse_status(line: bytes) -> int:
    if not line:
        raise EOFError("the server closed the connection before answering")
    parts = line.decode("latin-1").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise http.client.BadStatusLine(line.decode("latin-1", errors="replace"))
    return int(parts[1])


#: The answer's headers the transports read; the others (Date,
#: Content-Type) are skipped unparsed.
_HEADERS = {"content-length", "connection", "transfer-encoding"}


def parse_header(line: bytes, into: Dict[str, str]) -> None:
    k, _, v = line.partition(b":")
    name = k.strip().lower().decode("latin-1")
    if name in _HEADERS:
        into[name] = v.strip().decode("latin-1")


class _SyncConnection:
    """One keep-alive HTTP/1.1 connection: a request written in one
    write, the answer read by Content-Length (chunked, or until the server
    closes, for the answers Go's HTTP server writes itself)."""

    def __init__(self, ep: Endpoint) -> None:
        if ep.socket_path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(ep.timeout)
            try:
                sock.connect(ep.socket_path)
            except BaseException:
                sock.close()
                raise
        else:
            sock = socket.create_connection((ep.host, ep.port), timeout=ep.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ep.ssl_context is not None:
                try:
                    sock = ep.ssl_context.wrap_socket(sock, server_hostname=ep.host)
                except BaseException:
                    sock.close()
                    raise
        self.sock = sock
        self.rfile = sock.makefile("rb")

    def exchange(self, data: bytes) -> Tuple[int, bytes, bool]:
        self.sock.sendall(data)
        r = self.rfile
        status = parse_status(r.readline(65537))
        hdrs: Dict[str, str] = {}
        while True:
            line = r.readline(65537)
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise EOFError("the server closed the connection in the answer's headers")
            parse_header(line, hdrs)
        keep = hdrs.get("connection", "").lower() != "close"
        if "content-length" in hdrs:
            n = int(hdrs["content-length"])
            body = r.read(n)
            if len(body) != n:
                raise EOFError("the server closed the connection in the answer's body")
        elif hdrs.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(r.readline(65537).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while r.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(r.read(size))
                r.read(2)
            body = b"".join(chunks)
        else:
            body = r.read()
            keep = False
        return status, body, keep

    def close(self) -> None:
        self.rfile.close()
        self.sock.close()


class SyncTransport:
    """One request at a time per connection; connections pooled, safe for
    use by several threads."""

    def __init__(self, ep: Endpoint) -> None:
        self.ep = ep
        self._lock = threading.Lock()
        self._idle: List[_SyncConnection] = []
        self._closed = False

    def request(self, method: str, path: str, body: Optional[bytes]) -> Tuple[int, bytes]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = _SyncConnection(self.ep)
        try:
            status, data, keep = conn.exchange(request_bytes(self.ep, method, path, body))
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if keep and not self._closed:
                self._idle.append(conn)
                conn = None
        if conn is not None:
            conn.close()
        return status, data

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()


class AsyncTransport:
    """HTTP/1.1 over asyncio streams: the request with Content-Length, the
    answer with Content-Length, chunked, or until the connection closes."""

    def __init__(self, ep: Endpoint) -> None:
        self.ep = ep
        self._idle: List[Tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def _connection(self) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        while self._idle:
            r, w = self._idle.pop()
            if not w.is_closing() and not r.at_eof():
                return r, w
            w.close()
        ep = self.ep
        if ep.socket_path is not None:
            return await asyncio.wait_for(asyncio.open_unix_connection(ep.socket_path), ep.timeout)
        return await asyncio.wait_for(
            asyncio.open_connection(ep.host, ep.port, ssl=ep.ssl_context, server_hostname=ep.host if ep.ssl_context else None),
            ep.timeout,
        )

    async def request(self, method: str, path: str, body: Optional[bytes]) -> Tuple[int, bytes]:
        r, w = await self._connection()
        try:
            status, data, keep = await asyncio.wait_for(self._exchange(r, w, method, path, body), self.ep.timeout)
        except BaseException:
            w.close()
            raise
        if keep:
            self._idle.append((r, w))
        else:
            w.close()
        return status, data

    async def _exchange(
        self, r: asyncio.StreamReader, w: asyncio.StreamWriter, method: str, path: str, body: Optional[bytes]
    ) -> Tuple[int, bytes, bool]:
        w.write(request_bytes(self.ep, method, path, body))
        await w.drain()
        status = parse_status(await r.readline())
        hdrs: Dict[str, str] = {}
        while True:
            line = await r.readline()
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise EOFError("the server closed the connection in the answer's headers")
            parse_header(line, hdrs)
        keep = hdrs.get("connection", "").lower() != "close"
        if "content-length" in hdrs:
            data = await r.readexactly(int(hdrs["content-length"]))
        elif hdrs.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await r.readline()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await r.readline()) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(await r.readexactly(size))
                await r.readexactly(2)
            data = b"".join(chunks)
        else:
            data = await r.read()
            keep = False
        return status, data, keep

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for _, w in idle:
            w.close()
            try:
                await w.wait_closed()
            except (OSError, ssl.SSLError):
                pass
