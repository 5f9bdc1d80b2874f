"""The synchronous client."""

from __future__ import annotations

import json
import os
import ssl
import threading
import time
from contextvars import Token
from types import TracebackType
from typing import Any, Callable, Dict, Generator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Type, TypeVar, Union

from . import _core, _tool, _wire, waits
from ._transport import TRANSPORT_ERRORS, Endpoint, SyncTransport, no_server_hint
from ._wire import BytesLike, seg
from ._retry import RetryPolicy, retry_body
from .delta import Delta
from .streams import AtomStreams, RunStreams
from .errors import ActionFailed, APIError, AttemptLost, BranchConflict, ContinuumError, InDoubt, NotFound, ServerError, ShuttingDown, Unavailable, error_from_answer
from .types import AtomRecord, Committed, DeletedRun, DidNotHappen, ErasedKey, Happened, Interrupted, RunInfo, RunMessage, State

__all__ = ["Client", "Run", "Atom"]

T = TypeVar("T")
Reconciler = Callable[[str], Union[Happened, DidNotHappen]]


def endpoint_from_env(timeout: float) -> Endpoint:
    """The server named by CONTINUUMD_SOCKET, or CONTINUUMD_URL with
    CONTINUUMD_TOKEN (or CONTINUUMD_TOKEN_FILE) and CONTINUUMD_CA."""
    token = os.environ.get("CONTINUUMD_TOKEN")
    if token is None and os.environ.get("CONTINUUMD_TOKEN_FILE"):
        with open(os.environ["CONTINUUMD_TOKEN_FILE"], encoding="utf-8") as f:
            token = f.read().strip()
    sock, url = os.environ.get("CONTINUUMD_SOCKET"), os.environ.get("CONTINUUMD_URL")
    if sock is None and url is None:
        raise ValueError("set CONTINUUMD_SOCKET (the server's Unix socket) or CONTINUUMD_URL")
    return Endpoint.make(sock, url if sock is None else None, token, os.environ.get("CONTINUUMD_CA"), timeout)


class Client:
    """A connection to one continuumd (one store).

    ``Client(socket="./agent-store.sock")`` talks to the server's Unix
    socket; ``Client(url="https://host:7070", token=..., ca_file=...)`` to
    its TCP listener. Every request is retried on transport errors and
    while the server answers shutting_down, for up to ``retry_for``
    seconds (the protocol makes every request safe to repeat); then
    :class:`~continuum.errors.Unavailable` is raised.

    ``transport``: "auto" (the default) sends requests in
    continuum-frames/1, the binary framing of the same protocol, on a
    pool of connections (one request in flight on each), and falls back to
    HTTP/1.1, once for the client's life, if the server does not answer
    the frames preface (an older continuumd); "frames" never falls back;
    "http" uses HTTP/1.1 only. Blob transfers use HTTP in every case.
    """

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
        self._t = SyncTransport(Endpoint.make(socket, url, token, ca_file, timeout), transport)
        self.retry_for = retry_for
        self._beats = _Heartbeats(self)

    @classmethod
    def from_env(cls, *, timeout: float = 60.0, retry_for: float = 30.0, transport: str = "auto") -> "Client":
        c = cls.__new__(cls)
        c._t = SyncTransport(endpoint_from_env(timeout), transport)
        c.retry_for = retry_for
        c._beats = _Heartbeats(c)
        return c

    def close(self) -> None:
        self._beats.close()
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, req: _core.Request) -> Any:
        body = None if req.body is None else _wire.dumps(req.body)
        deadline = time.monotonic() + self.retry_for
        wait = 0.01
        last: Optional[BaseException] = None
        while True:
            try:
                status, data = self._t.request(req.method, req.path, body)
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
            except TRANSPORT_ERRORS as e:
                last = e
            except json.JSONDecodeError as e:
                raise ServerError(0, "internal", f"{req.method} {req.path}: the answer is not JSON: {e}") from None
            if time.monotonic() + wait > deadline:
                raise Unavailable(f"{req.method} {req.path}: no answer for {self.retry_for:g} s: {last or 'still pending'}{no_server_hint(last, self._t.ep)}") from last
            time.sleep(wait)
            wait = min(wait * 2, 1.0)

    def _get(self, path: str) -> Any:
        return self._send(_core.Request("GET", path))

    def health(self) -> Dict[str, Any]:
        return dict(self._get("/v1/health"))

    def stats(self) -> Dict[str, Any]:
        return dict(self._get("/v1/stats"))

    def runs(self) -> List[RunInfo]:
        return [_wire.run_info(r) for r in self._get("/v1/runs")["runs"]]

    def run(self, id: str) -> "Run":
        """Opens the run (creating it if the store has none of that id)."""
        info = self._send(_core.Request("PUT", f"/v1/runs/{seg(id)}", {}))
        return Run(self, id, _wire.run_info(info))

    def fork(self, source: str, at: int, new_id: str) -> "Run":
        """Forks run ``source`` at its committed seq ``at`` into a new run
        ``new_id`` (the engine's DB.Fork), durably, and opens it.

        The fork's state at ``at`` is the source's, ``fork.state(k)`` for
        k <= at answers from the source's history, and its first atom is
        at + 1; its :class:`RunInfo` has ``parent`` and ``forked_at``. The
        source may be a fork itself, may have ended, and may have an atom
        open (which is not committed: ``at`` goes up to its last_seq).

        No effect happens twice across the lineage: an action of the fork
        that repeats the parent's at the same position (same seq, same
        place among the atom's default-key calls, same tool and args)
        returns the parent's certified result without executing, or is
        in doubt under the parent's key; any other action gets a key of
        the fork's own.

        A repeat (the same ``new_id``, ``source`` and ``at``, as after a
        lost answer, which the client retries by itself) returns the fork
        the first made. Raises :class:`~continuum.errors.RunNotFound` for
        an unknown source, :class:`~continuum.errors.NotFound` (code
        atom_not_found, field ``at``) for ``at`` beyond its last committed
        seq, :class:`~continuum.errors.RunExists` when ``new_id`` names
        another run, :class:`~continuum.errors.BadRequest` for an ``at``
        below 0 or an invalid id."""
        info = self._send(_core.Request("POST", f"/v1/runs/{seg(source)}/fork", {"at": int(at), "id": new_id}))
        return Run(self, new_id, _wire.run_info(info))

    def erase(self, run: str, *, reason: str = "") -> DeletedRun:
        """Erases the ended (or deleted) run ``run`` (the engine's DB.Erase,
        crypto-shredding): it is deleted, and its data key destroyed, so
        that its atoms, certificates, result and state can never be read
        again, wherever copies of the store went. Returns once the erasure
        is durable; from then on the run raises
        :class:`~continuum.errors.RunDeleted`. A repeat returns the erasure.
        ``reason`` is recorded in the erase record ("" records "erased by
        request").

        Needs a server with --keyring (else
        :class:`~continuum.errors.NotEncrypted`). Raises
        :class:`~continuum.errors.RunNotEnded` for an active run,
        :class:`~continuum.errors.RunHasForks` while a fork of it is not
        erased, :class:`~continuum.errors.RunNotFound` for an unknown
        run."""
        return _wire.deleted_run(self._send(_core.Request("POST", f"/v1/runs/{seg(run)}/erase", {"reason": reason})))

    def delete(self, run: str, *, reason: str = "") -> DeletedRun:
        """Deletes the ended run ``run`` (the engine's DB.DeleteRuns):
        durable when this returns; from then on the run raises
        :class:`~continuum.errors.RunDeleted`, and :meth:`gc` reclaims its
        space. A repeat returns the deletion. Raises
        :class:`~continuum.errors.RunNotEnded` for an active run,
        :class:`~continuum.errors.RunHasForks` while a fork of it lives."""
        return _wire.deleted_run(self._send(_core.Request("POST", f"/v1/runs/{seg(run)}/delete", {"reason": reason})))

    def gc(self) -> Dict[str, Any]:
        """Reclaims the space of dead records (the engine's DB.GC): what it
        did (segments, bytes, compacted, ...). Needs an admin token."""
        return dict(self._send(_core.Request("POST", "/v1/gc", {})))

    def erase_key(self, run: str, key: str, *, reason: str = "") -> ErasedKey:
        """Erases every value of memory key ``key`` written so far in run
        ``run`` (the engine's DB.EraseKey): the data keys that sealed them
        are destroyed, and the run's state, at every seq, lacks the key
        until a new value is written. The run may be active or ended.

        Needs a server with --keyring that listed ``key`` with --erasable
        when its values were written (else
        :class:`~continuum.errors.NotEncrypted`,
        :class:`~continuum.errors.NotErasable`). Raises
        :class:`~continuum.errors.NothingToErase` when every value of it
        is erased already and none was written since (as a repeat after a
        lost answer does: the key is erased), and
        :class:`~continuum.errors.RunDeleted` for a deleted run (erase it
        whole)."""
        path = f"/v1/runs/{seg(run)}/memory/{seg(key)}/erase"
        return _wire.erased_key(self._send(_core.Request("POST", path, {"reason": reason})))

    def verify(self, *, deep: bool = False, public_key: Optional[str] = None, unsigned_tail: int = 0) -> Dict[str, Any]:
        """The store's verification report (engine.Verify, beside the live
        server): ``report["ok"]`` and its failures naming run and seq."""
        body: Dict[str, Any] = {"deep": deep, "unsigned_tail": unsigned_tail}
        if public_key is not None:
            body["public_key"] = public_key
        return dict(self._send(_core.Request("POST", "/v1/verify", body)))

    # Waits, events and timers (continuum.waits).

    def send_event(self, run: str, name: str, *, sender: str, payload: BytesLike = b"") -> "waits.SendResult":
        """Sends run ``run`` an event named ``name``, durably: it ends the
        run's open wait of that name, or is kept for its next one. ``sender``
        is the sender's id for the event, unique per run: a repeat is a
        duplicate (nothing written), another name or payload raises
        EventMismatch. Needs the write or the event right on the run only
        (the run is not opened)."""
        return waits.send_event(self, run, name, sender, payload)

    def ready(self, *, wait: float = 0.0, max: Optional[int] = None) -> "List[waits.Wait]":
        """The waits that ended (an event, a timeout) and that no atom of
        their run took yet, in the order they ended: the runs to resume. It
        blocks up to ``wait`` seconds for one (a long poll)."""
        return waits.ready(self, wait, max)


class _Heartbeats:
    """Renews the leases of a client's open atoms, every third of each
    lease, from one background thread (started with the first atom)."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._cond = threading.Condition()
        self._due: Dict["Atom", float] = {}
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        # When the thread wakes up next (it sleeps until the earliest
        # renewal due, or a minute): an atom due later needs no wake-up,
        # and most atoms of a busy agent are (a wake-up per atom is a
        # thread switch per atom, which costs the agent's CPU).
        self._wake = 0.0

    def add(self, atom: "Atom") -> None:
        with self._cond:
            due = time.monotonic() + atom.lease / 3
            self._due[atom] = due
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._loop, name="continuum-heartbeats", daemon=True)
                self._thread.start()
            if due < self._wake or self._thread is None:
                self._cond.notify()

    def remove(self, atom: "Atom") -> None:
        with self._cond:
            self._due.pop(atom, None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._due.clear()
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    now = time.monotonic()
                    due = [a for a, t in self._due.items() if t <= now]
                    if due:
                        for a in due:
                            self._due[a] = now + a.lease / 3
                        break
                    self._wake = min(self._due.values(), default=now + 60)
                    self._cond.wait(self._wake - now)
                    self._wake = 0.0  # awake: an atom added now is seen by the next pass
            for a in due:
                try:
                    a.heartbeat()
                except (APIError, Unavailable):
                    self.remove(a)  # the attempt is over, or lost: its requests say so


class Run(RunStreams):
    """One run of the store, as :meth:`Client.run` opened it."""

    def __init__(self, client: Client, id: str, info: RunInfo) -> None:
        self.client = client
        self.id = id
        self.opened = info
        self._path = f"/v1/runs/{seg(id)}"
        # Results of executions whose certificate was not acknowledged
        # (see _core.call_flow), by idempotency key, across attempts.
        self._known: Dict[str, bytes] = {}
        # The seq this client expects the run's next atom to have (its last
        # committed seq + 1 as last seen), sent with a begin that carries
        # its commit; None when unknown.
        self._next: Optional[int] = info.last_seq + 1

    def __repr__(self) -> str:
        return f"Run({self.id!r})"

    def info(self) -> RunInfo:
        return _wire.run_info(self.client._get(self._path))

    def state(self, seq: Optional[int] = None) -> State:
        """The frame as of seq (default: the last committed atom)."""
        q = "" if seq is None else f"?seq={int(seq)}"
        return _wire.state(self.client._get(f"{self._path}/state{q}"))

    def atom_at(self, seq: int) -> AtomRecord:
        """The committed atom at seq: its delta and its actions."""
        return _wire.atom_record(self.client._get(f"{self._path}/atoms/{int(seq)}"))

    def interrupted(self) -> Optional[Interrupted]:
        return _wire.interrupted(self.client._get(f"{self._path}/interrupted").get("interrupted"))

    def inbox(self) -> List[RunMessage]:
        """The messages sent to this run and not consumed yet, oldest first."""
        return [_run_message(m) for m in self.client._get(f"{self._path}/inbox")["messages"]]

    def verify(self, *, deep: bool = False, public_key: Optional[str] = None, unsigned_tail: int = 0) -> Dict[str, Any]:
        """Verifies the store and returns this run's part of the report:
        ``ok``, ``run`` (its line), ``failures``, ``warnings`` and
        ``store_ok`` (the store's own records). Failures of other runs are
        not reported. ``public_key`` is the text of a public key file."""
        body: Dict[str, Any] = {"deep": deep, "unsigned_tail": unsigned_tail}
        if public_key:
            body["public_key"] = public_key
        return dict(self.client._send(_core.Request("POST", f"{self._path}/verify", body)))

    def inspect(self) -> Dict[str, Any]:
        """What continuumctl inspect says of this run: atoms, last_seq,
        head, fails, status, parent, snapshot_seq, frame_seq, ..."""
        return dict(self.client._get(f"{self._path}/inspect"))

    def diff(self, a: Union[int, str], b: Union[int, str], *, other: Optional[str] = None) -> Dict[str, Any]:
        """What continuumctl diff shows: this run at seq ``a`` and at seq
        ``b`` (or run ``other`` at ``b``: a fork and its parent, any two
        runs of one lineage). ``base`` is their common state; ``a`` and
        ``b`` the atoms that lead from it to each (``spans``, ``ops``,
        ``atoms`` as export writes them). A seq may be ``"last"``. Needs
        the read right on both runs."""
        q = f"?a={a}&b={b}"
        if other is not None:
            q += f"&run_b={_wire.seg(other)}"
        return dict(self.client._get(f"{self._path}/diff{q}"))

    def end(self, status: str, result: Optional[BytesLike] = None) -> RunInfo:
        """Ends the run (``completed``, ``failed`` or ``cancelled``), with an
        optional result, durably: begin then raises RunEnded. Refused
        (RunHeld) while an atom of the run is open."""
        body: Dict[str, Any] = {"status": status}
        if result is not None:
            _wire.put_bytes(body, "result", result)
        return _wire.run_info(self.client._send(_core.Request("POST", f"{self._path}/end", body)))

    def _begin_body(self, takeover: bool, lease: Optional[float]) -> Dict[str, Any]:
        body: Dict[str, Any] = {"request_id": _wire.request_id(), "takeover": takeover}
        if lease is not None:
            body["lease_ms"] = int(lease * 1000)
        return body

    def begin(self, *, takeover: bool = False, lease: Optional[float] = None) -> "Atom":
        """Begins the run's next atom. While the atom is open the client's
        background thread renews its lease (every third of it). ``takeover`` abandons
        the attempt of another client holding the run (for an agent that
        restarts and is its run's only worker); without it a held run
        raises :class:`~continuum.errors.RunHeld`."""
        r = self.client._send(_core.Request("POST", f"{self._path}/attempts", self._begin_body(takeover, lease)))
        return Atom(self, r)

    def atom(self, *, takeover: bool = False, lease: Optional[float] = None) -> "Atom":
        """An atom for a ``with`` block: committed with its :attr:`Atom.delta`
        when the block ends, failed if it raises::

            with run.atom() as atom:
                out = atom.do("billing.charge", charge, args={"cents": 500})
                atom.delta.set("charge", out)

        The begin rides on the atom's first request: its first action's
        call, or its commit (an atom without actions is one round trip).
        Reading :attr:`Atom.seq`, :attr:`Atom.attempt` or
        :attr:`Atom.interrupted` before either begins it at once.
        """
        return Atom(self, None, self._begin_body(takeover, lease))

    def branch(
        self, name: str, *, reads: Sequence[str] = (), takeover: bool = False, lease: Optional[float] = None
    ) -> "Atom":
        """A branch of the run named name: an atom that may be in flight
        with other branches of the run (optimistic concurrency). It reads
        the state at its :attr:`Atom.base` and takes its seq at its commit,
        which raises :class:`~continuum.errors.BranchConflict`, writing
        nothing, if an atom committed after its base wrote a state key it
        writes or declared in ``reads`` (``"memory:KEY"``,
        ``"subgoal:ID"``, ``"pending:CALL_ID"``, ``"objective"``,
        ``"scratchpad"``, ``"messages"``, ``"frame"``). Branching again
        under the same name is its retry: actions certified by an earlier
        attempt answer their results without executing. Used as
        :meth:`atom` is (``with run.branch("fetch-a") as b: ...``); the
        begin rides on its first call or its commit."""
        body = {"name": name, "reads": list(reads), **self._begin_body(takeover, lease)}
        return Atom(self, None, body, branch=name)

    def branch_step(
        self,
        name: str,
        fn: Callable[["Atom"], T],
        *,
        reads: Sequence[str] = (),
        lease: Optional[float] = None,
        max_attempts: int = 20,
    ) -> T:
        """Runs fn in the branch name and commits it; after a conflict or a
        lost attempt fn runs again in a new branch of the same name (on
        the newer state), up to max_attempts times. Certified actions answer
        their results without executing."""
        for i in range(max_attempts):
            try:
                with self.branch(name, reads=reads, takeover=i > 0, lease=lease) as atom:
                    return fn(atom)
            except (BranchConflict, AttemptLost):
                if i == max_attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def rollback(
        self,
        to: int,
        execute: Callable[[Mapping[str, Any]], BytesLike],
        *,
        allow_not_undone: bool = False,
        reconcile: Optional[Callable[[Mapping[str, Any]], Union[Happened, DidNotHappen]]] = None,
    ) -> Dict[str, Any]:
        """Rolls the run back to seq ``to``: the actions certified after it
        are undone, newest first, by the compensations they declared
        (:meth:`Atom.do`'s ``compensate``), each run here by
        ``execute(step)`` exactly once (``step``: ``key``, ``tool``,
        ``args``, ``idempotent``, ``undoes``; pass ``step["key"]`` to the
        downstream). Returns the server's ``done`` answer (``seq``,
        ``undone``, ``results``, ``not_undone``).

        If ``execute`` raises, the compensation is certified as failed and
        :class:`~continuum.errors.ActionFailed` raised: the rollback stays
        pending (begin is refused) until ``rollback`` is called again.
        After a crash of this process or the server, call ``rollback``
        with the same ``to``: certified compensations are not run again; one
        whose outcome is unknown goes to ``reconcile(step_or_key)``
        (:class:`Happened` or :class:`DidNotHappen`), or raises
        :class:`~continuum.errors.InDoubt` without it. Actions without a
        compensation refuse the rollback (``not_undone``) unless
        ``allow_not_undone``."""
        send = self.client._send
        path = f"{self._path}/rollback"
        req = {"to": to, "allow_not_undone": allow_not_undone, "request_id": _wire.request_id()}
        r = send(_core.Request("POST", path, req))
        while True:
            status = r.get("status")
            if status == "done":
                return dict(r)
            if status == "execute":
                step = r["step"]
                try:
                    out = _wire.to_bytes(execute(step))
                except Exception as e:
                    body: Dict[str, Any] = {"step": step["n"], "error": _core.error_text(e) or type(e).__name__}
                    send(_core.Request("POST", f"{path}/outcome", body))
                    raise
                body = {"step": step["n"]}
                _wire.put_bytes(body, "result", out)
                try:
                    r = send(_core.Request("POST", f"{path}/outcome", body))
                except APIError as e:
                    if e.code != "rollback_not_found":
                        raise
                    r = send(_core.Request("POST", path, req))  # the server restarted: resume
            elif status == "in_doubt":
                key = str(r["key"])
                if reconcile is None:
                    raise InDoubt(key, str((r.get("step") or {}).get("tool", "")), -1, "")
                verdict = reconcile(r.get("step") or {"key": key})
                res: Dict[str, Any] = {"key": key}
                if isinstance(verdict, Happened):
                    _wire.put_bytes(res, "result", verdict.result)
                else:
                    res["failed"] = verdict.reason
                r = send(_core.Request("POST", f"{path}/resolve", res))
                if r.get("status") == "resolved":
                    r = send(_core.Request("POST", path, req))
            elif status == "failed":
                raise ActionFailed("", "", -1, str(r.get("error", "")))
            else:  # running: the engine is writing
                r = send(_core.Request("POST", path, req))

    def pending_rollback(self) -> Optional[int]:
        """The seq a pending rollback of the run goes back to, or None."""
        r = self.client._get(f"{self._path}/rollback")
        return int(r["to"]) if r.get("pending") else None

    # Waits, events and timers (continuum.waits).

    def wait(self, name: str, *, timeout: Optional[float] = None, deadline: "Optional[waits.TimeLike]" = None,
             after: Optional[int] = None) -> "waits.Wait":
        """The run waits, durably, after its last atom, for an event named
        ``name``, until ``deadline`` (an aware datetime or RFC 3339) or for
        ``timeout`` seconds (neither: no deadline). No atom may be open
        (RunHeld). The same name again after the same atom returns the
        wait the run has; another raises WaitExists. ``after``: the seq the
        wait must follow (SeqMismatch otherwise)."""
        return waits.wait_of(self.client._send(waits.wait_request(self._path, name, timeout, deadline, after)))

    def sleep(self, *, until: "Optional[waits.TimeLike]" = None, duration: Optional[float] = None,
              after: Optional[int] = None) -> "waits.Wait":
        """A durable timer: the run waits for the clock only, until
        ``until`` or for ``duration`` seconds; it ends as timed_out."""
        return waits.wait_of(self.client._send(waits.sleep_request(self._path, until, duration, after)))

    def current_wait(self, *, wait: float = 0.0) -> "Optional[waits.Wait]":
        """The run's wait after its last atom (None: none), waiting up to
        ``wait`` seconds (at most 15) for an open one to end."""
        return waits.current_wait(self, wait)

    def wait_ended(self, *, timeout: Optional[float] = None) -> "Optional[waits.Wait]":
        """Blocks until the run's wait after its last atom ended (or
        ``timeout`` seconds passed: the open wait), through server restarts;
        None if the run has no wait there."""
        return waits.wait_ended(self, timeout)

    def cancel_wait(self) -> "waits.Wait":
        """Ends the run's open wait as cancelled."""
        return waits.wait_of(self.client._send(_core.Request("POST", f"{self._path}/wait/cancel", {})))

    def send_event(self, name: str, *, sender: str, payload: BytesLike = b"") -> "waits.SendResult":
        """Client.send_event to this run."""
        return waits.send_event(self.client, self.id, name, sender, payload)

    def step(self, fn: Callable[["Atom"], T], *, takeover: bool = False, lease: Optional[float] = None, max_attempts: int = 20) -> T:
        """Runs fn in an atom and commits it; when the attempt is lost (the
        server restarted, the lease expired) fn runs again in a new attempt
        of the same seq, up to max_attempts times. Certified actions answer
        their results without executing; fn must make its calls in the same
        order each time (default keys number them)."""
        for i in range(max_attempts):
            try:
                with self.atom(takeover=takeover, lease=lease) as atom:
                    return fn(atom)
            except AttemptLost:
                if i == max_attempts - 1:
                    raise
        raise AssertionError("unreachable")


class _Pending(NamedTuple):
    """An outcome held back to ride on the atom's next request: call n's
    flow, suspended at its outcome request."""

    n: int
    flow: Generator[_core.Effect, Any, Any]
    req: _core.Request
    execute: Optional[Callable[[str], BytesLike]]
    reconcile: Optional[Reconciler]


class Atom(AtomStreams):
    """One attempt at an atom of a run: made by :meth:`Run.begin` or
    :meth:`Run.atom`. Its actions go through :meth:`do`; its change to the
    frame accumulates in :attr:`delta` (or is given to :meth:`commit`)."""

    def __init__(
        self, run: Run, begin: Optional[Mapping[str, Any]], body: Optional[Dict[str, Any]] = None, *, branch: Optional[str] = None
    ) -> None:
        self.run = run
        #: The branch's name (:meth:`Run.branch`), None for an atom of a begin.
        self.branch = branch
        self._base: Optional[int] = None
        self._begins = f"{run._path}/branches" if branch is not None else f"{run._path}/attempts"
        self.delta = Delta()
        self.committed: Optional[Committed] = None
        self._calls = 0
        self._order = threading.Lock()
        # Chunks appended per (attempt path, stream): streams.AtomStreams.append.
        self._appends_lock = threading.Lock()
        self._appended: Dict[Tuple[str, str], int] = {}
        self._token: Optional[Token[Any]] = None
        self._body = body or {}
        self._begun = False
        self._pending: Optional[_Pending] = None
        if begin is not None:
            self._set(begin)

    def _set(self, begin: Mapping[str, Any]) -> None:
        """Takes the begin's answer: the attempt is open."""
        self._seq = int(begin["seq"])
        self._attempt = str(begin["attempt"])
        self._lease = int(begin["lease_ms"]) / 1000
        self._interrupted = _wire.interrupted(begin.get("interrupted"))
        if begin.get("base") is not None:
            self._base = int(begin["base"])
        self._path = f"{self.run._path}/attempts/{self._attempt}"
        self._begun = True
        self.run.client._beats.add(self)

    def _take_attempt(self, e: APIError) -> None:
        """Takes the attempt an error of a ridden begin names (the begin
        happened; what rode on it failed)."""
        att = e.details.get("attempt") if e.details else None
        if isinstance(att, Mapping) and not self._begun:
            self._set(att)

    def _ensure(self) -> None:
        """Begins the atom if its first request was not made. A committed
        atom is never begun again (its commit may be known without its
        attempt: _commit_riding found it in the store)."""
        if not self._begun and self.committed is None:
            with self._order:
                if not self._begun and self.committed is None:
                    self._set(self.run.client._send(_core.Request("POST", self._begins, self._body)))

    @property
    def seq(self) -> int:
        """The atom's seq (begins it, if its first request was not made).
        A branch has none (0) until it commits: then :attr:`committed`
        has it."""
        self._ensure()
        return self._seq

    @property
    def base(self) -> Optional[int]:
        """A branch's base: the seq whose state it reads
        (``run.state(atom.base)``); None for an atom of a begin."""
        self._ensure()
        return self._base

    @property
    def attempt(self) -> str:
        self._ensure()
        return self._attempt

    @property
    def lease(self) -> float:
        self._ensure()
        return self._lease

    @property
    def interrupted(self) -> Optional[Interrupted]:
        """The earlier attempt of this seq that ended without commit or
        fail (a restart, an expired lease, a takeover), or None."""
        self._ensure()
        return self._interrupted

    def __repr__(self) -> str:
        return f"Atom({self.run.id!r}, seq={self._seq})" if self._begun else f"Atom({self.run.id!r}, not begun)"

    def _stop(self) -> None:
        if self._begun:
            self.run.client._beats.remove(self)

    def _drive(
        self,
        flow: Generator[_core.Effect, Any, T],
        execute: Optional[Callable[[str], BytesLike]] = None,
        reconcile: Optional[Reconciler] = None,
        *,
        defer: Optional[int] = None,
        value: Any = None,
        exc: Optional[BaseException] = None,
    ) -> T:
        """Drives flow to its end. With defer (the flow's call number), the
        outcome of a successful execution may be held back to ride on the
        atom's next request (:meth:`_flush`); the executed result is then
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
                if eff.deferrable and defer is not None and executed is not None:
                    with self._order:
                        if self._calls == defer + 1 and self._pending is None:
                            self._pending = _Pending(defer, flow, eff, execute, reconcile)
                            return executed  # type: ignore[return-value]
                try:
                    value = send(eff)
                except APIError as e:
                    exc = e
            elif isinstance(eff, _core.Execute):
                assert execute is not None
                try:
                    executed = _wire.to_bytes(execute(eff.key))
                    value = ("ok", executed)
                except Exception as e:
                    value = ("err", e)
            else:
                assert isinstance(eff, _core.Reconcile)
                if reconcile is None:
                    raise InDoubt(eff.key, eff.tool, eff.call, eff.fingerprint)
                value = reconcile(eff.key)

    def _take_pending(self) -> Optional["_Pending"]:
        with self._order:
            pend, self._pending = self._pending, None
        return pend

    def _flush(self, pend: Optional["_Pending"], ride: Optional[Tuple[str, Any]] = None) -> Optional[Mapping[str, Any]]:
        """Sends pend, the outcome :meth:`_drive` held back, with what rides
        on it (``("next", call)`` or ``("commit", {"delta": ops})``), and
        finishes its call's flow. Returns the answer of what rode, or None
        when nothing rode (no outcome was held, or it was not certified at
        once: then what would have ridden is still to send). Raises the
        error of the outcome or of what rode on it."""
        if pend is None:
            return None
        body = dict(pend.req.body or {})
        if ride is not None:
            body[ride[0]] = ride[1]
        try:
            r = self.run.client._send(_core.Request("POST", pend.req.path, body))
        except APIError as e:
            got = e.details.get("outcome")
            if isinstance(got, Mapping):  # the outcome was certified; what rode failed
                self._drive(pend.flow, pend.execute, pend.reconcile, value=got)
                raise
            if ride is not None and ride[0] == "commit" and (e.field or "").startswith("commit."):
                # The delta was refused before the outcome was read: the
                # outcome alone, so that the action is certified whatever
                # the agent does next (a commit with another delta, or
                # nothing: then the lease runs out and the atom is failed).
                try:
                    answer = self.run.client._send(_core.Request("POST", pend.req.path, pend.req.body, repeat_pending=True))
                    self._drive(pend.flow, pend.execute, pend.reconcile, value=answer)
                except ContinuumError:
                    pass  # the refused delta is the error to report
                raise e
            self._drive(pend.flow, pend.execute, pend.reconcile, exc=e)
            raise
        rode = r.get(ride[0]) if ride is not None else None
        answer = {k: v for k, v in r.items() if k not in ("next", "commit")}
        if answer.get("status") == "pending":  # not certified yet: the outcome alone, until it is
            answer = self.run.client._send(_core.Request("POST", pend.req.path, pend.req.body, repeat_pending=True))
        self._drive(pend.flow, pend.execute, pend.reconcile, value=answer)
        return rode if isinstance(rode, Mapping) else None

    def do(
        self,
        tool: str,
        execute: Callable[[str], BytesLike],
        *,
        args: Any = None,
        key: Optional[str] = None,
        idempotent: bool = False,
        reconcile: Optional[Reconciler] = None,
        redact: Optional[Sequence[str]] = None,
        redact_result: Optional[Sequence[str]] = None,
        compensate: Optional[Mapping[str, Any]] = None,
        retry: Union[RetryPolicy, Mapping[str, Any], None] = None,
    ) -> bytes:
        """Performs an action at most once and returns its result.

        The begin rides on the atom's first call, and the outcome of an
        execution on the atom's next request (the next call, or the
        commit), so that an atom with k actions is k + 1 round trips: the
        result is certified when that request is answered (a fail, a send,
        a receive or a resolve sends it first). An outcome that is never
        sent (the process dies) leaves the action in doubt, as a death
        during its execution does. With ``redact_result`` the outcome is
        sent at once and the certified (redacted) result returned.

        ``compensate`` declares what undoes it, for :meth:`Run.rollback`:
        ``{"tool": ..., "args": ..., "key": ..., "idempotent": ...,
        "redact": [...]}`` (tool required), recorded with the action's intent.

        ``retry`` (a :class:`~continuum.RetryPolicy`) has the server retry
        a failed execution: ``execute`` runs again, under the same key,
        after the policy's backoff, until it succeeds or the policy gives
        the action up (:class:`~continuum.GaveUp`, raised from the last
        execution's exception). The count and the schedule survive a
        restart of either side.

        ``execute(key)`` performs the effect, passing the idempotency key to
        the downstream, and returns the result (bytes, or text). It is
        called only when the server says so: never for an action already
        certified (its result is returned), and after a crash only for an
        idempotent one. It must raise only when the effect did not happen
        (the failure is certified and the exception re-raised).

        An action whose earlier execution's outcome is unknown raises
        :class:`~continuum.errors.InDoubt`, unless ``reconcile(key)`` is
        given: it asks the downstream and answers Happened(result) or
        DidNotHappen() (then execute runs again, under the same key).
        """
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
        with self._order:
            n = self._calls
            self._calls += 1
            pend, self._pending = self._pending, None
            first: Optional[Mapping[str, Any]] = None
            if pend is not None:
                first = self._flush(pend, ("next", body))  # the previous call's outcome carries this one
                if first is None or first.get("status") == "pending":
                    first = send(_core.Request("POST", f"{self._path}/calls/{n}", body, repeat_pending=True))
            elif self._begun:
                first = send(_core.Request("POST", f"{self._path}/calls/{n}", body, repeat_pending=True))
            else:
                try:
                    r = send(_core.Request("POST", self._begins, {**self._body, "call": body}))
                except APIError as e:
                    self._take_attempt(e)
                    raise
                self._set(r)
                first = r["call"]
                if first.get("status") == "pending":
                    first = send(_core.Request("POST", f"{self._path}/calls/{n}", body, repeat_pending=True))
        defer = n if not redact_result else None  # a redacted result is the server's to give
        return self._drive(_core.call_flow(self._path, n, tool, first, self.run._known), execute, reconcile, defer=defer)

    def do_json(
        self,
        tool: str,
        execute: Callable[[str], Any],
        *,
        args: Any = None,
        key: Optional[str] = None,
        idempotent: bool = False,
        reconcile: Optional[Callable[[str], Union[Happened, DidNotHappen]]] = None,
        redact: Optional[Sequence[str]] = None,
        redact_result: Optional[Sequence[str]] = None,
    ) -> Any:
        """:meth:`do` for tools whose result is a JSON value: execute
        returns it, and so does do_json (the certificate holds its JSON)."""
        def ex(k: str) -> bytes:
            return _wire.dumps(execute(k))

        def rec(k: str) -> Union[Happened, DidNotHappen]:
            assert reconcile is not None
            v = reconcile(k)
            return Happened(_wire.dumps(v.result)) if isinstance(v, Happened) else v

        out = self.do(tool, ex, args=args, key=key, idempotent=idempotent, reconcile=rec if reconcile else None,
                      redact=redact, redact_result=redact_result)
        return json.loads(out) if out else None

    def resolve(self, doubt: InDoubt, result: BytesLike) -> bytes:
        """Settles an in-doubt action that took effect, with its result."""
        self._flush(self._take_pending())
        body: Dict[str, Any] = {}
        _wire.put_bytes(body, "result", result)
        r = self.run.client._send(_core.Request("POST", f"{self._path}/calls/{doubt.call}/resolve", body, repeat_pending=True))
        return self._drive(_core.call_flow(self._path, doubt.call, doubt.tool, r, self.run._known))

    def resolve_failed(self, doubt: InDoubt, reason: str, execute: Optional[Callable[[str], BytesLike]] = None) -> Optional[bytes]:
        """Settles an in-doubt action that did not take effect. With
        execute, the action is executed again at once, under its key, and
        its result returned."""
        self._flush(self._take_pending())
        body: Dict[str, Any] = {"failed": reason, "retry": execute is not None}
        r = self.run.client._send(_core.Request("POST", f"{self._path}/calls/{doubt.call}/resolve", body, repeat_pending=True))
        if execute is None:
            return None
        return self._drive(_core.call_flow(self._path, doubt.call, doubt.tool, r, self.run._known), execute)

    def send(self, to: str, payload: BytesLike) -> None:
        """Sends payload to run ``to`` as part of this atom: the message
        exists if and only if the atom commits."""
        self._flush(self._take_pending())
        body: Dict[str, Any] = {"to": to}
        _wire.put_bytes(body, "payload", payload)
        self._ensure()
        self.run.client._send(_core.Request("POST", f"{self._path}/send", body))

    def receive(self, sender: Optional[str] = None, wait: float = 0.0) -> Optional[RunMessage]:
        """The next message of the run's inbox (of ``sender`` only, when
        given), waiting up to ``wait`` seconds for one; None if none came.
        It is consumed when this atom commits; a fail, a lost attempt or a
        crash gives it back to a later attempt."""
        body: Dict[str, Any] = {"wait_ms": int(wait * 1000)}
        self._flush(self._take_pending())
        if sender:
            body["from"] = sender
        self._ensure()
        m = self.run.client._send(_core.Request("POST", f"{self._path}/receive", body)).get("message")
        return None if m is None else _run_message(m)

    def wait_outcome(self) -> "waits.Wait":
        """The ended wait this atom follows (the run's wait after seq - 1),
        with its event: the atom acts on it, and its commit takes it. A
        crash or a fail before that commit leaves the next attempt the same
        outcome. Raises WaitNotEnded (still open) or WaitNotFound (none)."""
        self._flush(self._take_pending())
        self._ensure()
        return waits.wait_of(self.run.client._get(f"{self._path}/wait"))

    def heartbeat(self) -> None:
        """Renews the lease now (the client's background thread does it
        anyway, every third of the lease)."""
        self.run.client._send(_core.Request("POST", f"{self._path}/heartbeat", {}))

    def commit(self, delta: Optional[Delta] = None) -> Committed:
        """Commits the atom with delta (default: :attr:`delta`): durable
        when this returns."""
        ops = (delta if delta is not None else self.delta).ops
        if not self._begun and self._commit_riding(ops):
            return self.committed  # type: ignore[return-value]
        self._ensure()
        try:
            done = self._commit_on_outcome(ops)
            if done is None:
                done = self._drive(_core.commit_flow(self._path, self.run.id, self.seq, ops))
            self.committed = done
        except APIError as e:
            if e.code != "invalid_delta":
                self._stop()
            raise
        self._stop()
        if self.branch is None:
            self.run._next = self.committed.seq + 1
        return self.committed

    def _commit_on_outcome(self, ops: Any) -> Optional[Committed]:
        """Commits on the outcome held back, if any (None: nothing rode).
        If the server no longer knows the attempt (it restarted while the
        answer was on its way), the atom at seq is read back, as
        commit_flow does."""
        pend = self._take_pending()
        try:
            r = self._flush(pend, ("commit", {"delta": ops}))
        except AttemptLost as lost:
            if lost.code != "attempt_not_found" or self._seq == 0 or pend is None:
                raise
            try:
                rec = self.run.client._get(f"{self.run._path}/atoms/{self._seq}")
            except NotFound:
                raise lost from None
            if _wire.same_delta(ops, rec.get("delta", [])):
                return Committed(run=self.run.id, seq=self._seq, head=str(rec["head"]))
            raise
        return None if r is None else _wire.committed(r)

    def _commit_riding(self, ops: Any) -> bool:
        """Begins and commits in one request; False when the atom must be
        begun first (the run's next seq is not the one this client saw)."""
        body = {**self._body, "commit": {"delta": ops}}
        nxt = self.run._next if self.branch is None else None  # a branch takes its seq at its commit
        if nxt is not None:
            body["seq"] = nxt
        try:
            r = self.run.client._send(_core.Request("POST", self._begins, body))
        except APIError as e:
            self._take_attempt(e)
            if e.code != "seq_mismatch" or nxt is None:
                raise
            # Either another client committed seq nxt, or this request did
            # and its answer was lost while the server restarted (which
            # forgets request ids): the atom at nxt says which.
            rec = self.run.client._get(f"{self.run._path}/atoms/{nxt}")
            if _wire.same_delta(ops, rec.get("delta", [])):
                self.committed = Committed(run=self.run.id, seq=nxt, head=str(rec["head"]))
                self._seq, self._begun = nxt, False
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

    def fail(self, reason: str) -> None:
        """Ends the attempt without committing: the seq is begun again by
        the next begin, and actions certified in it are not executed again."""
        if not self._begun:
            return  # nothing was begun: nothing to fail
        try:
            self._flush(self._take_pending())  # the action happened: certified before the atom fails
        except ContinuumError:
            pass  # the fail says what happened to the attempt
        try:
            self.run.client._send(_core.Request("POST", f"{self._path}/fail", {"reason": reason}))
        finally:
            self._stop()

    def __enter__(self) -> "Atom":
        self._token = _tool.current.set(self)
        return self

    def __exit__(self, et: Optional[Type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if self._token is not None:
            _tool.current.reset(self._token)
            self._token = None
        if e is None:
            self.commit()
            return
        try:
            if not isinstance(e, (AttemptLost, Unavailable)) and isinstance(e, Exception):
                self.fail(_core.error_text(e))
        except (APIError, Unavailable):
            pass  # the exception in flight says more
        finally:
            self._stop()


def _run_message(m: Mapping[str, Any]) -> RunMessage:
    return RunMessage(sender=str(m["from"]), seq=int(m["seq"]), index=int(m["index"]), to=str(m["to"]),
                      payload=_wire.get_bytes(m, "payload") or b"")
