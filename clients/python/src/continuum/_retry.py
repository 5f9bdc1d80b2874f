"""Durable retries of an action: the policy a call carries, and the error
of an action its policy gave up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Union

from .errors import ActionFailed


@dataclass(frozen=True)
class RetryPolicy:
    """How the server retries an action whose execution fails (the
    engine's ledger.RetryPolicy): after a failed execution it waits the
    backoff and has ``execute`` run again, under the same idempotency key,
    until it succeeds or the policy gives the action up
    (:class:`GaveUp`). The attempts and the schedule are durable: a
    restart of the server or of the client goes on with them.

    Times are in seconds. ``max_attempts`` counts the first attempt (0: no
    bound, then ``deadline`` is required); the wait after attempt n fails
    is ``initial * multiplier ** (n - 1)``, capped by ``max`` (0: no cap);
    no attempt starts ``deadline`` or more after the first began (0: no
    deadline); ``multiplier`` 0 means 2. Every field is part of the
    action's identity: compute them the same way in every process."""

    max_attempts: int = 0
    initial: float = 0.0
    multiplier: float = 0.0
    max: float = 0.0
    deadline: float = 0.0

    def to_wire(self) -> Dict[str, Any]:
        return {
            "max_attempts": self.max_attempts,
            "initial_ms": _ms(self.initial),
            "multiplier": self.multiplier,
            "max_ms": _ms(self.max),
            "deadline_ms": _ms(self.deadline),
        }


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def retry_body(retry: Union[RetryPolicy, Mapping[str, Any], None]) -> Optional[Dict[str, Any]]:
    """The wire form of a call's retry policy (a RetryPolicy, or the wire
    mapping itself), None without one."""
    if retry is None:
        return None
    if isinstance(retry, RetryPolicy):
        return retry.to_wire()
    return dict(retry)


class GaveUp(ActionFailed):
    """The action's retry policy gave it up, durably: its attempts were
    exhausted, its deadline passed, or an execution failed permanently.
    A later call of the action raises it again without executing."""

    def __init__(self, tool: str, key: str, call: int, error: str, reason: str, attempts: int) -> None:
        super().__init__(tool, key, call, error)
        self.reason = reason
        self.attempts = attempts
