/**
 * continuumd for the tests: the binary named by CONTINUUMD_BIN (.ci/langgraph
 * builds it), or one built with `go build` once per process, on a store of
 * its own in a short temporary directory.
 */

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@continuumdb/client";

const here = path.dirname(fileURLToPath(import.meta.url));
export const repo = path.resolve(here, "..", "..", "..", ".."); // dist/test -> repo
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

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function health(socketPath: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method: "GET", path: "/v1/health" }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end();
  });
}

export class Server {
  readonly dir: string;
  readonly store: string;
  readonly socket: string;
  readonly log: string;
  proc: ChildProcess | undefined;

  constructor(dir?: string) {
    this.dir = dir ?? mkdtempSync("/tmp/cdlg-");
    this.store = path.join(this.dir, "store");
    this.socket = path.join(this.dir, "store.sock");
    this.log = path.join(this.dir, "server.log");
  }

  async start(): Promise<this> {
    const fd = openSync(this.log, "a");
    const proc = spawn(binary(), ["--store", this.store, "--socket", this.socket, "--log-level", "warn"], { stdio: ["ignore", fd, fd] });
    this.proc = proc;
    let exited = false;
    proc.once("exit", () => (exited = true));
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (exited) throw new Error(`continuumd exited ${proc.exitCode}:\n${readFileSync(this.log, "utf8")}`);
      try {
        if ((await health(this.socket)) === 200) return this;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`continuumd did not answer in 60 s:\n${readFileSync(this.log, "utf8")}`);
      await sleep(10);
    }
  }

  #stop(signal: NodeJS.Signals): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      p.once("exit", () => resolve());
      p.kill(signal);
    });
  }

  kill(): Promise<void> {
    return this.#stop("SIGKILL");
  }

  stop(): Promise<void> {
    return this.#stop("SIGTERM");
  }

  async close(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  client(retryForMs = 20_000): Client {
    return new Client({ socket: this.socket, retryForMs });
  }
}
