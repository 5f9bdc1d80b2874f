"""The transports to continuumd over a Unix socket or TCP (TLS optional),
with the standard library only.

continuum-frames/1 (the default): the same requests and answers as HTTP,
each in one binary frame (u32 length, u32 id, u32 head length, a head of
text lines, the body), many in flight on one connection and answered in
any order (every route, status, header and error code is HTTP's, as
openapi.json says; only the carrying differs). The asyncio client shares one
connection among its concurrent requests, pipelined with ids; the
synchronous one keeps a pool, one request in flight per connection (a
connection per thread that has a request out), so a thread's long poll
never holds up another's request.

HTTP/1.1 (transport="http", and the fallback): a small HTTP/1.1 exchange
over a socket for the synchronous client (http.client's header parsing
costs more CPU than the rest of a request), and the same over asyncio
streams for the asyncio one; connections kept alive and pooled.

A request on a connection that breaks (the server closed it, restarted,
was killed) fails like any transport error, and the caller retries it:
every request of the protocol may be repeated. Over frames every request
in flight on a connection fails at once when it breaks or brings a frame
that breaks the framing (a malformed head included), and a connection
that broke takes no new request; the asyncio transport opens the next
connection in a task of its own that the waiting requests share, so that
one of them cancelled (an atom's heartbeat stopped) fails none of the
others. A server that does not
answer the frames preface (an older continuumd: it closes, or answers
HTTP's 400) has the client fall back to HTTP, once, and remember it for
the client's life; transport="frames" fails instead."""

from __future__ import annotations

import asyncio
import functools
import http.client
import os
import socket
import ssl
import struct
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple
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
            _check_token(token)
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
        _check_token(token)
        return Endpoint(None, u.hostname, u.port or (443 if ctx else 80), ctx, token, timeout)

    @functools.cached_property
    def fixed_headers(self) -> str:
        """The header lines every request carries, each ending in CRLF."""
        h = f"Host: {self.host if self.socket_path is None else 'localhost'}\r\nAccept: application/json\r\n"
        if self.token:
            h += f"Authorization: Bearer {self.token}\r\n"
        return h

    @functools.cached_property
    def frame_headers(self) -> str:
        """The header lines every frame carries, each ending in LF (no
        Host, Accept, Content-Length: a frame has no use for them)."""
        return f"Authorization: Bearer {self.token}\n" if self.token else ""


def no_server_hint(last: Optional[BaseException], ep: Endpoint) -> str:
    """What to check when nothing answers on a Unix socket: the server may
    not run, or serve another path ("" for other errors)."""
    if ep.socket_path is None or not isinstance(last, (FileNotFoundError, ConnectionRefusedError)):
        return ""
    return (f" (is continuumd running, serving {os.path.abspath(ep.socket_path)}? continuumd --store DIR serves DIR.sock;"
            f" a relative socket path is taken from the working directory, {os.getcwd()})")


def _check_token(token: Optional[str]) -> None:
    if token is not None and any(c in token for c in "\r\n\x00"):
        raise ValueError("the token holds a line break or a zero byte: it cannot be sent in a header")


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


def _connect(ep: Endpoint) -> socket.socket:
    """A new connection to the server (TLS set up on TCP when asked)."""
    if ep.socket_path is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(ep.timeout)
        try:
            sock.connect(ep.socket_path)
        except BaseException:
            sock.close()
            raise
        return sock
    sock = socket.create_connection((ep.host, ep.port), timeout=ep.timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ep.ssl_context is not None:
        try:
            sock = ep.ssl_context.wrap_socket(sock, server_hostname=ep.host)
        except BaseException:
            sock.close()
            raise
    return sock


class _SyncConnection:
    """One keep-alive HTTP/1.1 connection: a request written in one
    write, the answer read by Content-Length (chunked, or until the server
    closes, for the answers Go's HTTP server writes itself)."""

    def __init__(self, ep: Endpoint) -> None:
        sock = _connect(ep)
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


class _SyncHTTP:
    """HTTP/1.1: one request at a time per connection; connections
    pooled, safe for use by several threads."""

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


async def _dial(ep: Endpoint) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A new connection of the asyncio transports to the server (TLS set
    up on TCP when asked), within the endpoint's timeout."""
    if ep.socket_path is not None:
        return await asyncio.wait_for(asyncio.open_unix_connection(ep.socket_path), ep.timeout)
    return await asyncio.wait_for(
        asyncio.open_connection(ep.host, ep.port, ssl=ep.ssl_context, server_hostname=ep.host if ep.ssl_context else None),
        ep.timeout,
    )


class _AsyncHTTP:
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
        return await _dial(self.ep)

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


# ---- continuum-frames/1 ----

#: What a frames connection starts with, in both directions.
PREFACE = b"\x00continuum-frames/1\n"
#: A frame's fixed part: n (the bytes after it), id, hlen.
_FIXED = struct.Struct(">III")
#: The server's limit of a head (an answer's is far smaller).
MAX_HEAD = 64 << 10
#: The transports a client may ask for.
TRANSPORTS = ("auto", "frames", "http")


class FrameError(http.client.HTTPException):
    """The server's bytes break continuum-frames/1: the connection is
    closed (its framing cannot be trusted any more) and the request fails
    as on any transport error."""


class NoFrames(EOFError):
    """The server did not answer the frames preface: it closed the
    connection, or answered something else (an older continuumd answers
    HTTP's 400). definite: it answered bytes that are not the preface."""

    def __init__(self, msg: str, definite: bool) -> None:
        super().__init__(msg)
        self.definite = definite


def check_transport(transport: str) -> str:
    if transport not in TRANSPORTS:
        raise ValueError(f"transport {transport!r}: want 'auto' (frames, falling back to HTTP), 'frames' or 'http'")
    return transport


def frame_bytes(ep: Endpoint, fid: int, method: str, target: str, body: Optional[bytes]) -> bytes:
    """A request's frame: the fixed part, the head, the body (JSON)."""
    head = f"{method} {target}\n{ep.frame_headers}".encode("utf-8")
    if body is None:
        return _FIXED.pack(8 + len(head), fid, len(head)) + head
    return _FIXED.pack(8 + len(head) + len(body), fid, len(head)) + head + body


def parse_fixed(b: bytes) -> Tuple[int, int, int]:
    """(id, hlen, the length of head and body) of an answer's 12 first
    bytes; FrameError if they cannot be a frame's."""
    n, fid, hlen = _FIXED.unpack(b)
    if n < 8 or hlen > n - 8 or hlen > MAX_HEAD:
        raise FrameError(f"an answer's frame is malformed: n={n}, head length {hlen}")
    return fid, hlen, n - 8


def parse_answer_head(head: bytes) -> int:
    """The status of an answer's head ("STATUS\\n" then header lines: the
    transports need none of them)."""
    line, nl, _ = head.partition(b"\n")
    if not nl or len(line) != 3 or not line.isdigit():
        raise FrameError(f"an answer's head does not start with a status line: {head[:40]!r}")
    return int(line)


def _preface_error(got: bytes) -> NoFrames:
    if got and not PREFACE.startswith(got):
        return NoFrames(f"the server answered {got[:24]!r} instead of the continuum-frames/1 preface (an older continuumd?)", True)
    return NoFrames("the server closed the connection before its continuum-frames/1 preface (an older continuumd, or it stopped)", False)


class _SyncFrames:
    """One frames connection of the synchronous client: one request in
    flight at a time; the preface written with the first request and read
    before its answer."""

    def __init__(self, ep: Endpoint, probe: bool) -> None:
        self.ep = ep
        #: opened after a connection failed its preface: if this one fails
        #: too, the client falls back to HTTP.
        self.probe = probe
        self.sock = _connect(ep)
        self.rfile = self.sock.makefile("rb")
        self.confirmed = False
        self.last_id = 0

    def exchange(self, method: str, target: str, body: Optional[bytes]) -> Tuple[int, bytes]:
        self.last_id = fid = self.last_id % 0xFFFFFFFF + 1
        data = frame_bytes(self.ep, fid, method, target, body)
        r = self.rfile
        if not self.confirmed:
            try:
                self.sock.sendall(PREFACE + data)
                got = r.read(len(PREFACE))
            except (ConnectionResetError, BrokenPipeError):
                raise _preface_error(b"") from None
            if got != PREFACE:
                raise _preface_error(got)
            self.confirmed = True
        else:
            self.sock.sendall(data)
        fixed = r.read(12)
        if len(fixed) != 12:
            raise EOFError("the server closed the frames connection before the answer")
        aid, hlen, size = parse_fixed(fixed)
        rest = r.read(size)
        if len(rest) != size:
            raise EOFError(f"the server closed the frames connection in the middle of an answer ({len(rest)} of {size} bytes)")
        if aid != fid:
            raise FrameError(f"an answer carries id {aid}, the request in flight is {fid}")
        return parse_answer_head(rest[:hlen]), rest[hlen:]

    def close(self) -> None:
        self.rfile.close()
        self.sock.close()


class SyncTransport:
    """The synchronous client's transport: frames (a pool of connections,
    one request in flight on each), HTTP/1.1 when asked or as the
    fallback; safe for use by several threads."""

    def __init__(self, ep: Endpoint, transport: str = "auto") -> None:
        self.ep = ep
        self.transport = check_transport(transport)
        self._http = _SyncHTTP(ep)
        self._lock = threading.Lock()
        self._idle: List[_SyncFrames] = []
        self._closed = False
        #: a frames connection failed its preface: the next is a probe.
        self._suspect = False
        #: the server does not speak frames: HTTP from now on.
        self._no_frames = transport == "http"

    @property
    def frames(self) -> bool:
        """Whether requests go in frames (False: HTTP/1.1)."""
        return not self._no_frames

    def request(self, method: str, path: str, body: Optional[bytes]) -> Tuple[int, bytes]:
        while not self._no_frames:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = _SyncFrames(self.ep, self._suspect)
            try:
                status, data = conn.exchange(method, path, body)
            except NoFrames as e:
                conn.close()
                if self.transport == "frames":
                    raise
                if e.definite or conn.probe:
                    self._no_frames = True
                else:
                    self._suspect = True
                continue
            except BaseException:
                conn.close()
                raise
            self._suspect = False
            with self._lock:
                if not self._closed:
                    self._idle.append(conn)
                    conn = None
            if conn is not None:
                conn.close()
            return status, data
        return self._http.request(method, path, body)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()
        self._http.close()


class _AsyncFrames:
    """One frames connection of the asyncio client, shared by its
    concurrent requests: each is written as one frame with a new id, and
    a reader task hands every answer to the request of its id, in
    whatever order they come. When the connection breaks, every request
    in flight fails with a transport error."""

    def __init__(self, ep: Endpoint, r: asyncio.StreamReader, w: asyncio.StreamWriter, probe: bool) -> None:
        self.ep = ep
        self.r, self.w = r, w
        self.probe = probe
        self.loop = asyncio.get_running_loop()
        self.pending: Dict[int, "asyncio.Future[Tuple[int, bytes]]"] = {}
        self.last_id = 0
        #: answers read so far (a request timing out with none read since
        #: it was sent closes the connection: the server is not answering).
        self.received = 0
        self.confirmed = False
        self.error: Optional[BaseException] = None
        self.unsent_preface = True  # written with the first request
        self.task = self.loop.create_task(self._read())

    def broken(self) -> bool:
        return self.error is not None

    async def request(self, method: str, target: str, body: Optional[bytes], timeout: float) -> Tuple[int, bytes]:
        if self.error is not None:
            raise self._failure()
        self.last_id = fid = self.last_id % 0xFFFFFFFF + 1
        while fid in self.pending:  # after 2^32 requests, one still in flight
            self.last_id = fid = self.last_id % 0xFFFFFFFF + 1
        fut: "asyncio.Future[Tuple[int, bytes]]" = self.loop.create_future()
        self.pending[fid] = fut
        received = self.received
        timer = self.loop.call_later(timeout, self._expire, fid, received, timeout)
        try:
            data = frame_bytes(self.ep, fid, method, target, body)
            if self.unsent_preface:
                data, self.unsent_preface = PREFACE + data, False
            self.w.write(data)
            if body is not None and len(body) > 65536:
                await self.w.drain()
            return await fut
        finally:
            timer.cancel()
            self.pending.pop(fid, None)

    def _expire(self, fid: int, received: int, timeout: float) -> None:
        fut = self.pending.pop(fid, None)
        if fut is None or fut.done():
            return
        fut.set_exception(TimeoutError(f"no answer in {timeout:g} s"))
        if self.received == received:
            # Nothing came since the request went out: the connection (or
            # the server) is stuck, and the retry needs a new one.
            self._fail(TimeoutError(f"the server sent nothing for {timeout:g} s"))

    def _failure(self) -> BaseException:
        e = self.error
        if isinstance(e, NoFrames):
            return NoFrames(str(e), e.definite)
        if isinstance(e, FrameError):
            return FrameError(str(e))
        if isinstance(e, TimeoutError):
            return TimeoutError(str(e))
        return EOFError(f"the frames connection broke: {e or 'the server closed it'}")

    def _fail(self, e: BaseException) -> None:
        if self.error is None:
            self.error = e
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(self._failure())
        self.w.close()
        if not self.task.done() and asyncio.current_task() is not self.task:
            self.task.cancel()

    async def _read(self) -> None:
        r = self.r
        try:
            try:
                got = await r.readexactly(len(PREFACE))
            except asyncio.IncompleteReadError as e:
                raise _preface_error(e.partial) from None
            except (ConnectionResetError, BrokenPipeError):
                raise _preface_error(b"") from None
            if got != PREFACE:
                raise _preface_error(got)
            self.confirmed = True
            while True:
                fixed = await r.readexactly(12)
                fid, hlen, size = parse_fixed(fixed)
                rest = await r.readexactly(size)
                self.received += 1
                # The head is parsed before the request is taken off
                # pending: a malformed one fails it with the others.
                status = parse_answer_head(rest[:hlen])
                fut = self.pending.pop(fid, None)
                if fut is not None and not fut.done():
                    fut.set_result((status, rest[hlen:]))
                # else: the answer of a request given up (timed out, cancelled)
        except asyncio.IncompleteReadError as e:
            what = "in the middle of an answer" if e.partial else "with requests in flight" if self.pending else "while idle"
            self._fail(EOFError(f"the server closed the frames connection {what}"))
        except asyncio.CancelledError:
            self._fail(EOFError("the client closed the frames connection"))
        except BaseException as e:
            self._fail(e)

    async def close(self) -> None:
        self._fail(EOFError("the client closed the frames connection"))
        try:
            await self.task
        except BaseException:
            pass
        try:
            await self.w.wait_closed()
        except (OSError, ssl.SSLError):
            pass


class AsyncTransport:
    """The asyncio client's transport: one frames connection shared by
    the client's concurrent requests (pipelined, answered in any order),
    HTTP/1.1 when asked or as the fallback."""

    def __init__(self, ep: Endpoint, transport: str = "auto") -> None:
        self.ep = ep
        self.transport = check_transport(transport)
        self._http = _AsyncHTTP(ep)
        self._conn: Optional[_AsyncFrames] = None
        self._opening: Optional["asyncio.Task[_AsyncFrames]"] = None
        self._suspect = False
        self._no_frames = transport == "http"

    @property
    def frames(self) -> bool:
        """Whether requests go in frames (False: HTTP/1.1)."""
        return not self._no_frames

    async def _connection(self) -> _AsyncFrames:
        c = self._conn
        if c is not None and c.error is None:
            return c
        opening = self._opening
        if opening is None:
            # A task of its own opens the connection, and the requests
            # wait for it: one of them cancelled (a heartbeat stopped, a
            # caller's timeout) fails none of the others.
            opening = self._opening = asyncio.get_running_loop().create_task(self._open())
        try:
            return await asyncio.shield(opening)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if opening.cancelled() and task is not None and not task.cancelling():
                # close() gave the opening up, not this request's caller.
                raise EOFError("the client closed the frames connection being opened") from None
            raise

    async def _open(self) -> _AsyncFrames:
        try:
            r, w = await _dial(self.ep)
            c = self._conn = _AsyncFrames(self.ep, r, w, self._suspect)
            return c
        finally:
            self._opening = None

    async def request(self, method: str, path: str, body: Optional[bytes]) -> Tuple[int, bytes]:
        while not self._no_frames:
            c = await self._connection()
            try:
                status, data = await c.request(method, path, body, self.ep.timeout)
            except NoFrames as e:
                if self.transport == "frames":
                    raise
                if e.definite or c.probe:
                    self._no_frames = True
                else:
                    self._suspect = True
                continue
            if c.probe:
                self._suspect = False
            return status, data
        return await self._http.request(method, path, body)

    async def close(self) -> None:
        opening = self._opening
        if opening is not None:
            opening.cancel()
            await asyncio.wait([opening])  # given up; a connection it opened is closed below
            if not opening.cancelled():
                opening.exception()  # retrieved: the dial's error is of no use now
            if self._opening is opening:
                self._opening = None  # cancelled before it began
        c, self._conn = self._conn, None
        if c is not None:
            await c.close()
        await self._http.close()
