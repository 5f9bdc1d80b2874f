/**
 * A fake downstream service with real side effects, in the test process:
 * POST /call {tool, args, key} applies an effect (counted per key and in
 * total) and answers its result; GET /lookup?key= answers the result of
 * the effect made under key, or 404. before(call) may drop a call after
 * its effect took place, unanswered (as a process killed in the middle).
 */

import * as http from "node:http";
import { type AddressInfo } from "node:net";

export interface Call {
  tool: string;
  args: unknown;
  key: string;
}

export class Downstream {
  readonly effects: Call[] = [];
  readonly byKey = new Map<string, unknown>();
  /** Called after the effect of each call; returning false leaves the call unanswered. */
  after: ((c: Call) => boolean | void) | undefined;
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
        if (req.method === "GET" && u.pathname === "/lookup") {
          const key = u.searchParams.get("key") ?? "";
          if (this.byKey.has(key)) reply(200, this.byKey.get(key));
          else reply(404, { error: "no effect under this key" });
          return;
        }
        const call = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Call;
        const result = { ok: true, tool: call.tool, n: this.effects.length + 1, args: call.args };
        this.effects.push(call);
        this.byKey.set(call.key, result);
        if (this.after && this.after(call) === false) return; // effect made, answer never sent
        reply(200, result);
      });
    });
  }

  count(tool: string): number {
    return this.effects.filter((e) => e.tool === tool).length;
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

/** The downstream's client side, as a tool would call it. */
export async function callDownstream(url: string, tool: string, args: unknown, key: string): Promise<unknown> {
  const r = await fetch(`${url}/call`, { method: "POST", body: JSON.stringify({ tool, args, key }), headers: { "Content-Type": "application/json" } });
  if (!r.ok) throw new Error(`downstream ${tool}: ${r.status}`);
  return r.json();
}

export async function lookupDownstream(url: string, key: string): Promise<unknown | undefined> {
  const r = await fetch(`${url}/lookup?key=${encodeURIComponent(key)}`);
  if (r.status === 404) return undefined;
  if (!r.ok) throw new Error(`downstream lookup: ${r.status}`);
  return r.json();
}
