"""The protocol's JSON: bytes as text or NAME_base64, and the decoding of
the server's answers into this package's types."""

from __future__ import annotations

import base64
import json
import os
import random
from datetime import datetime
from typing import Any, Dict, Mapping, MutableMapping, Optional, Union
from urllib.parse import quote

from .types import (
    ActionState,
    AtomRecord,
    Committed,
    DeletedRun,
    ErasedKey,
    Erasure,
    Interrupted,
    Lease,
    Message,
    Pending,
    RunInfo,
    State,
    Subgoal,
)

BytesLike = Union[bytes, bytearray, memoryview, str]


def to_bytes(v: BytesLike) -> bytes:
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


def put_bytes(obj: MutableMapping[str, Any], name: str, value: BytesLike) -> None:
    """Set NAME (UTF-8 text) or NAME_base64, whichever carries value."""
    if isinstance(value, str):
        obj[name] = value
        return
    b = bytes(value)
    try:
        obj[name] = b.decode("utf-8")
    except UnicodeDecodeError:
        obj[name + "_base64"] = base64.b64encode(b).decode("ascii")


def get_bytes(obj: Mapping[str, Any], name: str) -> Optional[bytes]:
    """NAME or NAME_base64 of obj as bytes; None if neither is there."""
    if name in obj and obj[name] is not None:
        return str(obj[name]).encode("utf-8")
    if name + "_base64" in obj:
        return base64.b64decode(obj[name + "_base64"])
    return None


def get_text(obj: Mapping[str, Any], name: str) -> str:
    b = get_bytes(obj, name)
    return "" if b is None else b.decode("utf-8", errors="replace")


#: One encoder for every request (json.dumps with arguments builds one per
#: call).
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def dumps(v: Any) -> bytes:
    return _encode(v).encode("utf-8")


#: The generator of request ids: private (an agent's random.seed(42) must
#: not make two processes' ids alike), seeded from os.urandom now and again
#: in a forked child.
_ids = random.Random()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ids.seed)


def request_id() -> str:
    """A request's id: 128 random bits, hex (a uuid4 costs a system call
    per atom)."""
    return "%032x" % _ids.getrandbits(128)


def seg(s: str) -> str:
    """A path segment: s percent-encoded, slashes included."""
    return quote(s, safe="")


def _time(s: Any) -> datetime:
    # Python 3.11's fromisoformat reads RFC 3339 as Go writes it (Z, and
    # nanoseconds, cut to microseconds).
    return datetime.fromisoformat(str(s))


def run_info(o: Mapping[str, Any]) -> RunInfo:
    lease = o.get("lease")
    return RunInfo(
        id=o["id"],
        created=_time(o["created"]),
        last_seq=int(o["last_seq"]),
        head=o["head"],
        snapshot_seq=int(o["snapshot_seq"]),
        checkpoint_seq=int(o["checkpoint_seq"]),
        running=int(o["running"]),
        interrupted=int(o["interrupted"]),
        lease=Lease(seq=int(lease["seq"]), expires=_time(lease["expires"])) if lease else None,
        status=str(o.get("status", "active")),
        ended=_time(o["ended"]) if o.get("ended") else None,
        result=get_bytes(o, "result"),
        parent=str(o.get("parent", "")),
        forked_at=int(o.get("forked_at", 0)),
    )


def deleted_run(o: Mapping[str, Any]) -> DeletedRun:
    e = o.get("erasure")
    return DeletedRun(
        id=o["id"],
        seq=int(o["seq"]),
        final=o["final"],
        head=o["head"],
        at=_time(o["at"]),
        reason=str(o["reason"]),
        erasure=Erasure(seq=int(e["seq"]), head=e["head"], at=_time(e["at"]), reason=str(e["reason"])) if e else None,
    )


def erased_key(o: Mapping[str, Any]) -> ErasedKey:
    return ErasedKey(
        run=o["run"],
        key=o["key"],
        seq=int(o["seq"]),
        head=o["head"],
        key_nos=tuple(int(n) for n in o["key_nos"]),
        at=_time(o["at"]),
        reason=str(o["reason"]),
    )


def interrupted(o: Optional[Mapping[str, Any]]) -> Optional[Interrupted]:
    if not o:
        return None
    return Interrupted(
        seq=int(o["seq"]),
        reason=o["reason"],
        actions=tuple(
            ActionState(
                index=int(a["index"]),
                fingerprint=a["fingerprint"],
                status=a["status"],
                tool=a["tool"],
                key=a["key"],
                idempotent=bool(a["idempotent"]),
                call=a.get("call"),
            )
            for a in o.get("actions") or ()
        ),
    )


def state(o: Mapping[str, Any]) -> State:
    memory: Dict[str, bytes] = {k: str(v).encode("utf-8") for k, v in (o.get("memory") or {}).items()}
    for k, v in (o.get("memory_base64") or {}).items():
        memory[k] = base64.b64decode(v)
    return State(
        run=o["run"],
        seq=int(o["seq"]),
        objective=get_text(o, "objective"),
        subgoals=tuple(Subgoal(get_text(s, "id"), get_text(s, "text"), s["status"]) for s in o.get("subgoals") or ()),
        memory=memory,
        scratchpad=get_bytes(o, "scratchpad") or b"",
        messages=tuple(
            Message(m["role"], get_text(m, "content"), get_text(m, "tool") or None, get_text(m, "call_id") or None,
                    tuple(m.get("tool_calls") or ()), tuple(m.get("parts") or ()), bool(m.get("is_error", False)))
            for m in o.get("messages") or ()
        ),
        pending=tuple(
            Pending(get_text(p, "call_id"), get_text(p, "tool"), p.get("args"), get_text(p, "key") or None)
            for p in o.get("pending") or ()
        ),
    )


def committed(o: Mapping[str, Any]) -> Committed:
    return Committed(run=o["run"], seq=int(o["seq"]), head=o["head"])


def atom_record(o: Mapping[str, Any]) -> AtomRecord:
    return AtomRecord(run=o["run"], seq=int(o["seq"]), head=o["head"], delta=list(o["delta"]), actions=list(o["actions"]))


def same_delta(sent: Any, stored: Any) -> bool:
    """Whether the ops a commit sent are those the store holds (compared as
    JSON values: the server writes them in its own order of fields, bytes
    as text or base64, and leaves out what is empty)."""
    def norm(ops: Any) -> Any:
        out = []
        for op in ops:
            op = dict(op)
            for name in ("value", "content"):
                b = get_bytes(op, name)
                op.pop(name + "_base64", None)
                if b is not None:
                    op[name] = base64.b64encode(b).decode("ascii")
            out.append(prune(op))
        return out

    def prune(v: Any) -> Any:
        # The server leaves out what is empty: "", false, [] (an empty key
        # or subgoal text, is_error false, no tool calls), in parts too.
        if isinstance(v, dict):
            return {k: prune(x) for k, x in v.items() if x not in ("", False, None, [])}
        if isinstance(v, list):
            return [prune(x) for x in v]
        return v

    return json.dumps(norm(sent), sort_keys=True) == json.dumps(norm(stored), sort_keys=True)
