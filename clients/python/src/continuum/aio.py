"""The asyncio client: the same shape as the synchronous one, with
coroutines. ``execute`` and ``reconcile`` functions may be coroutine
functions or plain ones. Blobs: :func:`put_blob` and :func:`open_blob`
(with :func:`parse_ref` and :class:`BlobRef`), :mod:`continuum.blobs`'s
functions as coroutines, streamed the same way."""

from __future__ import annotations

import asyncio
import inspect
import json
import ssl
import time
from contextvars import Token
from types import TracebackType
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Generator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Type, TypeVar, Union

from . import _core, _tool, _wire, waits
from . import streams as _streams
from ._aio_blobs import AsyncBlobReader, open_blob, put_blob
from ._retry import RetryPolicy, retry_body
from ._transport import TRANSPORT_ERRORS, AsyncTransport, Endpoint, no_server_hint
from ._wire import BytesLike, seg
from .client import endpoint_from_env
from .blobs import BlobRef, parse_ref
from .delta import Delta
from .errors import APIError, AttemptLost, ContinuumError, InDoubt, NotFound, ServerError, ShuttingDown, Unavailable, error_from_answer
from .types import AtomRecord, Committed, DeletedRun, DidNotHappen, ErasedKey, Happened, Interrupted, RunInfo, State

__all__ = ["AsyncClient", "AsyncRun", "AsyncAtom", "put_blob", "open_blob", "parse_ref", "BlobRef", "AsyncBlobReader"]

T = TypeVar("T")
max_ = max  # the builtin, where a parameter is named max
MaybeAwaitable = Union[T, Awaitable[T]]
AsyncReconciler = Callable[[str], MaybeAwaitable[Union[Happened, DidNotHappen]]]


async def _maybe_await(v: Any) -> Any:
    return await v if inspect.isawaitable(v) else v


class AsyncClient:
    """:class:`continuum.Client` for asyncio. With frames (``transport``
    "auto" or "frames") the client's concurrent requests share one
    connection, pipelined, answered in any order."""

    def __init__(
        self,
        socket: Optional[str] = None,
        *,
        url: Optional[str] = None,
        token: Optional[str] = None,
        ca_file: Optional[str] = None,
        timeout: float = 60.0,
        retry_for: float = 30.0,
        transport: str = "auto",
    ) -> None:
        self._t = AsyncTransport(Endpoint.make(socket, url, token, ca_file, timeout), transport)
        self.retry_for = retry_for

    @classmethod
    def from_env(cls, *, timeout: float = 60.0, retry_for: float = 30.0, transport: str = "auto") -> "AsyncClient":
        c = cls.__new__(cls)
        c._t = AsyncTransport(endpoint_from_env(timeout), transport)
        c.retry_for = retry_for
        return c

    async def close(self) -> None:
        await self._t.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _send(self, req: _core.Request) -> Any:
        body = None if req.body is None else _wire.dumps(req.body)
        deadline = time.monotonic() + self.retry_for
        wait = 0.01
        last: Optional[BaseException] = None
        while True:
            try:
                status, data = await self._t.request(req.method, req.path, body)
                answer = json.loads(data) if data else None
                if status >= 400:
                    raise error_from_answer(status, answer)
                if not (req.repeat_pending and isinstance(answer, dict) and answer.get("status") == "pending"):
                    return answer
                last = None
            except ShuttingDown as e:
                last = e
            except ssl.SSLCertVerificationError:
                raise  # a certificate not trusted is not a passing failure
            except TRANSPORT_ERRORS as e:  # asyncio.TimeoutError is TimeoutError, an OSError
                last = e
            except json.JSONDecodeError as e:
                raise ServerError(0, "internal", f"{req.method} {req.path}: the answer is not JSON: {e}") from None
            if time.monotonic() + wait > deadline:
                raise Unavailable(f"{req.method} {req.path}: no answer for {self.retry_for:g} s: {last or 'still pending'}{no_server_hint(last, self._t.ep)}") from last
            await asyncio.sleep(wait)
            wait = min(wait * 2, 1.0)

    async def _get(self, path: str) -> Any:
        return await self._send(_core.Request("GET", path))

    async def health(self) -> Dict[str, Any]:
        return dict(await self._get("/v1/health"))

    async def stats(self) -> Dict[str, Any]:
        return dict(await self._get("/v1/stats"))

    async def runs(self) -> List[RunInfo]:
        return [_wire.run_info(r) for r in (await self._get("/v1/runs"))["runs"]]

    async def run(self, id: str) -> "AsyncRun":
        info = await self._send(_core.Request("PUT", f"/v1/runs/{seg(id)}", {}))
        return AsyncRun(self, id, _wire.run_info(info))

    async def fork(self, source: str, at: int, new_id: str) -> "AsyncRun":
        """:meth:`continuum.Client.fork` for asyncio: forks run ``source``
        at its committed seq ``at`` into a new run ``new_id``, and opens it."""
        info = await self._send(_core.Request("POST", f"/v1/runs/{seg(source)}/fork", {"at": int(at), "id": new_id}))
        return AsyncRun(self, new_id, _wire.run_info(info))

    async def erase(self, run: str, *, reason: str = "") -> DeletedRun:
        """:meth:`continuum.Client.erase` for asyncio: erases the ended run
        ``run`` (its data key destroyed) and returns its erasure."""
        return _wire.deleted_run(await self._send(_core.Request("POST", f"/v1/runs/{seg(run)}/erase", {"reason": reason})))

    async def delete(self, run: str, *, reason: str = "") -> DeletedRun:
        """:meth:`continuum.Client.delete` for asyncio."""
        return _wire.deleted_run(await self._send(_core.Request("POST", f"/v1/runs/{seg(run)}/delete", {"reason": reason})))

    async def gc(self) -> Dict[str, Any]:
        """:meth:`continuum.Client.gc` for asyncio."""
        return dict(await self._send(_core.Request("POST", "/v1/gc", {})))

    async def erase_key(self, run: str, key: str, *, reason: str = "") -> ErasedKey:
        """:meth:`continuum.Client.erase_key` for asyncio: erases every value
        of memory key ``key`` of run ``run`` written so far."""
        path = f"/v1/runs/{seg(run)}/memory/{seg(key)}/erase"
        return _wire.erased_key(await self._send(_core.Request("POST", path, {"reason": reason})))

    async def verify(self, *, deep: bool = False, public_key: Optional[str] = None, unsigned_tail: int = 0) -> Dict[str, Any]:
        body: Dict[str, Any] = {"deep": deep, "unsigned_tail": unsigned_tail}
        if public_key is not None:
            body["public_key"] = public_key
        return dict(await self._send(_core.Request("POST", "/v1/verify", body)))

    # Waits, events and timers (continuum.waits): Client's, for asyncio.

    async def send_event(self, run: str, name: str, *, sender: str, payload: BytesLike = b"") -> waits.SendResult:
        return waits.send_result(await self._send(waits.event_request(run, name, sender, payload)))

    async def ready(self, *, wait: float = 0.0, max: Optional[int] = None) -> List[waits.Wait]:
        deadline = time.monotonic() + wait
        while True:
            left = max_(0.0, deadline - time.monotonic())
            out = [waits.wait_of(w) for w in (await self._send(waits.ready_request(left, max)))["ready"]]
            if out or left <= waits.LONG_POLL:
                return out


class _AtomContext:
    """What ``AsyncRun.atom()`` returns: awaitable (begin) and an async
    context manager (begin, then commit or fail)."""

    def __init__(self, run: "AsyncRun", takeover: bool, lease: Optional[float]) -> None:
        self._run, self._takeover, self._lease = run, takeover, lease
        self._atom: Optional[AsyncAtom] = None

    def __await__(self) -> Generator[Any, None, "AsyncAtom"]:
        return self._run.begin(takeover=self._takeover, lease=self._lease).__await__()

    async def __aenter__(self) -> "AsyncAtom":
        # Begun by its first request: its first call, or its commit.
        self._atom = AsyncAtom(self._run, None, self._run._begin_body(self._takeover, self._lease))
        return await self._atom.__aenter__()

    async def __aexit__(self, et: Optional[Type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        assert self._atom is not None
        await self._atom.__aexit__(et, e, tb)


class AsyncRun:
    """:class:`continuum.Run` for asyncio."""

    def __init__(self, client: AsyncClient, id: str, info: RunInfo) -> None:
        self.client = client
        self.id = id
        self.opened = info
        self._path = f"/v1/runs/{seg(id)}"
        self._known: Dict[str, bytes] = {}
        # The seq this client expects the run's next atom to have (None:
        # unknown), named by a commit riding on its begin.
        self._next: Optional[int] = info.last_seq + 1

    def __repr__(self) -> str:
        return f"AsyncRun({self.id!r})"

    def _begin_body(self, takeover: bool, lease: Optional[float]) -> Dict[str, Any]:
        body: Dict[str, Any] = {"request_id": _wire.request_id(), "takeover": takeover}
        if lease is not None:
            body["lease_ms"] = int(lease * 1000)
        return body

    async def info(self) -> RunInfo:
        return _wire.run_info(await self.client._get(self._path))

    async def state(self, seq: Optional[int] = None) -> State:
        q = "" if seq is None else f"?seq={int(seq)}"
        return _wire.state(await self.client._get(f"{self._path}/state{q}"))

    async def atom_at(self, seq: int) -> AtomRecord:
        return _wire.atom_record(await self.client._get(f"{self._path}/atoms/{int(seq)}"))

    async def interrupted(self) -> Optional[Interrupted]:
        return _wire.interrupted((await self.client._get(f"{self._path}/interrupted")).get("interrupted"))

    async def end(self, status: str, result: Optional[BytesLike] = None) -> RunInfo:
        """:meth:`continuum.Run.end` for asyncio."""
        body: Dict[str, Any] = {"status": status}
        if result is not None:
            _wire.put_bytes(body, "result", result)
        return _wire.run_info(await self.client._send(_core.Request("POST", f"{self._path}/end", body)))

    async def begin(self, *, takeover: bool = False, lease: Optional[float] = None) -> "AsyncAtom":
        body = self._begin_body(takeover, lease)
        r = await self.client._send(_core.Request("POST", f"{self._path}/attempts", body))
        return AsyncAtom(self, r, body)

    async def branch(
        self, name: str, *, reads: Sequence[str] = (), takeover: bool = False, lease: Optional[float] = None
    ) -> "AsyncAtom":
        """:meth:`continuum.Run.branch` for asyncio, begun at once: commit
        or fail it (its commit raises BranchConflict when it lost; branch
        again under the same name to retry)."""
        body: Dict[str, Any] = {"name": name, "reads": list(reads), "request_id": _wire.request_id(), "takeover": takeover}
        if lease is not None:
            body["lease_ms"] = int(lease * 1000)
        r = await self.client._send(_core.Request("POST", f"{self._path}/branches", body))
        return AsyncAtom(self, r, body, branch=name)

    async def diff(self, a: Union[int, str], b: Union[int, str], *, other: Optional[str] = None) -> Dict[str, Any]:
        """:meth:`continuum.Run.diff` for asyncio."""
        q = f"?a={a}&b={b}"
        if other is not None:
            q += f"&run_b={_wire.seg(other)}"
        return dict(await self.client._send(_core.Request("GET", f"{self._path}/diff{q}")))

    def atom(self, *, takeover: bool = False, lease: Optional[float] = None) -> _AtomContext:
        """``async with run.atom() as atom:`` an atom whose delta is
        committed when the block ends (failed if the block raises). Its
        begin rides on its first call or its commit, and an execution's
        outcome on its next call or its commit (k + 1 requests for k
        actions); its seq, attempt, lease and interrupted are known once
        begun (``await atom.ready()`` begins it at once). ``await
        run.atom()`` begins at once."""
        return _AtomContext(self, takeover, lease)

    # Waits, events and timers (continuum.waits): Run's, for asyncio.

    async def wait(self, name: str, *, timeout: Optional[float] = None, deadline: "Optional[waits.TimeLike]" = None,
                   after: Optional[int] = None) -> waits.Wait:
        return waits.wait_of(await self.client._send(waits.wait_request(self._path, name, timeout, deadline, after)))

    async def sleep(self, *, until: "Optional[waits.TimeLike]" = None, duration: Optional[float] = None,
                    after: Optional[int] = None) -> waits.Wait:
        return waits.wait_of(await self.client._send(waits.sleep_request(self._path, until, duration, after)))

    async def current_wait(self, *, wait: float = 0.0) -> Optional[waits.Wait]:
        w = (await self.client._get(f"{self._path}/wait?wait_ms={waits.poll_ms(wait)}")).get("wait")
        return None if w is None else waits.wait_of(w)

    async def wait_ended(self, *, timeout: Optional[float] = None) -> Optional[waits.Wait]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = waits.LONG_POLL if deadline is None else max_(0.0, deadline - time.monotonic())
            w = await self.current_wait(wait=left)
            if w is None or not w.open or (deadline is not None and time.monotonic() >= deadline):
                return w

    async def cancel_wait(self) -> waits.Wait:
        return waits.wait_of(await self.client._send(_core.Request("POST", f"{self._path}/wait/cancel", {})))

    async def send_event(self, name: str, *, sender: str, payload: BytesLike = b"") -> waits.SendResult:
        return await self.client.send_event(self.id, name, sender=sender, payload=payload)

    # Streams out of runs (continuum.streams): Run's, for asyncio.

    async def read_stream(self, name: str, start: int = 0, *, max: Optional[int] = None, wait: float = 0.0) -> _streams.StreamBatch:
        """:meth:`continuum.Run.read_stream` for asyncio: the durable chunks
        of stream ``name`` from offset ``start``, waiting up to ``wait``
        seconds (at most the server's call wait of 20 s) for one."""
        return _streams.batch_of(await self.client._send(_streams.read_request(self._path, name, start, max, wait)))

    async def follow(self, name: str, start: int = 0, *, poll: float = 10.0, until_ended: bool = True) -> AsyncIterator[_streams.StreamChunk]:
        """:meth:`continuum.Run.follow` for asyncio (``async for chunk in
        run.follow("tokens", start=nxt)``): the chunks from offset ``start``
        as they become durable, with long polls of ``poll`` seconds, until
        the run ended and every chunk was yielded (or, with
        ``until_ended=False``, until a poll brings nothing)."""
        nxt = int(start)
        while True:
            b = await self.read_stream(name, nxt, wait=poll)
            for c in b.chunks:
                yield c
            nxt = b.next
            if _streams.follow_done(b, until_ended):
                return

    async def streams(self) -> List[_streams.StreamInfo]:
        """:meth:`continuum.Run.streams` for asyncio."""
        return _streams.infos_of(await self.client._send(_streams.list_request(self._path)))

    async def step(
        self, fn: Callable[["AsyncAtom"], Awaitable[T]], *, takeover: bool = False, lease: Optional[float] = None, max_attempts: int = 20
    ) -> T:
        """:meth:`continuum.Run.step` for asyncio."""
        for i in range(max_attempts):
            try:
                async with self.atom(takeover=takeover, lease=lease) as atom:
                    return await fn(atom)
            except AttemptLost:
                if i == max_attempts - 1:
                    raise
        raise AssertionError("unreachable")


class _Pending(NamedTuple):
    """An outcome held back to ride on the atom's next request."""

    flow: Generator[_core.Effect, Any, Any]
    req: _core.Request
    execute: Optional[Callable[[str], MaybeAwaitable[BytesLike]]]
    reconcile: Optional[AsyncReconciler]


class AsyncAtom:
    """:class:`continuum.Atom` for asyncio. Concurrent :meth:`do` calls
    are allowed: their call numbers follow the order they are made, and
    their executions overlap."""

    def __init__(
        self, run: AsyncRun, begin: Optional[Mapping[str, Any]], body: Optional[Dict[str, Any]] = None, *, branch: Optional[str] = None
    ) -> None:
        self.run = run
        #: A branch's name and base (:meth:`AsyncRun.branch`), else None.
        self.branch: Optional[str] = branch if branch is not None else (begin or {}).get("branch")
        self._begins = f"{run._path}/branches" if self.branch is not None else f"{run._path}/attempts"
        self._body = body or {}
        self.delta = Delta()
        self.committed: Optional[Committed] = None
        self._calls = 0
        self._order = asyncio.Lock()
        # Chunks appended per (attempt path, stream): append's index.
        self._appended: Dict[Tuple[str, str], int] = {}
        self._token: Optional[Token[Any]] = None
        self._beat: Optional[asyncio.Task[None]] = None
        self._pending: Optional[_Pending] = None
        self._begun = False
        if begin is not None:
            self._set(begin)

    def _set(self, begin: Mapping[str, Any]) -> None:
        self._seq = int(begin["seq"])
        self._attempt = str(begin["attempt"])
        self._lease = int(begin["lease_ms"]) / 1000
        self._interrupted = _wire.interrupted(begin.get("interrupted"))
        self._base = int(begin["base"]) if begin.get("base") is not None else None
        self._path = f"{self.run._path}/attempts/{self._attempt}"
        self._begun = True
        self._beat = asyncio.get_running_loop().create_task(self._heartbeats())

    def _need(self, what: str) -> None:
        if not self._begun:
            raise RuntimeError(f"atom.{what}: the atom is not begun yet (its first call or its commit begins it; await atom.ready() to begin it now)")

    @property
    def seq(self) -> int:
        if not self._begun and self.committed is not None:
            return self.committed.seq
        self._need("seq")
        return self._seq

    @property
    def attempt(self) -> str:
        self._need("attempt")
        return self._attempt

    @property
    def lease(self) -> float:
        self._need("lease")
        return self._lease

    @property
    def interrupted(self) -> Optional[Interrupted]:
        self._need("interrupted")
        return self._interrupted

    @property
    def base(self) -> Optional[int]:
        self._need("base")
        return self._base

    async def ready(self) -> "AsyncAtom":
        """Begins the atom now, if its first request was not made."""
        async with self._order:
            if not self._begun and self.committed is None:
                self._set(await self.run.client._send(_core.Request("POST", self._begins, self._body)))
        return self

    def _take_attempt(self, e: APIError) -> None:
        att = e.details.get("attempt") if e.details else None
        if isinstance(att, Mapping) and not self._begun:
            self._set(att)

    def __repr__(self) -> str:
        return f"AsyncAtom({self.run.id!r}, seq={self._seq})" if self._begun else f"AsyncAtom({self.run.id!r}, not begun)"

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self._lease / 3)
            try:
                await self.run.client._send(_core.Request("POST", f"{self._path}/heartbeat", {}))
            except (APIError, Unavailable):
                return

    def _stop(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            self._beat = None

    async def _drive(
        self,
        flow: Generator[_core.Effect, Any, T],
        execute: Optional[Callable[[str], MaybeAwaitable[BytesLike]]] = None,
        reconcile: Optional[AsyncReconciler] = None,
        *,
        defer: Optional[int] = None,
        value: Any = None,
        exc: Optional[BaseException] = None,
    ) -> T:
        """Drives flow to its end; with defer (the flow's call number) the
        outcome of a successful execution may be held back to ride on the
        atom's next request (:meth:`_flush`), and the executed result is
        returned at once. value or exc resumes a flow held so."""
        send = self.run.client._send
        executed: Optional[bytes] = None
        while True:
            try:
                eff = flow.throw(exc) if exc is not None else flow.send(value)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            value, exc = None, None
            if isinstance(eff, _core.Request):
                if eff.deferrable and defer is not None and executed is not None and self._calls == defer + 1 and self._pending is None:
                    self._pending = _Pending(flow, eff, execute, reconcile)
                    return executed  # type: ignore[return-value]
                try:
                    value = await send(eff)
                except APIError as e:
                    exc = e
            elif isinstance(eff, _core.Execute):
                assert execute is not None
                try:
                    executed = _wire.to_bytes(await _maybe_await(execute(eff.key)))
                    value = ("ok", executed)
                except Exception as e:
                    value = ("err", e)
            else:
                assert isinstance(eff, _core.Reconcile)
                if reconcile is None:
                    raise InDoubt(eff.key, eff.tool, eff.call, eff.fingerprint)
                value = await _maybe_await(reconcile(eff.key))

    def _take_pending(self) -> Optional[_Pending]:
        pend, self._pending = self._pending, None
        return pend

    async def _flush(self, pend: Optional[_Pending], ride: Optional[Tuple[str, Any]] = None) -> Optional[Mapping[str, Any]]:
        """:meth:`continuum.Atom._flush` for asyncio: sends the held
        outcome with what rides on it, finishes its call's flow, and
        returns the answer of what rode (None: nothing rode)."""
        if pend is None:
            return None
        send = self.run.client._send
        body = dict(pend.req.body or {})
        if ride is not None:
            body[ride[0]] = ride[1]
        try:
            r = await send(_core.Request("POST", pend.req.path, body))
        except APIError as e:
            got = e.details.get("outcome")
            if isinstance(got, Mapping):  # the outcome was certified; what rode failed
                await self._drive(pend.flow, pend.execute, pend.reconcile, value=got)
                raise
            if ride is not None and ride[0] == "commit" and (e.field or "").startswith("commit."):
                try:  # the delta was refused before the outcome was read: the outcome alone
                    answer = await send(_core.Request("POST", pend.req.path, pend.req.body, repeat_pending=True))
                    await self._drive(pend.flow, pend.execute, pend.reconcile, value=answer)
                except ContinuumError:
                    pass  # the refused delta is the error to report
                raise e
            await self._drive(pend.flow, pend.execute, pend.reconcile, exc=e)
            raise
        rode = r.get(ride[0]) if ride is not None else None
        answer = {k: v for k, v in r.items() if k not in ("next", "commit")}
        if answer.get("status") == "pending":
            answer = await send(_core.Request("POST", pend.req.path, pend.req.body, repeat_pending=True))
        await self._drive(pend.flow, pend.execute, pend.reconcile, value=answer)
        return rode if isinstance(rode, Mapping) else None

    async def do(
        self,
        tool: str,
        execute: Callable[[str], MaybeAwaitable[BytesLike]],
        *,
        args: Any = None,
        key: Optional[str] = None,
        idempotent: bool = False,
        reconcile: Optional[AsyncReconciler] = None,
        redact: Optional[Sequence[str]] = None,
        redact_result: Optional[Sequence[str]] = None,
        compensate: Optional[Mapping[str, Any]] = None,
        retry: Union[RetryPolicy, Mapping[str, Any], None] = None,
    ) -> bytes:
        """:meth:`continuum.Atom.do` for asyncio (its outcome rides on the
        atom's next request in the same way)."""
        body: Dict[str, Any] = {"tool": tool, "idempotent": idempotent}
        if args is not None:
            body["args"] = args
        if key:
            body["key"] = key
        if redact:
            body["redact"] = list(redact)
        if redact_result:
            body["redact_result"] = list(redact_result)
        if compensate is not None:
            body["compensate"] = dict(compensate)
        if retry is not None:
            body["retry"] = retry_body(retry)
        send = self.run.client._send
        async with self._order:
            n = self._calls
            self._calls += 1
            pend = self._take_pending()
            first: Optional[Mapping[str, Any]] = None
            if pend is not None:
                first = await self._flush(pend, ("next", body))
                if first is None or first.get("status") == "pending":
                    first = await send(_core.Request("POST", f"{self._path}/calls/{n}", body, repeat_pending=True))
            elif self._begun:
                first = await send(_core.Request("POST", f"{self._path}/calls/{n}", body, repeat_pending=True))
            else:
                try:
                    r = await send(_core.Request("POST", self._begins, {**self._body, "call": body}))
                except APIError as e:
                    self._take_attempt(e)
                    raise
                self._set(r)
                first = r["call"]
                if first.get("status") == "pending":
                    first = await send(_core.Request("POST", f"{self._path}/calls/{n}", body, repeat_pending=True))
        defer = n if not redact_result else None
        return await self._drive(_core.call_flow(self._path, n, tool, first, self.run._known), execute, reconcile, defer=defer)

    async def do_json(
        self,
        tool: str,
        execute: Callable[[str], MaybeAwaitable[Any]],
        *,
        args: Any = None,
        key: Optional[str] = None,
        idempotent: bool = False,
        reconcile: Optional[AsyncReconciler] = None,
        redact: Optional[Sequence[str]] = None,
        redact_result: Optional[Sequence[str]] = None,
    ) -> Any:
        """:meth:`continuum.Atom.do_json` for asyncio."""
        async def ex(k: str) -> bytes:
            return _wire.dumps(await _maybe_await(execute(k)))

        async def rec(k: str) -> Union[Happened, DidNotHappen]:
            assert reconcile is not None
            v = await _maybe_await(reconcile(k))
            return Happened(_wire.dumps(v.result)) if isinstance(v, Happened) else v

        out = await self.do(tool, ex, args=args, key=key, idempotent=idempotent, reconcile=rec if reconcile else None,
                            redact=redact, redact_result=redact_result)
        return json.loads(out) if out else None

    async def resolve(self, doubt: InDoubt, result: BytesLike) -> bytes:
        await self._flush(self._take_pending())
        body: Dict[str, Any] = {}
        _wire.put_bytes(body, "result", result)
        r = await self.run.client._send(_core.Request("POST", f"{self._path}/calls/{doubt.call}/resolve", body, repeat_pending=True))
        return await self._drive(_core.call_flow(self._path, doubt.call, doubt.tool, r, self.run._known))

    async def resolve_failed(
        self, doubt: InDoubt, reason: str, execute: Optional[Callable[[str], MaybeAwaitable[BytesLike]]] = None
    ) -> Optional[bytes]:
        await self._flush(self._take_pending())
        body: Dict[str, Any] = {"failed": reason, "retry": execute is not None}
        r = await self.run.client._send(_core.Request("POST", f"{self._path}/calls/{doubt.call}/resolve", body, repeat_pending=True))
        if execute is None:
            return None
        return await self._drive(_core.call_flow(self._path, doubt.call, doubt.tool, r, self.run._known), execute)

    async def wait_outcome(self) -> waits.Wait:
        """The ended wait this atom follows, with its event (Atom.wait_outcome)."""
        await self.ready()
        await self._flush(self._take_pending())
        return waits.wait_of(await self.run.client._get(f"{self._path}/wait"))

    async def append(self, name: str, *chunks: BytesLike, flush: bool = False) -> int:
        """:meth:`continuum.Atom.append` for asyncio: appends the chunks, in
        order, to stream ``name`` of the run as part of this attempt (begun
        by it, if it was not), and returns the first one's offset; ``flush``
        waits until they are durable. Appends and calls made concurrently
        are sent in the order they were made."""
        if not chunks:
            raise ValueError("append: no chunk")
        async with self._order:
            if not self._begun:
                if self.committed is not None:
                    raise RuntimeError("atom.append: the atom committed already")
                self._set(await self.run.client._send(_core.Request("POST", self._begins, self._body)))
            await self._flush(self._take_pending())
            # The attempt's count of chunks to the stream, sent as the
            # index: the client's retries never append one twice.
            key = (self._path, name)
            index = self._appended.get(key, 0)
            a = await self.run.client._send(_streams.append_request(self._path, name, chunks, flush, index))
            self._appended[key] = index + len(chunks)
        return int(a["offset"])

    async def heartbeat(self) -> None:
        await self.ready()
        await self.run.client._send(_core.Request("POST", f"{self._path}/heartbeat", {}))

    async def commit(self, delta: Optional[Delta] = None) -> Committed:
        ops = (delta if delta is not None else self.delta).ops
        if not self._begun:
            if self.committed is not None:
                return self.committed  # found in the store by a ridden commit
            if await self._commit_riding(ops):
                return self.committed  # type: ignore[return-value]
            await self.ready()
        try:
            done = await self._commit_on_outcome(ops)
            if done is None:
                done = await self._drive(_core.commit_flow(self._path, self.run.id, self._seq, ops))
            self.committed = done
        except APIError as e:
            if e.code != "invalid_delta":
                self._stop()
            raise
        self._stop()
        if self.branch is None:
            self.run._next = self.committed.seq + 1
        return self.committed

    async def _commit_on_outcome(self, ops: Any) -> Optional[Committed]:
        pend = self._take_pending()
        try:
            r = await self._flush(pend, ("commit", {"delta": ops}))
        except AttemptLost as lost:
            if lost.code != "attempt_not_found" or self._seq == 0 or pend is None:
                raise
            try:
                rec = await self.run.client._get(f"{self.run._path}/atoms/{self._seq}")
            except NotFound:
                raise lost from None
            if _wire.same_delta(ops, rec.get("delta", [])):
                return Committed(run=self.run.id, seq=self._seq, head=str(rec["head"]))
            raise
        return None if r is None else _wire.committed(r)

    async def _commit_riding(self, ops: Any) -> bool:
        """Begins and commits in one request, naming the seq expected;
        False when the atom must be begun first."""
        body = {**self._body, "commit": {"delta": ops}}
        nxt = self.run._next if self.branch is None else None
        if nxt is not None:
            body["seq"] = nxt
        try:
            r = await self.run.client._send(_core.Request("POST", self._begins, body))
        except APIError as e:
            self._take_attempt(e)
            if e.code != "seq_mismatch" or nxt is None:
                raise
            rec = await self.run.client._get(f"{self.run._path}/atoms/{nxt}")
            if _wire.same_delta(ops, rec.get("delta", [])):
                self.committed = Committed(run=self.run.id, seq=nxt, head=str(rec["head"]))
                self.run._next = nxt + 1
                return True
            self.run._next = None
            return False
        self._set(r)
        self.committed = _wire.committed(r["commit"])
        self._stop()
        if self.branch is None:
            self.run._next = self.committed.seq + 1
        return True

    async def fail(self, reason: str) -> None:
        if not self._begun:
            return  # nothing was begun: nothing to fail
        try:
            await self._flush(self._take_pending())  # the action happened: certified before the atom fails
        except ContinuumError:
            pass
        try:
            await self.run.client._send(_core.Request("POST", f"{self._path}/fail", {"reason": reason}))
        finally:
            self._stop()

    async def __aenter__(self) -> "AsyncAtom":
        self._token = _tool.current.set(self)
        return self

    async def __aexit__(self, et: Optional[Type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if self._token is not None:
            _tool.current.reset(self._token)
            self._token = None
        if e is None:
            await self.commit()
            return
        try:
            if not isinstance(e, (AttemptLost, Unavailable)) and isinstance(e, Exception):
                await self.fail(_core.error_text(e))
        except (APIError, Unavailable):
            pass
        finally:
            self._stop()
