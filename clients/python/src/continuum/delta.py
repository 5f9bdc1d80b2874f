"""Delta: the change an atom makes to its run's frame."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from ._wire import BytesLike, put_bytes

__all__ = ["Delta"]

_STATUSES = ("open", "active", "done", "failed", "abandoned")
_ROLES = ("system", "user", "assistant", "tool")


class Delta:
    """An ordered list of ops, built by chaining::

        d = Delta().set_objective("deploy").add_subgoal("s1", "back up the db")

    The ops are those of the engine's frame.Delta, in the JSON form of the
    protocol (:attr:`ops`). Whether they apply to the frame (a status for a
    subgoal that exists, say) is checked at commit.
    """

    def __init__(self) -> None:
        self._ops: List[Dict[str, Any]] = []

    @property
    def ops(self) -> List[Dict[str, Any]]:
        """The ops, as the commit sends them (a copy)."""
        return [dict(op) for op in self._ops]

    def __len__(self) -> int:
        return len(self._ops)

    def __repr__(self) -> str:
        return f"Delta({self._ops!r})"

    def _add(self, op: Dict[str, Any]) -> "Delta":
        self._ops.append(op)
        return self

    def set_objective(self, text: str) -> "Delta":
        return self._add({"op": "set_objective", "text": text})

    def add_subgoal(self, id: str, text: str) -> "Delta":
        if not id:
            raise ValueError("a subgoal id must not be empty")
        return self._add({"op": "add_subgoal", "id": id, "text": text})

    def set_subgoal_status(self, id: str, status: str) -> "Delta":
        if status not in _STATUSES:
            raise ValueError(f"subgoal status {status!r}: one of {', '.join(_STATUSES)}")
        return self._add({"op": "set_subgoal_status", "id": id, "status": status})

    def set(self, key: str, value: BytesLike) -> "Delta":
        """Working memory: store value (bytes, or text stored as UTF-8)."""
        op: Dict[str, Any] = {"op": "set", "key": key}
        put_bytes(op, "value", value)
        return self._add(op)

    def set_json(self, key: str, value: Any) -> "Delta":
        """Working memory: store value as JSON (read it with State.json)."""
        return self.set(key, json.dumps(value, separators=(",", ":"), ensure_ascii=False))

    def delete(self, key: str) -> "Delta":
        return self._add({"op": "delete", "key": key})

    def append_scratch(self, data: BytesLike) -> "Delta":
        op: Dict[str, Any] = {"op": "append_scratch"}
        put_bytes(op, "value", data)
        return self._add(op)

    def clear_scratch(self) -> "Delta":
        return self._add({"op": "clear_scratch"})

    def append_message(
        self,
        role: str,
        content: str = "",
        tool: Optional[str] = None,
        call_id: Optional[str] = None,
        *,
        tool_calls: Optional[List[Dict[str, Any]]] = None,
        parts: Optional[List[Dict[str, Any]]] = None,
        is_error: bool = False,
    ) -> "Delta":
        """A message of the conversation. An assistant's tool_calls are
        ``{"id", "name", "arguments"}`` (OpenAI's tool_calls); parts are
        content blocks ``{"kind": "text" | "tool_call" | "tool_result" |
        "json", ...}`` (Anthropic's), instead of content; is_error marks a
        tool message reporting a failure. frame.Message has the rules."""
        if role not in _ROLES:
            raise ValueError(f"role {role!r}: one of {', '.join(_ROLES)}")
        op: Dict[str, Any] = {"op": "append_message", "role": role, "content": content}
        if tool:
            op["tool"] = tool
        if call_id:
            op["call_id"] = call_id
        if tool_calls:
            op["tool_calls"] = [dict(c) for c in tool_calls]
        if parts:
            op["parts"] = [dict(p) for p in parts]
        if is_error:
            op["is_error"] = True
        return self._add(op)

    def add_pending(self, call_id: str, tool: str, args: Any = None, key: Optional[str] = None) -> "Delta":
        if not call_id:
            raise ValueError("a pending call id must not be empty")
        op: Dict[str, Any] = {"op": "add_pending", "call_id": call_id, "tool": tool}
        if args is not None:
            op["args"] = args
        if key:
            op["key"] = key
        return self._add(op)

    def tool_output(self, call_id: str, tool: str, output: str) -> "Delta":
        """A tool message with the output, removing the pending call."""
        return self._add({"op": "tool_output", "call_id": call_id, "tool": tool, "content": output})

    def remove_pending(self, call_id: str) -> "Delta":
        return self._add({"op": "remove_pending", "call_id": call_id})

    def drop_messages(self, n: int) -> "Delta":
        """Drop the n oldest messages (context compaction)."""
        if n < 0:
            raise ValueError("drop_messages takes a count >= 0")
        return self._add({"op": "drop_messages", "count": n})
