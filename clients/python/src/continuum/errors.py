"""The exceptions of the client.

Every error the server answers with becomes an :class:`APIError` (or one of
its subclasses), carrying the HTTP status, the protocol's error ``code``, the
server's message and the request ``field`` it concerns. The states of an
action that the agent must handle have classes of their own:
:class:`InDoubt` (with its idempotency key) and :class:`ActionFailed`.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

__all__ = [
    "ContinuumError",
    "APIError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "AuthRateLimited",
    "CommitMismatch",
    "NotFound",
    "RunNotFound",
    "Conflict",
    "RunHeld",
    "RunEnded",
    "RunExists",
    "BranchConflict",
    "RollbackPending",
    "RunNotEnded",
    "RunHasForks",
    "NotEncrypted",
    "NotErasable",
    "NothingToErase",
    "RunDeleted",
    "AttemptLost",
    "TooLarge",
    "Unprocessable",
    "InvalidDelta",
    "InvalidArgs",
    "ServerError",
    "ShuttingDown",
    "InDoubt",
    "ActionFailed",
    "Unavailable",
    "NoAtom",
    "EventMismatch",
    "WaitExists",
    "WaitNotFound",
    "WaitNotEnded",
    "SeqMismatch",
]


class ContinuumError(Exception):
    """The base of every exception of this package."""


class APIError(ContinuumError):
    """An error answer of the server.

    ``code`` is stable (the protocol's ErrorCode); ``message`` is for people.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: Optional[str] = None,
        details: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.details: Mapping[str, Any] = details or {}
        where = f" ({field})" if field else ""
        super().__init__(f"{status} {code}{where}: {message}")


class BadRequest(APIError):
    """400: the request is malformed; ``field`` names what is wrong."""


class Unauthorized(APIError):
    """401: no bearer token, or a wrong one."""


class Forbidden(APIError):
    """403 forbidden: the token's scope (its rights, or its runs' id prefix)
    does not allow the request."""


class AuthRateLimited(APIError):
    """429 auth_rate_limited: too many failed authentications from this
    client's address; ``details["retry_after_ms"]`` says when to retry."""


class NotFound(APIError):
    """404: no such run, call, atom or endpoint (``code`` says which:
    atom_not_found for a seq beyond the run's last committed one)."""


class RunNotFound(NotFound):
    """404 run_not_found: the store has no run of that id."""


class Conflict(APIError):
    """409: the request conflicts with the state of the run or the attempt."""


class RunHeld(Conflict):
    """409 run_held: another attempt holds the run's lease.

    ``details`` has the ``seq`` it works on and when its lease expires;
    begin with ``takeover=True`` to abandon it.
    """


class RunEnded(Conflict):
    """409 run_ended: the run ended (Run.end): it takes no more atoms, and
    no end with another status or result."""


class CommitMismatch(Conflict):
    """409 commit_mismatch: a repeated commit of a committed attempt carries
    another delta than the one committed."""


class RunExists(Conflict):
    """409 run_exists: a fork's new id names a run already, one that is not
    that fork (``field`` is ``id``; ``details`` has the run's ``parent``
    and ``forked_at``). A repeat of the same fork is not an error: it
    answers the fork."""


class BranchConflict(Conflict):
    """409 conflict: a branch's commit lost to an atom committed after its
    base, which wrote a state key the branch writes or declared it reads.
    Nothing was written and the branch is over: branch again under the same
    name (:meth:`Run.branch_step` does), and its actions certified before
    answer their results without executing.

    ``details`` has ``branch``, ``base``, ``seq`` (the atom it lost to),
    ``key`` (the state key, e.g. ``memory:total``) and ``lost`` (the base
    is older than the writes the run keeps).
    """

    @property
    def key(self) -> Optional[str]:
        k = (self.details or {}).get("key")
        return str(k) if k is not None else None

    @property
    def seq(self) -> Optional[int]:
        s = (self.details or {}).get("seq")
        return int(s) if s is not None else None


class RollbackPending(Conflict):
    """409 rollback_pending: a rollback of the run is not finished."""


class AttemptLost(APIError):
    """The attempt is gone: its lease expired, another client took the run
    over (409 lease_lost), or the server restarted (404 attempt_not_found).

    Nothing acknowledged is lost. Run the step again from its beginning:
    actions already certified answer their results without executing, and
    those whose outcome is unknown come back in doubt (:meth:`Run.step`
    does this).
    """


class TooLarge(APIError):
    """413: the body exceeds the server's limit, or a result or the frame
    exceeds the engine's."""


class Unprocessable(APIError):
    """422: the request is well formed but the engine refuses it."""


class InvalidDelta(Unprocessable):
    """422 invalid_delta: the delta does not apply to the run's frame (an
    unknown subgoal, say). The atom stays open."""


class InvalidArgs(Unprocessable):
    """422 invalid_args: the ledger refuses the action's args (duplicate
    keys, a lone surrogate) or a redact pointer."""


class ServerError(APIError):
    """5xx: the store failed (storage, corrupt) or the server has a bug."""


class ShuttingDown(ServerError):
    """503 shutting_down: the server is stopping. The client retries until
    the next one answers, within its ``retry_for``."""


class InDoubt(ContinuumError):
    """An action was dispatched before and nobody knows whether it took
    effect: a crash, or a vanished client, fell between its execution and
    its certificate, and it is not declared idempotent.

    Ask the downstream, using :attr:`key`, whether the effect happened,
    then settle it with :meth:`Atom.resolve` (it happened, with this
    result) or :meth:`Atom.resolve_failed` (it did not). Or pass a
    ``reconcile`` function to :meth:`Atom.do` and let the client do so.
    """

    def __init__(self, key: str, tool: str, call: int, fingerprint: str) -> None:
        self.key = key
        self.tool = tool
        self.call = call
        self.fingerprint = fingerprint
        super().__init__(
            f"action {tool!r} (call {call}) is in doubt: reconcile with the downstream "
            f"using idempotency key {key!r}, then resolve it"
        )


class ActionFailed(ContinuumError):
    """An action is certified as not having taken effect (its execution
    reported an error, or it was resolved as failed); a later call of it
    executes again."""

    def __init__(self, tool: str, key: str, call: int, error: str) -> None:
        self.tool = tool
        self.key = key
        self.call = call
        self.error = error
        super().__init__(f"action {tool!r} (call {call}, key {key!r}) failed: {error}")


class Unavailable(ContinuumError):
    """The server could not be reached (or kept answering shutting_down or
    pending) for the client's whole ``retry_for``."""


class RunNotEnded(Conflict):
    """409 run_not_ended: erase of a run that is still active (end it first)."""


class RunHasForks(Conflict):
    """409 run_has_forks: erase of a run with a fork that is not erased (a
    fork holds its parent's state at its fork point: erase it first)."""


class NotEncrypted(Conflict):
    """409 keyring: an erasure in a store that is not encrypted (the server
    runs without --keyring), where no key can be shredded."""


class NotErasable(Conflict):
    """409 not_erasable: the memory key's values were never sealed with
    keys of their own (the server did not list it with --erasable when they
    were written): they are erased only with the run."""


class NothingToErase(Conflict):
    """409 nothing_to_erase: every value of the memory key is erased
    already, and none was written since."""


class RunDeleted(APIError):
    """410 run_deleted: the run was deleted (or erased); its id is never
    served again."""


class EventMismatch(Conflict):
    """409 event_mismatch: the sender id has sent the run another event
    (another name or payload)."""


class WaitExists(Conflict):
    """409 wait_exists: the run waits after its last atom already, for
    another event."""


class WaitNotFound(NotFound):
    """404 wait_not_found: the run has no wait after its last atom."""


class WaitNotEnded(Conflict):
    """409 wait_not_ended: the wait the atom follows is still open
    (``details["wait"]``)."""


class SeqMismatch(Conflict):
    """409 seq_mismatch: the run's last seq is not the one the request
    names (``details["last_seq"]`` when the server gives it)."""


class NoAtom(ContinuumError, RuntimeError):
    """A durable tool was called outside an atom."""


_BY_CODE = {
    "run_not_found": RunNotFound,
    "run_held": RunHeld,
    "run_ended": RunEnded,
    "run_exists": RunExists,
    "commit_mismatch": CommitMismatch,
    "conflict": BranchConflict,
    "rollback_pending": RollbackPending,
    "forbidden": Forbidden,
    "auth_rate_limited": AuthRateLimited,
    "run_not_ended": RunNotEnded,
    "run_has_forks": RunHasForks,
    "keyring": NotEncrypted,
    "not_erasable": NotErasable,
    "nothing_to_erase": NothingToErase,
    "run_deleted": RunDeleted,
    "lease_lost": AttemptLost,
    "attempt_not_found": AttemptLost,
    "invalid_delta": InvalidDelta,
    "invalid_args": InvalidArgs,
    "shutting_down": ShuttingDown,
    "event_mismatch": EventMismatch,
    "wait_exists": WaitExists,
    "wait_not_found": WaitNotFound,
    "wait_not_ended": WaitNotEnded,
    "seq_mismatch": SeqMismatch,
}

_BY_STATUS = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: BadRequest,
    409: Conflict,
    410: RunDeleted,
    413: TooLarge,
    422: Unprocessable,
}


def error_from_answer(status: int, body: Any) -> APIError:
    """The exception for an error answer (its JSON body decoded, or None)."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return ServerError(status, "internal", f"the server answered {status} without a protocol error")
    code = str(err.get("code", ""))
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or (ServerError if status >= 500 else APIError)
    details = err.get("details")
    return cls(
        status,
        code,
        str(err.get("message", "")),
        err.get("field") or None,
        details if isinstance(details, dict) else None,
    )
