"""continuum-frames/1 in the client, against byte strings built by hand
from the protocol's text and a fake server in this process that plays the
server's side as a test needs it: split reads, answers out of order, a
connection broken in the middle of an answer (a transport error the
retry rules handle), a server that closes after the preface or answers
HTTP (the fallback, once), and ids that differ while in flight."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import struct
import tempfile
import threading
import time
import unittest
from unittest import mock
from typing import Any, Callable, Dict, List, Optional, Tuple

import harness  # noqa: F401

import continuum
from continuum import _transport
from continuum._transport import PREFACE, Endpoint, FrameError, NoFrames

Handler = Callable[["Conn"], None]


class Conn:
    """The server's side of one accepted connection."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rfile = sock.makefile("rb")

    def read_exact(self, n: int) -> bytes:
        b = self.rfile.read(n)
        if len(b) != n:
            raise EOFError(f"the client closed after {len(b)} of {n} bytes")
        return b

    def read_preface(self) -> bytes:
        return self.read_exact(len(PREFACE))

    def read_frame(self) -> Tuple[int, str, Dict[str, str], bytes]:
        """(id, request line, headers with lower-case names, body)."""
        n, fid, hlen = struct.unpack(">III", self.read_exact(12))
        rest = self.read_exact(n - 8)
        head = rest[:hlen].decode("utf-8")
        assert head.endswith("\n"), head
        lines = head[:-1].split("\n")
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(": ")
            headers[k.lower()] = v
        return fid, lines[0], headers, rest[hlen:]

    def send(self, b: bytes, split: bool = False) -> None:
        if not split:
            self.sock.sendall(b)
            return
        for i in range(len(b)):  # one byte per write: the client's reads split anywhere
            self.sock.sendall(b[i:i + 1])
            if i % 7 == 0:
                time.sleep(0.0005)

    def close(self) -> None:
        self.rfile.close()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def answer(fid: int, status: int, body: Any, headers: Optional[Dict[str, str]] = None) -> bytes:
    """An answer's frame, built by hand as the protocol's text says."""
    head = f"{status}\n" + "".join(f"{k}: {v}\n" for k, v in (headers or {"Content-Type": "application/json"}).items())
    h = head.encode()
    b = json.dumps(body).encode()
    return struct.pack(">I", 8 + len(h) + len(b)) + struct.pack(">I", fid) + struct.pack(">I", len(h)) + h + b


def echo(conn: Conn, fid: int, line: str) -> None:
    """Answers a request with its request line, as JSON."""
    conn.send(answer(fid, 200, {"line": line}))


class FakeServer:
    """A Unix socket whose connections are handed, one after the other,
    to the handlers given (the last one serves every later connection)."""

    def __init__(self, test: unittest.TestCase, *handlers: Handler) -> None:
        self.dir = tempfile.mkdtemp(prefix="cf-", dir="/tmp")
        test.addCleanup(shutil.rmtree, self.dir, True)
        self.path = os.path.join(self.dir, "s.sock")
        self.handlers = list(handlers)
        self.accepted = 0
        self.errors: List[BaseException] = []
        self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lsock.bind(self.path)
        self.lsock.listen(16)
        self.threads: List[threading.Thread] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        test.addCleanup(self.close)

    def _accept(self) -> None:
        while True:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            h = self.handlers[min(self.accepted, len(self.handlers) - 1)]
            self.accepted += 1
            t = threading.Thread(target=self._serve, args=(h, Conn(s)), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, h: Handler, c: Conn) -> None:
        try:
            h(c)
        except (EOFError, OSError):
            pass  # the client went away
        except BaseException as e:
            self.errors.append(e)
        finally:
            c.close()

    def close(self) -> None:
        self.lsock.close()
        for t in self.threads:
            t.join(10)


def serve_frames(c: Conn) -> None:
    """A well-behaved server: the preface back, every request echoed."""
    assert c.read_preface() == PREFACE
    c.send(PREFACE)
    echo_all(c)


def echo_all(c: Conn) -> None:
    while True:
        fid, line, _, _ = c.read_frame()
        echo(c, fid, line)


def serve_http(c: Conn) -> None:
    """An HTTP/1.1 server that closes a connection starting with a zero
    byte (what an older continuumd does with the preface, less its 400)."""
    r = c.rfile
    if r.peek(1)[:1] == b"\x00":
        return
    while True:
        line = r.readline()
        if not line:
            return
        n = 0
        while True:
            h = r.readline()
            if h in (b"\r\n", b""):
                break
            if h.lower().startswith(b"content-length:"):
                n = int(h.split(b":")[1])
        r.read(n)
        b = json.dumps({"line": line.decode().rsplit(" ", 1)[0], "http": True}).encode()
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(b) + b)


def serve_http_400(c: Conn) -> None:
    """What Go's HTTP server answers to the preface: a 400, then close."""
    if c.rfile.peek(1)[:1] == b"\x00":
        c.send(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request")
        return
    serve_http(c)


class FramingTest(unittest.TestCase):
    def test_request_frame_as_the_spec_builds_it(self) -> None:
        ep = Endpoint.make("/x.sock", None, "tok", None, 5)
        body = b'{"delta":[]}'
        head = b"POST /v1/runs/r%2F1/attempts/a/commit?wait=1\nAuthorization: Bearer tok\n"
        want = (struct.pack(">I", 8 + len(head) + len(body)) + b"\x00\x00\x00\x07" + struct.pack(">I", len(head)) + head + body)
        self.assertEqual(_transport.frame_bytes(ep, 7, "POST", "/v1/runs/r%2F1/attempts/a/commit?wait=1", body), want)
        # No token, no body: the request line alone.
        ep = Endpoint.make("/x.sock", None, None, None, 5)
        self.assertEqual(_transport.frame_bytes(ep, 1, "GET", "/v1/health", None),
                         b"\x00\x00\x00\x17\x00\x00\x00\x01\x00\x00\x00\x0fGET /v1/health\n")
        self.assertEqual(PREFACE, b"\x00continuum-frames/1\n")
        self.assertEqual(len(PREFACE), 20)

    def test_answer_parsing_and_malformed_frames(self) -> None:
        self.assertEqual(_transport.parse_fixed(struct.pack(">III", 8 + 4 + 2, 9, 4)), (9, 4, 6))
        self.assertEqual(_transport.parse_answer_head(b"404\nContent-Type: application/json\n"), 404)
        self.assertEqual(_transport.parse_answer_head(b"200\n"), 200)
        for n, hlen in ((7, 0), (8, 1), (100, 93), (8 + (64 << 10) + 1 + 8, (64 << 10) + 1)):
            with self.assertRaises(FrameError, msg=f"n={n} hlen={hlen}"):
                _transport.parse_fixed(struct.pack(">III", n, 1, hlen))
        for head in (b"", b"200", b"OK\n", b"20\n", b"2000\n", b"HTTP/1.1 200 OK\n"):
            with self.assertRaises(FrameError, msg=repr(head)):
                _transport.parse_answer_head(head)
        # A frame error is a transport error: the connection is dropped and
        # the request sent again.
        self.assertTrue(issubclass(FrameError, _transport.TRANSPORT_ERRORS))
        self.assertTrue(issubclass(NoFrames, _transport.TRANSPORT_ERRORS))

    def test_bad_transport_and_token(self) -> None:
        with self.assertRaises(ValueError):
            continuum.Client(socket="/x.sock", transport="h2")
        with self.assertRaises(ValueError):
            continuum.Client(socket="/x.sock", token="a\nX-Evil: 1")


class SyncFramesTest(unittest.TestCase):
    def test_split_reads_and_headers(self) -> None:
        seen: List[Tuple[int, str, Dict[str, str], bytes]] = []

        def h(c: Conn) -> None:
            c.send(PREFACE, split=True)  # the preface back before reading it: the spec allows either order
            self.assertEqual(c.read_preface(), PREFACE)
            while True:
                f = c.read_frame()
                seen.append(f)
                c.send(answer(f[0], 201, {"line": f[1], "pad": "é" * 300}), split=True)

        fs = FakeServer(self, h)
        client = continuum.Client(socket=fs.path, token="t0k", retry_for=5)
        self.addCleanup(client.close)
        self.assertEqual(client._send(continuum._core.Request("POST", "/v1/x", {"a": "é"}))["line"], "POST /v1/x")
        self.assertEqual(client._send(continuum._core.Request("GET", "/v1/y"))["line"], "GET /v1/y")
        self.assertEqual(fs.accepted, 1, "one connection for both requests")
        self.assertEqual([f[0] for f in seen], [1, 2])
        self.assertEqual(seen[0][2], {"authorization": "Bearer t0k"})  # no Host, Content-Length, Content-Type (JSON)
        self.assertEqual(json.loads(seen[0][3]), {"a": "é"})
        self.assertEqual(seen[1][3], b"")
        self.assertEqual(fs.errors, [])

    def test_error_answers_keep_their_status_and_code(self) -> None:
        def h(c: Conn) -> None:
            c.read_preface()
            c.send(PREFACE)
            fid, _, _, _ = c.read_frame()
            c.send(answer(fid, 404, {"error": {"code": "run_not_found", "message": "no run r"}}))
            echo_all(c)

        fs = FakeServer(self, h)
        client = continuum.Client(socket=fs.path, retry_for=5)
        self.addCleanup(client.close)
        with self.assertRaises(continuum.NotFound) as cm:
            client.runs()
        self.assertEqual(cm.exception.code, "run_not_found")

    def test_broken_mid_answer_is_retried_on_a_new_connection(self) -> None:
        def broken(c: Conn) -> None:
            c.read_preface()
            c.send(PREFACE)
            fid, line, _, _ = c.read_frame()
            a = answer(fid, 200, {"line": line, "first": True})
            c.send(a[: len(a) - 5])  # then the connection breaks

        fs = FakeServer(self, broken, serve_frames)
        client = continuum.Client(socket=fs.path, retry_for=5)
        self.addCleanup(client.close)
        self.assertEqual(client.health(), {"line": "GET /v1/health"})
        self.assertEqual(fs.accepted, 2)
        self.assertTrue(client._t.frames)

        # The transport itself raises a transport error (EOFError) there.
        fs2 = FakeServer(self, broken)
        t = _transport.SyncTransport(Endpoint.make(fs2.path, None, None, None, 5))
        self.addCleanup(t.close)
        with self.assertRaises(EOFError):
            t.request("GET", "/v1/health", None)

    def test_a_silent_server_times_out_and_the_next_request_gets_a_new_connection(self) -> None:
        silent = threading.Event()
        self.addCleanup(silent.set)

        def h(c: Conn) -> None:
            c.read_preface()
            c.send(PREFACE)
            c.read_frame()
            c.send(answer(1, 200, {})[:5])  # part of the fixed part, then nothing
            silent.wait(10)

        fs = FakeServer(self, h, serve_frames)
        t = _transport.SyncTransport(Endpoint.make(fs.path, None, None, None, 0.2))
        self.addCleanup(t.close)
        t0 = time.monotonic()
        with self.assertRaises(TimeoutError):
            t.request("GET", "/v1/a", None)
        self.assertGreaterEqual(time.monotonic() - t0, 0.15)
        self.assertEqual(json.loads(t.request("GET", "/v1/b", None)[1]), {"line": "GET /v1/b"})
        self.assertEqual(fs.accepted, 2)
        silent.set()

    def test_wrong_id_is_a_frame_error(self) -> None:
        def h(c: Conn) -> None:
            c.read_preface()
            c.send(PREFACE)
            fid, line, _, _ = c.read_frame()
            c.send(answer(fid + 1, 200, {}))

        fs = FakeServer(self, h, serve_frames)
        t = _transport.SyncTransport(Endpoint.make(fs.path, None, None, None, 5))
        self.addCleanup(t.close)
        with self.assertRaises(FrameError):
            t.request("GET", "/v1/health", None)
        self.assertEqual(json.loads(t.request("GET", "/v1/health", None)[1]), {"line": "GET /v1/health"})

    def test_fallback_when_the_server_closes_after_the_preface(self) -> None:
        fs = FakeServer(self, serve_http)
        client = continuum.Client(socket=fs.path, retry_for=5)
        self.addCleanup(client.close)
        self.assertEqual(client.health(), {"line": "GET /v1/health", "http": True})
        # Two frames connections (the second a probe), then HTTP, remembered.
        self.assertFalse(client._t.frames)
        n = fs.accepted
        self.assertEqual(n, 3)
        self.assertEqual(client.stats(), {"line": "GET /v1/stats", "http": True})
        self.assertEqual(fs.accepted, n, "the HTTP connection is kept")

    def test_fallback_at_once_when_the_server_answers_http(self) -> None:
        fs = FakeServer(self, serve_http_400)
        client = continuum.Client(socket=fs.path, retry_for=5)
        self.addCleanup(client.close)
        self.assertEqual(client.health(), {"line": "GET /v1/health", "http": True})
        self.assertEqual(fs.accepted, 2)
        self.assertFalse(client._t.frames)

    def test_forced_frames_does_not_fall_back(self) -> None:
        fs = FakeServer(self, serve_http_400)
        client = continuum.Client(socket=fs.path, retry_for=0.3, transport="frames")
        self.addCleanup(client.close)
        with self.assertRaises(continuum.Unavailable) as cm:
            client.health()
        self.assertIsInstance(cm.exception.__cause__, NoFrames)
        self.assertTrue(client._t.frames)

    def test_a_restarted_server_is_not_taken_for_an_old_one(self) -> None:
        # The first connection closes before the preface (a server killed
        # there); the probe gets it: frames stay.
        fs = FakeServer(self, lambda c: None, serve_frames)
        client = continuum.Client(socket=fs.path, retry_for=5)
        self.addCleanup(client.close)
        self.assertEqual(client.health(), {"line": "GET /v1/health"})
        self.assertTrue(client._t.frames)
        self.assertFalse(client._t._suspect)

    def test_forced_http(self) -> None:
        fs = FakeServer(self, serve_http)
        client = continuum.Client(socket=fs.path, retry_for=5, transport="http")
        self.addCleanup(client.close)
        self.assertEqual(client.health(), {"line": "GET /v1/health", "http": True})
        self.assertEqual(fs.accepted, 1)

    def test_threads_get_connections_of_their_own(self) -> None:
        slow_in, release = threading.Event(), threading.Event()

        def h(c: Conn) -> None:
            c.read_preface()
            c.send(PREFACE)
            while True:
                fid, line, _, _ = c.read_frame()
                if line.endswith("/slow"):
                    slow_in.set()
                    release.wait(10)  # a long poll
                echo(c, fid, line)

        fs = FakeServer(self, h)
        client = continuum.Client(socket=fs.path, retry_for=5)
        self.addCleanup(client.close)
        self.addCleanup(release.set)
        out: Dict[str, Any] = {}
        t = threading.Thread(target=lambda: out.setdefault("slow", client._get("/v1/slow")))
        t.start()
        self.assertTrue(slow_in.wait(10))
        # While the slow request is out, this thread's go on another connection.
        for i in range(3):
            self.assertEqual(client._get(f"/v1/fast{i}"), {"line": f"GET /v1/fast{i}"})
        self.assertNotIn("slow", out)
        release.set()
        t.join(10)
        self.assertEqual(out["slow"], {"line": "GET /v1/slow"})
        self.assertEqual(fs.accepted, 2)


@unittest.skipUnless(os.environ.get("CONTINUUMD_OLD_BIN"), "CONTINUUMD_OLD_BIN: a continuumd without frames (built from before them)")
class OlderServerTest(unittest.TestCase):
    """A real continuumd from before frames: its HTTP server answers the
    preface with a 400 and closes; the client goes on over HTTP."""

    def test_fallback_to_a_real_older_server(self) -> None:
        old = os.environ["CONTINUUMD_OLD_BIN"]
        saved = os.environ.get("CONTINUUMD_BIN")
        os.environ["CONTINUUMD_BIN"] = old
        try:
            server = harness.Server()
        finally:
            if saved is None:
                del os.environ["CONTINUUMD_BIN"]
            else:
                os.environ["CONTINUUMD_BIN"] = saved
        self.addCleanup(server.close)
        client = server.client(retry_for=5)
        self.addCleanup(client.close)
        run = client.run("old")
        with run.atom() as atom:
            atom.delta.set("k", "v")
        self.assertEqual(run.state().text("k"), "v")
        self.assertFalse(client._t.frames)
        forced = server.client(retry_for=0.3, transport="frames")
        self.addCleanup(forced.close)
        with self.assertRaises(continuum.Unavailable):
            forced.health()


class AsyncFramesTest(unittest.IsolatedAsyncioTestCase):
    async def test_answers_out_of_order_on_one_connection(self) -> None:
        ids: List[int] = []

        def h(c: Conn) -> None:
            c.read_preface()
            c.send(PREFACE)
            frames = [c.read_frame() for _ in range(3)]
            ids.extend(f[0] for f in frames)
            for fid, line, _, _ in reversed(frames):  # the last first
                c.send(answer(fid, 200, {"line": line}), split=True)
            echo_all(c)

        fs = FakeServer(self, h)
        client = continuum.AsyncClient(socket=fs.path, retry_for=5)
        try:
            got = await asyncio.gather(*(client._get(f"/v1/r{i}") for i in range(3)))
            self.assertEqual(got, [{"line": f"GET /v1/r{i}"} for i in range(3)])
            self.assertEqual(sorted(ids), [1, 2, 3])
            self.assertEqual(await client.health(), {"line": "GET /v1/health"})
            self.assertEqual(fs.accepted, 1)
        finally:
            await client.close()

    async def test_broken_mid_answer_fails_every_request_in_flight_and_they_are_retried(self) -> None:
        def broken(c: Conn) -> None:
            c.read_preface()
            c.send(PREFACE)
            a = c.read_frame()
            b = c.read_frame()
            c.send(answer(a[0], 200, {"line": a[1]}))
            whole = answer(b[0], 200, {"line": b[1]})
            c.send(whole[:20])

        fs = FakeServer(self, broken, serve_frames)
        client = continuum.AsyncClient(socket=fs.path, retry_for=5)
        try:
            got = await asyncio.gather(client._get("/v1/a"), client._get("/v1/b"))
            self.assertEqual(got, [{"line": "GET /v1/a"}, {"line": "GET /v1/b"}])
            self.assertEqual(fs.accepted, 2)
        finally:
            await client.close()
        fs2 = FakeServer(self, broken)
        t = _transport.AsyncTransport(Endpoint.make(fs2.path, None, None, None, 5))
        try:
            r = await asyncio.gather(t.request("GET", "/v1/a", None), t.request("GET", "/v1/b", None), return_exceptions=True)
            self.assertEqual(r[0][0], 200)
            self.assertIsInstance(r[1], EOFError)
            self.assertIn("in the middle of an answer", str(r[1]))
        finally:
            await t.close()

    async def test_fallback_and_forced_frames(self) -> None:
        fs = FakeServer(self, serve_http)
        client = continuum.AsyncClient(socket=fs.path, retry_for=5)
        try:
            got = await asyncio.gather(client.health(), client.stats())
            self.assertEqual(got, [{"line": "GET /v1/health", "http": True}, {"line": "GET /v1/stats", "http": True}])
            self.assertFalse(client._t.frames)
        finally:
            await client.close()
        fs = FakeServer(self, serve_http_400)
        client = continuum.AsyncClient(socket=fs.path, retry_for=0.3, transport="frames")
        try:
            with self.assertRaises(continuum.Unavailable) as cm:
                await client.health()
            self.assertIsInstance(cm.exception.__cause__, NoFrames)
        finally:
            await client.close()

    async def test_a_request_timing_out_on_a_silent_connection_drops_it(self) -> None:
        silent = threading.Event()

        def h(c: Conn) -> None:
            c.read_preface()
            c.send(PREFACE)
            c.read_frame()
            silent.wait(10)  # never answers

        fs = FakeServer(self, h, serve_frames)
        self.addCleanup(silent.set)
        t = _transport.AsyncTransport(Endpoint.make(fs.path, None, None, None, 0.2))
        try:
            with self.assertRaises(TimeoutError):
                await t.request("GET", "/v1/a", None)
            st, body = await t.request("GET", "/v1/b", None)
            self.assertEqual(json.loads(body), {"line": "GET /v1/b"})
            self.assertEqual(fs.accepted, 2)
        finally:
            await t.close()
            silent.set()

    async def test_cancelled_request_leaves_the_connection_usable(self) -> None:
        def h(c: Conn) -> None:
            c.read_preface()
            c.send(PREFACE)
            first = c.read_frame()
            second = c.read_frame()
            echo(c, second[0], second[1])
            echo(c, first[0], first[1])  # the answer of a request given up: ignored
            echo_all(c)

        fs = FakeServer(self, h)
        t = _transport.AsyncTransport(Endpoint.make(fs.path, None, None, None, 5))
        try:
            task = asyncio.ensure_future(t.request("GET", "/v1/given-up", None))
            await asyncio.sleep(0.05)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            got = await t.request("GET", "/v1/b", None)
            self.assertEqual(json.loads(got[1]), {"line": "GET /v1/b"})
            got = await t.request("GET", "/v1/c", None)
            self.assertEqual(json.loads(got[1]), {"line": "GET /v1/c"})
            self.assertEqual(fs.accepted, 1)
        finally:
            await t.close()

    async def _connection_of(self, t: "_transport.AsyncTransport") -> "_transport._AsyncFrames":
        """t's frames connection, once a request opened it."""
        while t._conn is None:
            await asyncio.sleep(0.001)
        return t._conn

    async def test_a_malformed_answer_head_fails_its_request_with_the_others(self) -> None:
        # The frame of request a has a head without a status line: the
        # framing cannot be trusted, the connection is dropped, and every
        # request in flight fails, a's too. (a's future was taken off the
        # connection's requests before its head was parsed: the reader
        # failed b and ended, and a waited for ever, its timer finding
        # nothing to expire.)
        release = threading.Event()

        def h(c: Conn) -> None:
            c.read_preface()
            c.send(PREFACE)
            a, _ = c.read_frame(), c.read_frame()
            head = b"OK\n"
            c.send(struct.pack(">III", 8 + len(head), a[0], len(head)) + head)
            release.wait(30)

        fs = FakeServer(self, h)
        self.addCleanup(release.set)  # before the server's close, which joins h
        t = _transport.AsyncTransport(Endpoint.make(fs.path, None, None, None, 60), "frames")
        try:
            ra = asyncio.ensure_future(t.request("GET", "/v1/a", None))
            rb = asyncio.ensure_future(t.request("GET", "/v1/b", None))
            conn = await self._connection_of(t)
            await conn.task  # the reader ended: nothing may wait on the connection now
            await asyncio.sleep(0)
            self.assertIsInstance(conn.error, FrameError)
            self.assertEqual([ra.done(), rb.done()], [True, True], "a request still waits on a connection that died")
            for r in (ra, rb):
                self.assertIsInstance(r.exception(), FrameError)
        finally:
            await t.close()

    async def test_a_request_sent_after_the_server_closed_fails_at_once(self) -> None:
        # The server answers a, then closes. A request written into the
        # connection after its reader saw the end must fail at once, not
        # wait for its timeout (60 s here); the transport's next request
        # goes on a new connection.
        def h(c: Conn) -> None:
            c.read_preface()
            c.send(PREFACE)
            fid, line, _, _ = c.read_frame()
            c.send(answer(fid, 200, {"line": line}))

        fs = FakeServer(self, h, serve_frames)
        t = _transport.AsyncTransport(Endpoint.make(fs.path, None, None, None, 60), "frames")
        try:
            ra = asyncio.ensure_future(t.request("GET", "/v1/a", None))
            conn = await self._connection_of(t)
            self.assertEqual((await ra)[0], 200)
            await conn.task  # the reader saw the end of the connection
            with self.assertRaises(EOFError):
                await conn.request("GET", "/v1/b", None, 60)
            self.assertEqual(conn.pending, {})
            got = await t.request("GET", "/v1/c", None)
            self.assertEqual(json.loads(got[1]), {"line": "GET /v1/c"})
            self.assertEqual(fs.accepted, 2)
        finally:
            await t.close()

    async def test_a_request_cancelled_while_it_opens_the_connection_fails_no_other(self) -> None:
        # a opens the connection (its dial held until released), b waits for
        # it; a is cancelled (an atom's heartbeat stopped at its commit, a
        # caller's timeout). b must get the connection: it used to get a's
        # CancelledError, which no retry rule catches, as if b had been
        # cancelled.
        fs = FakeServer(self, serve_frames)
        gate = asyncio.Event()
        dials = 0
        real = _transport._dial

        async def held(ep: Endpoint) -> Any:
            nonlocal dials
            dials += 1
            await gate.wait()
            return await real(ep)

        with mock.patch.object(_transport, "_dial", held):
            t = _transport.AsyncTransport(Endpoint.make(fs.path, None, None, None, 60), "frames")
            try:
                a = asyncio.ensure_future(t.request("GET", "/v1/a", None))
                while dials == 0:
                    await asyncio.sleep(0)
                b = asyncio.ensure_future(t.request("GET", "/v1/b", None))
                await asyncio.sleep(0)
                a.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await a
                gate.set()
                st, body = await b
                self.assertEqual((st, json.loads(body)), (200, {"line": "GET /v1/b"}))
                self.assertEqual((dials, fs.accepted), (1, 1))
            finally:
                await t.close()

    async def test_close_while_the_connection_opens(self) -> None:
        # close() during a dial: the request waiting for it fails with a
        # transport error (not a CancelledError it never asked for), and
        # no connection is left open behind the closed client.
        fs = FakeServer(self, serve_frames)
        gate = asyncio.Event()
        real = _transport._dial

        async def held(ep: Endpoint) -> Any:
            await gate.wait()
            return await real(ep)

        with mock.patch.object(_transport, "_dial", held):
            t = _transport.AsyncTransport(Endpoint.make(fs.path, None, None, None, 60), "frames")
            a = asyncio.ensure_future(t.request("GET", "/v1/a", None))
            while t._opening is None:
                await asyncio.sleep(0)
            await t.close()
            gate.set()  # a dial still under way would go on now
            with self.assertRaises(EOFError):
                await a
            self.assertIsNone(t._conn)
            self.assertIsNone(t._opening)


if __name__ == "__main__":
    unittest.main()
