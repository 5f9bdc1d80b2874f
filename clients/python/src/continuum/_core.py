"""The protocol's flows, without I/O.

An action's call and an atom's commit take several requests, whose order
and meaning are the same for the synchronous and the asyncio client. Each
flow is a generator that yields effects (a request to send, the tool to
execute, the downstream to ask) and receives their results; the two
clients drive the same generators, each with its own I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Generator, Mapping, MutableMapping, Optional, Tuple, Union

from . import _wire
from ._retry import GaveUp
from .errors import ActionFailed, AttemptLost, NotFound, ServerError
from .types import Committed, DidNotHappen, Happened


@dataclass(frozen=True)
class Request:
    """Send a request; the driver answers with its decoded JSON body (or
    raises the APIError of an error answer). With repeat_pending, an answer
    whose status is "pending" is sent again until it is not."""

    method: str
    path: str
    body: Optional[Mapping[str, Any]] = None
    repeat_pending: bool = False
    #: The outcome of an execution that succeeded: the driver may hold it
    #: back, to ride on the atom's next request (the next call or the
    #: commit), and answer it when that request is answered.
    deferrable: bool = False


@dataclass(frozen=True)
class Execute:
    """Run the tool with the idempotency key; the driver answers
    ("ok", bytes) or ("err", the exception it raised)."""

    key: str


@dataclass(frozen=True)
class Reconcile:
    """Ask the downstream whether the in-doubt action took effect; the
    driver answers Happened or DidNotHappen, or raises InDoubt when the
    agent gave no way to ask."""

    key: str
    tool: str
    call: int
    fingerprint: str


Effect = Union[Request, Execute, Reconcile]
ExecResult = Tuple[str, Any]


def error_text(e: BaseException) -> str:
    msg = str(e)
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


def call_flow(
    path: str,
    n: int,
    tool: str,
    answer: Mapping[str, Any],
    known: MutableMapping[str, bytes],
) -> Generator[Effect, Any, bytes]:
    """Carries call n of the attempt at path from its first answer to its
    certified result.

    known maps idempotency keys to the results of executions this process
    made whose certificate it has not seen acknowledged (the answer to the
    outcome was lost: a restart, a cut connection). When such a key comes
    back in doubt it is resolved with that result, and when it comes back
    to execute (an idempotent action) the result is reported again: the
    effect happened once, and is not asked for twice.
    """
    raised: Optional[BaseException] = None
    r: Mapping[str, Any] = answer
    while True:
        status = r.get("status")
        key = str(r.get("key", ""))
        if status == "done":
            known.pop(key, None)
            return _wire.get_bytes(r, "result") or b""
        if status == "failed":
            known.pop(key, None)
            if r.get("gave_up"):
                # The call's retry policy gave the action up (now, or in an
                # earlier process): the last execution's exception, if this
                # process ran it, is the cause.
                gave = GaveUp(tool, key, n, str(r.get("error", "")), str(r["gave_up"]), int(r.get("attempt") or 0))
                if raised is not None:
                    raise gave from raised
                raise gave
            if raised is not None:
                raise raised
            raise ActionFailed(tool, key, n, str(r.get("error", "")))
        if status == "execute":
            deferrable = False
            if key in known:
                outcome: Dict[str, Any] = {}
                _wire.put_bytes(outcome, "result", known[key])
            else:
                kind, value = yield Execute(key)
                deferrable = kind == "ok"
                if kind == "ok":
                    known[key] = value
                    outcome = {}
                    _wire.put_bytes(outcome, "result", value)
                else:
                    # The tool raised: by the contract of execute, its
                    # effect did not happen. It is certified as failed and
                    # the exception goes back to the agent.
                    raised = value
                    outcome = {"error": error_text(value)}
            if r.get("attempt"):
                # A call with a retry policy: the outcome names its attempt.
                outcome["attempt"] = r["attempt"]
            r = yield Request("POST", f"{path}/calls/{n}/outcome", outcome, repeat_pending=True, deferrable=deferrable)
            continue
        if status == "in_doubt":
            if key in known:
                body: Dict[str, Any] = {}
                _wire.put_bytes(body, "result", known[key])
                r = yield Request("POST", f"{path}/calls/{n}/resolve", body, repeat_pending=True)
                continue
            verdict = yield Reconcile(key, tool, n, str(r.get("fingerprint", "")))
            r = yield Request("POST", f"{path}/calls/{n}/resolve", resolution(verdict), repeat_pending=True)
            continue
        raise ServerError(200, "internal", f"call {n} answered an unknown status {status!r}")


def resolution(verdict: Union[Happened, DidNotHappen]) -> Dict[str, Any]:
    """The body of a resolve request for what a reconcile function found."""
    if isinstance(verdict, Happened):
        body: Dict[str, Any] = {}
        _wire.put_bytes(body, "result", _wire.to_bytes(verdict.result))
        return body
    if isinstance(verdict, DidNotHappen):
        return {"failed": verdict.reason or "the downstream has no trace of the key", "retry": True}
    raise TypeError(f"reconcile must return Happened or DidNotHappen, not {type(verdict).__name__}")


def commit_flow(path: str, run: str, seq: int, ops: Any) -> Generator[Effect, Any, Committed]:
    """Commits the attempt at path. If the server no longer knows the
    attempt (it restarted while the commit's answer was on its way), the
    atom at seq is read back: the commit landed if it holds the ops sent."""
    try:
        r = yield Request("POST", f"{path}/commit", {"delta": ops})
        return _wire.committed(r)
    except AttemptLost as lost:
        if lost.code != "attempt_not_found" or seq == 0:
            raise  # a branch (seq 0) has no seq to read back
        try:
            rec = yield Request("GET", f"/v1/runs/{_wire.seg(run)}/atoms/{seq}")
        except NotFound:
            raise lost from None
        if _wire.same_delta(ops, rec.get("delta", [])):
            return Committed(run=run, seq=seq, head=str(rec["head"]))
        raise lost
