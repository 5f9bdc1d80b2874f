"""An LLM tool-calling agent, durable with CONTINUUM.

Each turn of the loop is one atom: the model call and the tool calls it
asks for, then the messages appended to the run's frame. Kill it at any
point and start it again: it resumes at the turn it was in. The model's
answer of that turn is replayed from the ledger (never sampled again, so
the agent does not diverge), a tool call that completed is not made again,
and a booking whose outcome the crash hid is looked up with its
idempotency key instead of being made twice.

    continuumd --store ./agent-store &
    python3 stub_llm.py &                      # or any OpenAI-style endpoint
    CONTINUUMD_SOCKET=./agent-store.sock LLM_URL=http://127.0.0.1:8089 \\
        WORLD_URL=http://127.0.0.1:8089 python3 llm_agent.py trip-1

Booking charges a card and cannot be undone, so the agent asks a human
first: the turn whose model answer calls book_flight records the call and
commits, then the run waits, durably, for the event
"approval:<call id>" (APPROVAL_TIMEOUT seconds, default 3600). The agent
prints "WAITING <run> <flight>" and may be killed: started again, it
waits on. Anyone holding a token of the run with the event right approves
or denies:

    curl --unix-socket ./agent-store.sock -X POST \\
        http://continuumd/v1/runs/trip-1/events \\
        -d '{"name": "approval:call_2", "sender": "alice", "payload": "{\\"approved\\": true}"}'

An approval books once (the booking is a durable tool call); a denial or
a timeout ends the run without booking.

It prints "ANSWER <text>" at the end.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
from typing import Any, Dict, List
from urllib.parse import quote, urlsplit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import continuum  # noqa: E402
from continuum import DidNotHappen, Happened  # noqa: E402

LLM_URL = os.environ.get("LLM_URL", "http://127.0.0.1:8089")
WORLD_URL = os.environ.get("WORLD_URL", LLM_URL)
MODEL = os.environ.get("LLM_MODEL", "stub")
APPROVAL_TIMEOUT = float(os.environ.get("APPROVAL_TIMEOUT", "3600"))
# Tools whose effect cannot be undone: a human approves each call first.
NEEDS_APPROVAL = {"book_flight"}

TOOLS = [
    {"type": "function", "function": {"name": "search_flights", "description": "Find flights between two airports.",
                                      "parameters": {"type": "object", "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
                                                     "required": ["from", "to"]}}},
    {"type": "function", "function": {"name": "book_flight", "description": "Book a flight (charges the card).",
                                      "parameters": {"type": "object", "properties": {"flight": {"type": "string"}}, "required": ["flight"]}}},
    {"type": "function", "function": {"name": "send_email", "description": "Send an email.",
                                      "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                                                     "required": ["to", "body"]}}},
]


def http_json(base: str, method: str, path: str, body: Any = None, headers: Dict[str, str] | None = None) -> Any:
    """One request; None for a 404, an exception for any other failure."""
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=60)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        out = resp.read()
        if resp.status == 404:
            return None
        if resp.status != 200:
            raise RuntimeError(f"{method} {path}: HTTP {resp.status}")
        return json.loads(out)
    finally:
        conn.close()


def lookup(path: str) -> Any:
    """A reconcile function: does the world hold an effect under the key?"""
    def reconcile(key: str) -> "Happened | DidNotHappen":
        found = http_json(WORLD_URL, "GET", f"{path}?key={quote(key, safe='')}")
        return DidNotHappen() if found is None else Happened(found)
    return reconcile


@continuum.tool("search_flights", idempotent=True)
def search_flights(origin: str, dest: str) -> Any:
    return http_json(WORLD_URL, "POST", "/flights/search", {"from": origin, "to": dest})


@continuum.tool("book_flight", reconcile=lookup("/flights/bookings"))
def book_flight(flight: str) -> Any:
    return http_json(WORLD_URL, "POST", "/flights/book", {"flight": flight}, {"Idempotency-Key": continuum.idempotency_key()})


@continuum.tool("send_email", reconcile=lookup("/mail/sent"))
def send_email(to: str, body: str) -> Any:
    return http_json(WORLD_URL, "POST", "/mail/send", {"to": to, "body": body}, {"Idempotency-Key": continuum.idempotency_key()})


def call_tool(name: str, args: Dict[str, Any]) -> Any:
    if name == "search_flights":
        return search_flights(args["from"], args["to"])
    if name == "book_flight":
        return book_flight(args["flight"])
    if name == "send_email":
        return send_email(args["to"], args["body"])
    return {"error": f"no tool {name}"}


def openai_messages(state: continuum.State) -> List[Dict[str, Any]]:
    """The conversation of the frame, as the chat API takes it: the frame's
    messages have its shape (tool calls, tool results)."""
    out: List[Dict[str, Any]] = []
    for m in state.messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.call_id, "content": m.content})
        elif m.tool_calls:
            calls = [{"id": c["id"], "type": "function",
                      "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}} for c in m.tool_calls]
            out.append({"role": "assistant", "content": m.content or None, "tool_calls": calls})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def approval_event(call_id: str) -> str:
    """The event's name that approves or denies the tool call call_id."""
    return f"approval:{call_id}"


def resume_after_approval(atom: continuum.Atom, pending: Dict[str, Any]) -> None:
    """The turn after the wait: book if a human approved, else end without
    booking. The wait's outcome is the run's until this atom commits, so
    a crash here finds the same answer again (and the booking, a durable
    call, is made once)."""
    w = atom.wait_outcome()
    atom.delta.delete("awaiting_approval")
    ev = w.event.json() if w.delivered and w.event is not None else None
    if isinstance(ev, dict) and ev.get("approved") is True:
        atom.delta.set("approval", "approved")
        result = call_tool(pending["tool"], pending["arguments"])
        atom.delta.append_message("tool", json.dumps(result), tool=pending["tool"], call_id=pending["call_id"])
        return
    reason = f"denied by {w.event.sender}" if w.delivered and w.event is not None else w.outcome.replace("_", " ")
    atom.delta.set("approval", "denied" if w.delivered else w.outcome)
    atom.delta.append_message("tool", json.dumps({"error": f"not approved: {reason}"}), tool=pending["tool"], call_id=pending["call_id"])
    atom.delta.set("answer", f"Not booked: the booking of {pending['arguments'].get('flight')} was not approved ({reason}).")


def turn(run: continuum.Run, atom: continuum.Atom) -> None:
    """One turn: the model's answer, then every tool call it asks for."""
    state = run.state()
    pending = state.json("awaiting_approval")
    if pending:
        resume_after_approval(atom, pending)
        return
    if atom.seq == 1:
        atom.delta.set_objective("book a flight from Paris to Tokyo and mail the confirmation")
        atom.delta.append_message("system", "You are a travel agent. Use the tools.")
        atom.delta.append_message("user", "Book me the cheapest flight CDG to NRT and mail me the confirmation.")
        atom.delta.set("turns", "0")
        return
    messages = openai_messages(state)
    resp = atom.do_json("llm.chat", lambda key: http_json(LLM_URL, "POST", "/v1/chat/completions",
                                                          {"model": MODEL, "messages": messages, "tools": TOOLS}),
                        args={"model": MODEL, "turn": atom.seq}, idempotent=True)
    msg = resp["choices"][0]["message"]
    calls = msg.get("tool_calls") or []
    if not calls:
        atom.delta.append_message("assistant", msg.get("content") or "")
        atom.delta.set("answer", msg.get("content") or "")
        return
    atom.delta.append_message("assistant", msg.get("content") or "", tool_calls=[
        {"id": tc["id"], "name": tc["function"]["name"], "arguments": json.loads(tc["function"]["arguments"] or "{}")} for tc in calls])
    for tc in calls:
        fn = tc["function"]
        args = json.loads(fn["arguments"] or "{}")
        if fn["name"] in NEEDS_APPROVAL:
            # Not now: this atom commits the call, and the run waits for a
            # human's answer (main); the model's later calls wait with it.
            atom.delta.set_json("awaiting_approval", {"call_id": tc["id"], "tool": fn["name"], "arguments": args})
            return
        result = call_tool(fn["name"], args)
        atom.delta.append_message("tool", json.dumps(result), tool=fn["name"], call_id=tc["id"])


def main() -> int:
    run_id = sys.argv[1] if len(sys.argv) > 1 else "trip-1"
    client = continuum.Client.from_env()
    run = client.run(run_id)
    while (answer := (state := run.state()).text("answer")) is None:
        pending = state.json("awaiting_approval")
        if pending:
            # The run waits durably after the atom that asked. After a
            # restart the wait is there already (ended, maybe, and the
            # turn after it interrupted: step takes it over).
            w = run.current_wait() or run.wait(approval_event(pending["call_id"]), timeout=APPROVAL_TIMEOUT)
            if w.open:
                print(f"WAITING {run_id} {pending['arguments'].get('flight')} {approval_event(pending['call_id'])}", flush=True)
                while (w := run.wait_ended()) is not None and w.open:
                    pass
            print(f"APPROVAL {w.outcome if w else 'none'}", flush=True)
        # takeover: this process is the run's only worker; after a crash
        # it takes the run back at once instead of waiting for the lease.
        run.step(lambda atom: turn(run, atom), takeover=True)
        print(f"TURN {run.info().last_seq}", flush=True)
    if state.text("approval") not in (None, "approved"):
        # Not approved: the run ends here, without the booking.
        try:
            run.end("cancelled", answer)
        except continuum.RunEnded:
            pass  # ended before a crash
    print(f"ANSWER {answer}", flush=True)
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
