/** Runs test/graph_child.js as a child Node process. */

import { spawn, type ChildProcess } from "node:child_process";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  err: string;
}

export function runChild(args: string[], onStart?: (p: ChildProcess) => void, script = "graph_child.js", env: NodeJS.ProcessEnv = process.env): Promise<Exit> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [path.resolve(here, script), ...args], { stdio: ["ignore", "pipe", "pipe"], env });
    let out = "";
    let err = "";
    p.stdout!.on("data", (c: Buffer) => (out += c.toString("utf8")));
    p.stderr!.on("data", (c: Buffer) => (err += c.toString("utf8")));
    p.once("close", (code, signal) => resolve({ code, signal, out, err }));
    onStart?.(p);
  });
}
