"""The values the server describes: runs, frames, interrupted attempts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Optional, Tuple

__all__ = [
    "Lease",
    "RunInfo",
    "Erasure",
    "DeletedRun",
    "ErasedKey",
    "ActionState",
    "Interrupted",
    "Subgoal",
    "Message",
    "Pending",
    "State",
    "Committed",
    "AtomRecord",
    "Happened",
    "DidNotHappen",
]


@dataclass(frozen=True)
class Lease:
    """The open attempt holding a run: the seq it works on, and until when."""

    seq: int
    expires: datetime


@dataclass(frozen=True)
class RunInfo:
    """A run as the server describes it. ``status`` is ``active``,
    ``completed``, ``failed`` or ``cancelled``; ``ended`` and ``result`` say
    when and with what it ended (None while active). ``parent`` and
    ``forked_at`` name the run it was forked from ("" and 0: not a fork)."""

    id: str
    created: datetime
    last_seq: int
    head: str
    snapshot_seq: int
    checkpoint_seq: int
    running: int
    interrupted: int
    lease: Optional[Lease]
    status: str = "active"
    ended: Optional[datetime] = None
    result: Optional[bytes] = None
    parent: str = ""
    forked_at: int = 0


@dataclass(frozen=True)
class Erasure:
    """The erasure of a deleted run: its link (``seq``, ``head``), when,
    and why."""

    seq: int
    head: str
    at: datetime
    reason: str


@dataclass(frozen=True)
class DeletedRun:
    """A deleted run, as its delete or erase record says: the deletion's
    link (``seq`` is the end's seq + 1, ``head``), the run's head at its
    end (``final``), when and why, and its ``erasure`` (None if it was only
    deleted; the same seq when one record deleted and erased it)."""

    id: str
    seq: int
    final: str
    head: str
    at: datetime
    reason: str
    erasure: Optional[Erasure]


@dataclass(frozen=True)
class ErasedKey:
    """The erasure of one memory key of a run: the run's last seq when it
    was erased, the erasure's link (``head``), the data keys it destroyed
    (``key_nos``), when and why."""

    run: str
    key: str
    seq: int
    head: str
    key_nos: Tuple[int, ...]
    at: datetime
    reason: str


@dataclass(frozen=True)
class ActionState:
    """One action of an interrupted attempt, with its state in the ledger:
    ``in_doubt``, ``done``, ``failed`` or ``resolved``."""

    index: int
    fingerprint: str
    status: str
    tool: str
    key: str
    idempotent: bool
    call: Optional[int] = None


@dataclass(frozen=True)
class Interrupted:
    """The earlier attempt of an atom's seq that ended without its client
    committing or failing it. ``reason`` is ``restart`` (the server stopped
    while it ran), ``lease_expired`` or ``takeover``."""

    seq: int
    reason: str
    actions: Tuple[ActionState, ...]


@dataclass(frozen=True)
class Subgoal:
    id: str
    text: str
    status: str


@dataclass(frozen=True)
class Message:
    """One message of the frame's conversation (frame.Message): tool_calls
    (an assistant's, ``{"id", "name", "arguments"}``), parts (content
    blocks) and is_error as the server gives them."""

    role: str
    content: str
    tool: Optional[str] = None
    call_id: Optional[str] = None
    tool_calls: Tuple[Dict[str, Any], ...] = ()
    parts: Tuple[Dict[str, Any], ...] = ()
    is_error: bool = False


@dataclass(frozen=True)
class Pending:
    call_id: str
    tool: str
    args: Any
    key: Optional[str]


@dataclass(frozen=True)
class State:
    """A run's semantic frame at a seq."""

    run: str
    seq: int
    objective: str
    subgoals: Tuple[Subgoal, ...]
    memory: Dict[str, bytes]
    scratchpad: bytes
    messages: Tuple[Message, ...]
    pending: Tuple[Pending, ...]

    def text(self, key: str, default: Optional[str] = None) -> Optional[str]:
        """The memory value under key as text."""
        v = self.memory.get(key)
        return default if v is None else v.decode("utf-8")

    def json(self, key: str, default: Any = None) -> Any:
        """The memory value under key decoded as JSON (see Delta.set_json)."""
        v = self.memory.get(key)
        return default if v is None else json.loads(v)


@dataclass(frozen=True)
class Committed:
    """A committed atom: its seq and chain head."""

    run: str
    seq: int
    head: str


@dataclass(frozen=True)
class AtomRecord:
    """A committed atom as the log holds it: its delta's ops (the form a
    commit sends) and its actions with their certificates."""

    run: str
    seq: int
    head: str
    delta: List[Dict[str, Any]] = field(default_factory=list)
    actions: List[Dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Happened:
    """What a reconcile function answers when the downstream shows that the
    effect took place, with its result."""

    result: Any


@dataclass(frozen=True)
class DidNotHappen:
    """What a reconcile function answers when the downstream has no trace
    of the key: the action is then executed again, under the same key."""

    reason: str = "the downstream has no trace of the idempotency key"


@dataclass(frozen=True)
class RunMessage:
    """A message between runs: sent by run ``sender`` in its atom ``seq``
    (the ``index``-th of that atom's messages), for run ``to``."""

    sender: str
    seq: int
    index: int
    to: str
    payload: bytes
