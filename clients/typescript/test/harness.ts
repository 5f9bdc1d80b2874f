/**
 * What the suites share: the real continuumd binary on a temporary store,
 * a fake downstream that counts effects per idempotency key, and a raw
 * request. The server is the binary named by CONTINUUMD_BIN (.ci/clients
 * builds it); without it, one is built with `go build` once per process.
 */

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import * as http from "node:http";
import { type AddressInfo } from "node:net";
import * as path from "node:path";
import { after, before } from "node:test";
import { fileURLToPath } from "node:url";
import { Client } from "../src/index.js";

export const here = path.dirname(fileURLToPath(import.meta.url)); // dist/test
export const pkg = path.resolve(here, "..", "..");
const repo = path.resolve(pkg, "..", "..");

let built: string | undefined;

export function binary(): string {
  if (process.env.CONTINUUMD_BIN) return process.env.CONTINUUMD_BIN;
  if (!built) {
    const out = path.join(mkdtempSync("/tmp/continuumd-bin-"), "continuumd");
    execFileSync("go", ["build", "-o", out, "./cmd/continuumd"], { cwd: repo, stdio: "inherit" });
    built = out;
  }
  return built;
}

/** The seed of a randomized test: CONTINUUM_SEED, or the time. */
export function seed(): number {
  const s = Number(process.env.CONTINUUM_SEED || Date.now() % 2 ** 31);
  console.error(`seed ${s} (CONTINUUM_SEED=${s} repeats it)`);
  return s;
}

/** A small seeded generator (mulberry32). */
export function rng(s: number): () => number {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** One request over a Unix socket, without the client. */
export function raw(socketPath: string, method: string, p: string, body?: string | Buffer, token?: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (token) headers.Authorization = "Bearer " + token;
    const req = http.request({ socketPath, method, path: p, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          // not JSON: returned as text
        }
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** The transport CONTINUUMD_TRANSPORT forces on the suites' clients ("frames" or "http"), as Client.fromEnv does for the children's. */
export function transport(): { transport?: "frames" | "http" } {
  const t = process.env.CONTINUUMD_TRANSPORT;
  return t === "frames" || t === "http" ? { transport: t } : {};
}

/** continuumd on a store of its own, in a short temporary directory. */
export class Server {
  readonly dir = mkdtempSync("/tmp/cdts-");
  readonly store = path.join(this.dir, "store");
  readonly socket = path.join(this.dir, "store.sock");
  readonly log = path.join(this.dir, "server.log");
  readonly args: string[];
  proc: ChildProcess | undefined;

  constructor(...extra: string[]) {
    this.args = ["--store", this.store, "--socket", this.socket, "--log-level", "warn", ...extra];
  }

  token(): string | undefined {
    const i = this.args.indexOf("--token-file");
    return i < 0 ? undefined : readFileSync(this.args[i + 1]!, "utf8").trim();
  }

  async start(): Promise<this> {
    const fd = openSync(this.log, "a");
    const proc = spawn(binary(), this.args, { stdio: ["ignore", fd, fd] });
    this.proc = proc;
    let exited = false;
    proc.once("exit", () => (exited = true));
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (exited) throw new Error(`continuumd exited ${proc.exitCode}:\n${readFileSync(this.log, "utf8")}`);
      try {
        const r = await raw(this.socket, "GET", "/v1/health", undefined, this.token());
        if (r.status === 200 || r.status === 401) return this;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`continuumd did not answer in 30 s:\n${readFileSync(this.log, "utf8")}`);
      await sleep(10);
    }
  }

  #stop(signal: NodeJS.Signals): Promise<number | null> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return Promise.resolve(p?.exitCode ?? null);
    return new Promise((resolve) => {
      p.once("exit", (code) => resolve(code));
      p.kill(signal);
    });
  }

  /** SIGKILL: no drain, no final checkpoint. */
  kill(): Promise<number | null> {
    return this.#stop("SIGKILL");
  }

  /** SIGTERM: the graceful stop. */
  stop(): Promise<number | null> {
    return this.#stop("SIGTERM");
  }

  async close(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  client(retryForMs = 20_000): Client {
    const token = this.token();
    return new Client({ socket: this.socket, retryForMs, ...(token ? { token } : {}), ...transport() });
  }
}

/**
 * A server and a client of it for the tests of the calling describe: the
 * server starts before them; the client is closed and the server stopped
 * and its directory removed after them. extra: continuumd's flags.
 */
export function served(...extra: string[]): { server: Server; client: Client } {
  const server = new Server(...extra);
  const client = server.client(); // connects on its first request
  before(() => server.start());
  after(async () => {
    client.close();
    await server.close();
  });
  return { server, client };
}

export interface Call {
  tool: string;
  args: unknown;
  key: string;
  idempotent: boolean;
}

/**
 * The fake outside world, in the test process: it counts effects per
 * idempotency key (POST /call; GET /lookup?key=). Idempotent calls honour
 * the key; others take effect every time. before and after are hooks
 * around each effect; before returning false drops the call unanswered.
 */
export class Downstream {
  readonly effects = new Map<string, number>();
  readonly results = new Map<string, unknown>();
  before: ((c: Call) => boolean | void) | undefined;
  after: ((c: Call) => void) | undefined;
  readonly server: http.Server;
  url = "";

  constructor(readonly latencyMs = 0) {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", async () => {
        const reply = (status: number, v: unknown) => {
          const b = JSON.stringify(v);
          res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(b) });
          res.end(b);
        };
        const u = new URL(req.url ?? "/", "http://x");
        if (req.method === "GET" && u.pathname === "/lookup") {
          const key = u.searchParams.get("key") ?? "";
          if (this.results.has(key)) reply(200, this.results.get(key));
          else reply(404, { error: "no effect under this key" });
          return;
        }
        const call = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Call;
        if (this.latencyMs) await sleep(this.latencyMs);
        if (this.before && this.before(call) === false) {
          req.socket.destroy();
          return;
        }
        reply(200, this.effect(call));
        this.after?.(call);
      });
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  effect(c: Call): unknown {
    if (c.idempotent && this.results.has(c.key)) return this.results.get(c.key);
    const n = (this.effects.get(c.key) ?? 0) + 1;
    this.effects.set(c.key, n);
    const result = { tool: c.tool, key: c.key, n, args: c.args };
    if (!this.results.has(c.key)) this.results.set(c.key, result);
    return result;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

/** What an agent's tool does: one POST /call. */
export async function callDownstream(url: string, tool: string, args: unknown, key: string, idempotent: boolean): Promise<unknown> {
  const res = await fetch(url + "/call", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ tool, args, key, idempotent }) });
  if (res.status !== 200) throw new Error(`downstream answered ${res.status}`);
  return res.json();
}

/** What an agent asks to reconcile: did key take effect, and how. */
export async function lookupDownstream(url: string, key: string): Promise<{ found: boolean; result?: unknown }> {
  const res = await fetch(url + "/lookup?key=" + encodeURIComponent(key));
  if (res.status === 404) return { found: false };
  if (res.status !== 200) throw new Error(`downstream lookup answered ${res.status}`);
  return { found: true, result: await res.json() };
}
