"""Blobs for asyncio: :func:`continuum.blobs.put_blob` and
:func:`continuum.blobs.open_blob` as coroutines (re-exported by
:mod:`continuum.aio`), streamed the same way: a chunked upload read piece
by piece from its source, a download read as it arrives. Each transfer
has a connection of its own (the client's connections carry whole
answers), HTTP/1.1 over asyncio streams."""

from __future__ import annotations

import asyncio
import json
from typing import IO, Any, AsyncIterable, AsyncIterator, Dict, Iterable, Optional, Tuple, Union

from ._transport import _dial
from .blobs import _PIECE, BlobRef, _blob_path
from .errors import ContinuumError, error_from_answer

__all__ = ["put_blob", "open_blob", "AsyncBlobReader"]

#: The most bytes of a status line or header line accepted.
_LINE = 64 << 10

Source = Union[bytes, bytearray, memoryview, IO[bytes], Iterable[bytes], AsyncIterable[bytes], Any]


async def _pieces(data: Source) -> AsyncIterator[bytes]:
    """data's bytes, about _PIECE at a time: bytes-like, a binary file
    (its read may be a coroutine), an iterable or an async iterable of
    bytes."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        mv = memoryview(data)
        for off in range(0, len(mv), _PIECE):
            yield bytes(mv[off : off + _PIECE])
        return
    read = getattr(data, "read", None)
    if read is not None:
        while True:
            b = read(_PIECE)
            if asyncio.iscoroutine(b) or isinstance(b, asyncio.Future):
                b = await b
            if not b:
                return
            yield bytes(b)
    if hasattr(data, "__aiter__"):
        async for b in data:
            if b:
                yield bytes(b)
        return
    for b in data:
        if b:
            yield bytes(b)


class _Conn:
    """One HTTP/1.1 exchange on a connection of its own."""

    def __init__(self, client: Any) -> None:
        self.ep = client._t.ep
        self.r: Optional[asyncio.StreamReader] = None
        self.w: Optional[asyncio.StreamWriter] = None

    async def open(self) -> None:
        self.r, self.w = await _dial(self.ep)

    def head(self, method: str, path: str, headers: Dict[str, str]) -> bytes:
        host = "localhost" if self.ep.socket_path is not None else f"{self.ep.host}:{self.ep.port}"
        h = {"Host": host, "Accept": "application/json", "Connection": "close"}
        if self.ep.token:
            h["Authorization"] = f"Bearer {self.ep.token}"
        h.update(headers)
        lines = [f"{method} {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in h.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _line(self) -> bytes:
        assert self.r is not None
        try:
            line = await asyncio.wait_for(self.r.readuntil(b"\r\n"), self.ep.timeout)
        except asyncio.LimitOverrunError as e:
            raise ContinuumError(f"the server's answer has a line over {e.consumed} bytes") from None
        except asyncio.IncompleteReadError as e:
            raise ContinuumError("the connection closed in the middle of the server's answer") from e
        if len(line) > _LINE:
            raise ContinuumError(f"the server's answer has a line of {len(line)} bytes")
        return line[:-2]

    async def response(self) -> Tuple[int, Dict[str, str]]:
        """The status and headers (names in lower case) of the answer."""
        status = await self._line()
        parts = status.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise ContinuumError(f"not an HTTP answer: {status[:80]!r}")
        headers: Dict[str, str] = {}
        while True:
            line = await self._line()
            if not line:
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        return int(parts[1]), headers

    async def body(self, headers: Dict[str, str]) -> bytes:
        """A whole (short: a JSON answer) body."""
        assert self.r is not None
        if "chunked" in headers.get("transfer-encoding", "").lower():
            out = bytearray()
            while True:
                n = int((await self._line()).split(b";")[0], 16)
                if n == 0:
                    while await self._line():
                        pass
                    return bytes(out)
                out += await asyncio.wait_for(self.r.readexactly(n), self.ep.timeout)
                await self._line()
        if "content-length" in headers:
            return await asyncio.wait_for(self.r.readexactly(int(headers["content-length"])), self.ep.timeout)
        return await asyncio.wait_for(self.r.read(), self.ep.timeout)

    async def error(self, status: int, headers: Dict[str, str]) -> ContinuumError:
        raw = await self.body(headers)
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = {"error": {"code": "internal", "message": raw.decode("utf-8", "replace")[:300]}}
        return error_from_answer(status, answer)

    async def close(self) -> None:
        if self.w is not None:
            w, self.w = self.w, None
            w.close()
            try:
                await w.wait_closed()
            except (OSError, asyncio.CancelledError):
                pass


async def put_blob(atom: Any, data: Source, *, media_type: str = "") -> BlobRef:
    """:func:`continuum.blobs.put_blob` for asyncio: uploads data (bytes,
    a binary file whose read may be a coroutine, an iterable or an async
    iterable of bytes) as a blob of the atom's attempt, streamed with
    chunked transfer encoding, and returns its reference: put
    ``ref.value`` in the atom's delta to reference it. The blob is durable
    when this returns; the same bytes uploaded again are stored once. The
    upload is not retried (a source cannot be read twice): on a transport
    error, upload again."""
    await atom.ready()
    c = _Conn(atom.run.client)
    try:
        await c.open()
        assert c.w is not None
        headers = {"Transfer-Encoding": "chunked"}
        if media_type:
            headers["Content-Type"] = media_type
        try:
            c.w.write(c.head("POST", f"{atom._path}/blobs", headers))
            async for b in _pieces(data):
                c.w.write(b"%x\r\n" % len(b))
                c.w.write(b)
                c.w.write(b"\r\n")
                await asyncio.wait_for(c.w.drain(), c.ep.timeout)
            c.w.write(b"0\r\n\r\n")
            await asyncio.wait_for(c.w.drain(), c.ep.timeout)
        except (ConnectionError, BrokenPipeError) as e:
            # The server may have answered (an error) before the upload
            # ended, and closed: its answer says why.
            try:
                status, h = await c.response()
            except (ContinuumError, OSError):
                raise e from None
            if status != 200:
                raise await c.error(status, h) from None
            raise
        status, h = await c.response()
        if status != 200:
            raise await c.error(status, h)
        b = json.loads(await c.body(h))
        return BlobRef(str(b["hash"]), int(b["size"]), str(b.get("media_type") or ""))
    finally:
        await c.close()


class AsyncBlobReader:
    """A blob's bytes as the server streams them, for asyncio; a transfer
    cut short (a damaged chunk, a lost connection) raises on read instead
    of ending early. Close it (or use it in an ``async with`` block);
    ``async for`` yields its bytes piece by piece."""

    def __init__(self, conn: _Conn, size: int) -> None:
        self._c, self._left = conn, size

    async def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all that is left if n < 0: the rest of the blob
        in memory), b"" at the end."""
        if self._left == 0:
            return b""
        r = self._c.r
        if r is None:
            raise ValueError("read of a closed blob")
        want = self._left if n < 0 else min(n, self._left)
        if n < 0:
            try:
                b = await asyncio.wait_for(r.readexactly(want), self._c.ep.timeout)
            except asyncio.IncompleteReadError as e:
                raise self._short() from e
        else:
            b = await asyncio.wait_for(r.read(want), self._c.ep.timeout)
            if not b:
                raise self._short()
        self._left -= len(b)
        return b

    def _short(self) -> ContinuumError:
        return ContinuumError(f"the blob's transfer ended {self._left} bytes short: damaged on the server, or the connection was lost")

    def __aiter__(self) -> "AsyncBlobReader":
        return self

    async def __anext__(self) -> bytes:
        b = await self.read(_PIECE)
        if not b:
            raise StopAsyncIteration
        return b

    async def close(self) -> None:
        await self._c.close()
        self._c.r = None

    async def __aenter__(self) -> "AsyncBlobReader":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def open_blob(client: Any, run: str, ref: Union[BlobRef, str]) -> AsyncBlobReader:
    """:func:`continuum.blobs.open_blob` for asyncio: opens the blob ref
    (a BlobRef, or a reference value) that run references, for streamed
    reading."""
    ref, path = _blob_path(run, ref)
    c = _Conn(client)
    try:
        await c.open()
        assert c.w is not None
        c.w.write(c.head("GET", path, {}))
        await asyncio.wait_for(c.w.drain(), c.ep.timeout)
        status, h = await c.response()
        if status != 200:
            raise await c.error(status, h)
    except BaseException:
        await c.close()
        raise
    return AsyncBlobReader(c, ref.size)
