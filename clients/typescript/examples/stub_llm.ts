/**
 * A local stand-in for an OpenAI-style chat completions endpoint, and for
 * the world the example agent's tools act on (a flight API, a mail
 * service): the model is a fixed policy over the conversation (search,
 * book the cheapest, mail the confirmation, answer); the world counts its
 * effects per idempotency key.
 *
 *     node dist/examples/stub_llm.js 8089      # serve until Ctrl-C
 *
 *   POST /v1/chat/completions  {model, messages, tools} -> chat.completion
 *   POST /flights/search {from, to};  POST /flights/book {flight}, Idempotency-Key: K
 *   GET  /flights/bookings?key=K;     POST /mail/send {to, body}, Idempotency-Key: K;  GET /mail/sent?key=K
 */

import * as http from "node:http";
import { type AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";

type Obj = Record<string, any>;

export class Stub {
  completions = 0;
  readonly bookings = new Map<string, Obj>();
  readonly bookingEffects = new Map<string, number>();
  readonly mails = new Map<string, Obj>();
  readonly mailEffects = new Map<string, number>();
  /** Called after an effect and before its reply (a test kills the agent there). */
  readonly hooks: { book?: () => void; mail?: () => void } = {};
  readonly server: http.Server;
  url = "";

  constructor() {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const reply = (status: number, v: unknown) => {
          const b = JSON.stringify(v);
          res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(b) });
          res.end(b);
        };
        const u = new URL(req.url ?? "/", "http://x");
        const key = String(req.headers["idempotency-key"] ?? "");
        if (req.method === "GET") {
          const table = u.pathname === "/flights/bookings" ? this.bookings : u.pathname === "/mail/sent" ? this.mails : undefined;
          const found = table?.get(u.searchParams.get("key") ?? "");
          return found ? reply(200, found) : reply(404, { error: "not found" });
        }
        const body: Obj = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
        switch (u.pathname) {
          case "/v1/chat/completions":
            return reply(200, this.complete(body));
          case "/flights/search":
            return reply(200, { flights: [{ flight: "JL046", price: 912 }, { flight: "AF276", price: 1040 }] });
          case "/flights/book":
            return reply(200, this.effect("book", key, { flight: body.flight, pnr: "PNR" + (hash(key) % 10000).toString().padStart(4, "0") }));
          case "/mail/send":
            return reply(200, this.effect("mail", key, { to: body.to, id: "m-" + key.slice(-6) }));
        }
        reply(404, { error: "no such endpoint" });
      });
    });
  }

  async start(port = 0): Promise<this> {
    await new Promise<void>((r) => this.server.listen(port, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }

  effect(kind: "book" | "mail", key: string, result: Obj): Obj {
    const [table, counts] = kind === "book" ? [this.bookings, this.bookingEffects] : [this.mails, this.mailEffects];
    const n = (counts.get(key) ?? 0) + 1; // not idempotent: every call takes effect
    counts.set(key, n);
    if (!table.has(key)) table.set(key, result);
    const hook = this.hooks[kind];
    if (hook) {
      delete this.hooks[kind];
      hook();
    }
    return n === 1 ? table.get(key)! : { ...result, duplicate: n };
  }

  complete(req: Obj): Obj {
    const n = ++this.completions;
    const msgs: Obj[] = req.messages ?? [];
    const results = msgs.filter((m) => m.role === "tool").map((m) => JSON.parse(m.content));
    const called = msgs.filter((m) => m.role === "assistant").flatMap((m) => (m.tool_calls ?? []).map((t: Obj) => t.function.name));
    const call = (name: string, args: Obj) => ({
      role: "assistant", content: null,
      tool_calls: [{ id: `call_${called.length + 1}`, type: "function", function: { name, arguments: JSON.stringify(args) } }],
    });
    let msg: Obj;
    if (!called.includes("search_flights")) msg = call("search_flights", { from: "CDG", to: "NRT" });
    else if (!called.includes("book_flight")) {
      const flights: Obj[] = results.find((r) => r.flights).flights;
      msg = call("book_flight", { flight: flights.reduce((a, b) => (b.price < a.price ? b : a)).flight });
    } else if (!called.includes("send_email")) {
      const b = results.find((r) => r.pnr);
      msg = call("send_email", { to: "traveller@example.com", body: `Booked ${b.flight}, PNR ${b.pnr}` });
    } else {
      const b = results.find((r) => r.pnr);
      msg = { role: "assistant", content: `Booked ${b.flight} (PNR ${b.pnr}); the confirmation is mailed.` };
    }
    return { id: `chatcmpl-${n}`, object: "chat.completion", model: req.model ?? "stub", choices: [{ index: 0, message: msg, finish_reason: msg.tool_calls ? "tool_calls" : "stop" }] };
  }
}

function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
  return h;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const stub = await new Stub().start(Number(process.argv[2] ?? 8089));
  console.log(`stub model and world on ${stub.url}`);
}
