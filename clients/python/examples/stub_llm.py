"""A local stand-in for an OpenAI-style chat completions endpoint, and for
the world the example agent's tools act on (a flight API, a mail service).

The model is a fixed policy over the conversation: search flights, book
the cheapest, mail the confirmation, then answer. The world counts its
effects per idempotency key, so a test can check that a booking made
before a crash was not made again after it.

    python3 stub_llm.py --port 8089      # serve until Ctrl-C

    POST /v1/chat/completions   {"model", "messages", "tools"} -> chat.completion
    POST /flights/search        {"from", "to"}            (no effect)
    POST /flights/book          {"flight"}  Idempotency-Key: K
    GET  /flights/bookings?key=K   -> the booking, or 404
    POST /mail/send             {"to", "body"}  Idempotency-Key: K
    GET  /mail/sent?key=K          -> the mail, or 404
"""

from __future__ import annotations

import argparse
import json
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional
from urllib.parse import parse_qs, urlsplit

class Stub:
    """The model and the world. hooks["book"] and hooks["mail"], when set,
    are called after the effect and before the reply (a test kills the
    agent there)."""

    def __init__(self, port: int = 0) -> None:
        self.lock = threading.Lock()
        self.completions = 0
        self.bookings: Dict[str, Dict[str, Any]] = {}
        self.booking_effects: Dict[str, int] = {}
        self.mails: Dict[str, Dict[str, Any]] = {}
        self.mail_effects: Dict[str, int] = {}
        self.hooks: Dict[str, Optional[Callable[[], None]]] = {"book": None, "mail": None}
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def reply(self, status: int, v: Any) -> None:
                b = json.dumps(v).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(b)))
                self.end_headers()
                try:
                    self.wfile.write(b)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                key = self.headers.get("Idempotency-Key", "")
                path = urlsplit(self.path).path
                if path == "/v1/chat/completions":
                    self.reply(200, stub.complete(body))
                elif path == "/flights/search":
                    self.reply(200, {"flights": [{"flight": "JL046", "price": 912}, {"flight": "AF276", "price": 1040}]})
                elif path == "/flights/book":
                    self.reply(200, stub.effect("book", key, {"flight": body["flight"], "pnr": "PNR%04d" % (zlib.crc32(key.encode()) % 10000)}))
                elif path == "/mail/send":
                    self.reply(200, stub.effect("mail", key, {"to": body["to"], "id": "m-" + key[-6:]}))
                else:
                    self.reply(404, {"error": "no such endpoint"})

            def do_GET(self) -> None:
                u = urlsplit(self.path)
                key = parse_qs(u.query).get("key", [""])[0]
                table = {"/flights/bookings": stub.bookings, "/mail/sent": stub.mails}.get(u.path)
                with stub.lock:
                    found = None if table is None else table.get(key)
                if found is None:
                    self.reply(404, {"error": "not found"})
                else:
                    self.reply(200, found)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> "Stub":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def effect(self, kind: str, key: str, result: Dict[str, Any]) -> Dict[str, Any]:
        table, counts = (self.bookings, self.booking_effects) if kind == "book" else (self.mails, self.mail_effects)
        with self.lock:
            counts[key] = counts.get(key, 0) + 1  # not idempotent: every call takes effect
            table.setdefault(key, result)
            out = table[key] if counts[key] == 1 else dict(result, duplicate=counts[key])
        hook = self.hooks.get(kind)
        if hook:
            self.hooks[kind] = None
            hook()
        return out

    def complete(self, req: Dict[str, Any]) -> Dict[str, Any]:
        with self.lock:
            self.completions += 1
            n = self.completions
        msgs: List[Dict[str, Any]] = req.get("messages", [])
        results = {m.get("tool_call_id"): json.loads(m["content"]) for m in msgs if m.get("role") == "tool"}
        called = [tc["function"]["name"] for m in msgs if m.get("role") == "assistant" for tc in m.get("tool_calls") or []]

        def call(name: str, args: Dict[str, Any]) -> Dict[str, Any]:
            tc = {"id": f"call_{len(called) + 1}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            return {"role": "assistant", "content": None, "tool_calls": [tc]}

        if "search_flights" not in called:
            msg = call("search_flights", {"from": "CDG", "to": "NRT"})
        elif "book_flight" not in called:
            flights = next(r for r in results.values() if "flights" in r)["flights"]
            msg = call("book_flight", {"flight": min(flights, key=lambda f: f["price"])["flight"]})
        elif "send_email" not in called:
            booking = next(r for r in results.values() if "pnr" in r)
            msg = call("send_email", {"to": "traveller@example.com", "body": f"Booked {booking['flight']}, PNR {booking['pnr']}"})
        else:
            booking = next(r for r in results.values() if "pnr" in r)
            msg = {"role": "assistant", "content": f"Booked {booking['flight']} (PNR {booking['pnr']}); the confirmation is mailed."}
        finish = "tool_calls" if msg.get("tool_calls") else "stop"
        return {"id": f"chatcmpl-{n}", "object": "chat.completion", "model": req.get("model", "stub"),
                "choices": [{"index": 0, "message": msg, "finish_reason": finish}]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8089)
    port = ap.parse_args().port
    stub = Stub(port)
    print(f"stub model and world on {stub.url}", flush=True)
    try:
        stub.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
