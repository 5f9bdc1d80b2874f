"""Waits, events and timers: a run waits, durably, for a named event (a
human's approval, a webhook) or for the clock, and is resumed once it
ended (the server's engine Run.Wait, Run.Sleep, DB.SendEvent, DB.Ready).

The run waits after its last atom::

    run.wait("approval", timeout=3600)            # durable when it returns
    ...                                           # the process may die here
    w = run.wait_ended()                          # or client.ready(wait=15)
    with run.atom() as atom:
        w = atom.wait_outcome()                   # the same, until this atom commits
        if w.delivered and w.event.json()["approved"]:
            ...

Anyone whose token reaches the run with the write or the event right
sends it the event, idempotently by its sender id::

    client.send_event("trip-1", "approval", sender="alice-7", payload=b'{"approved": true}')

An event is delivered to one wait, once: posted before the wait, during
it, or while no server runs. A deadline ends the wait once, as a timeout.
The outcome stays the run's until an atom commits after it: a crash or a
failed attempt before that commit finds the same outcome again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

from . import _core, _wire
from ._wire import BytesLike, seg

if TYPE_CHECKING:  # pragma: no cover
    from .client import Atom, Client, Run

__all__ = ["Wait", "Event", "SendResult"]

#: A long poll asks the server to hold a request this long at most (the
#: server takes up to its call wait, 20 s).
LONG_POLL = 15.0


@dataclass(frozen=True)
class Event:
    """An event sent to a run (engine.Event)."""

    run: str
    name: str
    sender: str
    seq: int  # the run's last seq when it was sent
    sent: datetime
    payload: bytes

    def text(self) -> str:
        return self.payload.decode("utf-8")

    def json(self) -> Any:
        return json.loads(self.payload) if self.payload else None


@dataclass(frozen=True)
class Wait:
    """A run's wait (engine.Wait), named by its run and the seq it follows.
    ``outcome`` is "open", "delivered", "timed_out" or "cancelled"."""

    run: str
    seq: int
    name: str  # "" for a sleep
    declared: datetime
    deadline: Optional[datetime]
    outcome: str
    event: Optional[Event]
    ended: Optional[datetime]

    @property
    def open(self) -> bool:
        return self.outcome == "open"

    @property
    def delivered(self) -> bool:
        return self.outcome == "delivered"

    @property
    def timed_out(self) -> bool:
        return self.outcome == "timed_out"

    @property
    def cancelled(self) -> bool:
        return self.outcome == "cancelled"


@dataclass(frozen=True)
class SendResult:
    """What send_event did: duplicate, the run had this sender's event
    already (nothing written); delivered, it ended the run's open wait of
    its name (else it is kept for the next wait of its name)."""

    duplicate: bool
    delivered: bool


TimeLike = Union[datetime, str]


def _rfc3339(t: TimeLike) -> str:
    if isinstance(t, str):
        return t
    if t.tzinfo is None:
        raise ValueError("a naive datetime: give it a timezone (datetime.now(timezone.utc))")
    return t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _time(s: Any) -> Optional[datetime]:
    if s is None:
        return None
    s = str(s)
    # Go writes up to nine digits of fraction; datetime takes six.
    if "." in s:
        head, frac = s.split(".", 1)
        digits = "".join(c for c in frac if c.isdigit())
        s = head + "." + (digits[:6].ljust(6, "0")) + frac[len(digits):]
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def event_of(o: Mapping[str, Any]) -> Event:
    return Event(run=str(o["run"]), name=str(o["name"]), sender=str(o["sender"]), seq=int(o["seq"]),
                 sent=_time(o["sent"]) or datetime.min, payload=_wire.get_bytes(o, "payload") or b"")


def wait_of(o: Mapping[str, Any]) -> Wait:
    ev = o.get("event")
    return Wait(run=str(o["run"]), seq=int(o["seq"]), name=str(o.get("name") or ""), declared=_time(o["declared"]) or datetime.min,
                deadline=_time(o.get("deadline")), outcome=str(o["outcome"]), event=None if ev is None else event_of(ev),
                ended=_time(o.get("ended")))


def wait_request(run_path: str, name: str, timeout: Optional[float], deadline: Optional[TimeLike], after: Optional[int]) -> _core.Request:
    if not name:
        raise ValueError("a wait needs the name of the event it waits for (sleep waits for the clock)")
    if timeout is not None and deadline is not None:
        raise ValueError("give timeout or deadline, not both")
    body: Dict[str, Any] = {"name": name}
    if timeout is not None:
        body["timeout_ms"] = max(0, int(timeout * 1000))
    if deadline is not None:
        body["deadline"] = _rfc3339(deadline)
    if after is not None:
        body["seq"] = int(after)
    return _core.Request("POST", f"{run_path}/wait", body)


def sleep_request(run_path: str, until: Optional[TimeLike], duration: Optional[float], after: Optional[int]) -> _core.Request:
    if (until is None) == (duration is None):
        raise ValueError("give until or duration (one of them)")
    body: Dict[str, Any] = {}
    if until is not None:
        body["until"] = _rfc3339(until)
    else:
        body["duration_ms"] = max(0, int(float(duration or 0) * 1000))
    if after is not None:
        body["seq"] = int(after)
    return _core.Request("POST", f"{run_path}/sleep", body)


def event_request(run: str, name: str, sender: str, payload: BytesLike) -> _core.Request:
    if not name or not sender:
        raise ValueError("an event needs its name and its sender's id")
    body: Dict[str, Any] = {"name": name, "sender": sender}
    _wire.put_bytes(body, "payload", payload)
    return _core.Request("POST", f"/v1/runs/{seg(run)}/events", body)


def poll_ms(wait: float) -> int:
    return max(0, int(min(wait, LONG_POLL) * 1000))


def ready_request(wait: float, limit: Optional[int]) -> _core.Request:
    q = f"?wait_ms={poll_ms(wait)}"
    if limit is not None:
        q += f"&max={int(limit)}"
    return _core.Request("GET", f"/v1/ready{q}")


def send_result(o: Mapping[str, Any]) -> SendResult:
    return SendResult(duplicate=bool(o.get("duplicate")), delivered=bool(o.get("delivered")))


# The synchronous client's methods (client.py's Client, Run and Atom call
# these).


def send_event(client: "Client", run: str, name: str, sender: str, payload: BytesLike = b"") -> SendResult:
    return send_result(client._send(event_request(run, name, sender, payload)))


def ready(client: "Client", wait: float = 0.0, limit: Optional[int] = None) -> List[Wait]:
    deadline = time.monotonic() + wait
    while True:
        left = _nonneg(deadline - time.monotonic())
        out = [wait_of(w) for w in client._send(ready_request(left, limit))["ready"]]
        if out or left <= LONG_POLL:
            return out


def _nonneg(x: float) -> float:
    return x if x > 0 else 0.0


def current_wait(run: "Run", wait: float = 0.0) -> Optional[Wait]:
    w = run.client._get(f"{run._path}/wait?wait_ms={poll_ms(wait)}").get("wait")
    return None if w is None else wait_of(w)


def wait_ended(run: "Run", timeout: Optional[float] = None) -> Optional[Wait]:
    """Blocks until the run's wait ended (or timeout seconds pass: then the
    open wait); None when the run has no wait after its last atom."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = LONG_POLL if deadline is None else deadline - time.monotonic()
        w = current_wait(run, _nonneg(left))
        if w is None or not w.open or (deadline is not None and time.monotonic() >= deadline):
            return w
