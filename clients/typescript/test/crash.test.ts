// A TypeScript agent SIGKILLed at seeded points while a fake downstream
// counts effects per idempotency key: 0 duplicate effects, 0 lost
// acknowledged atoms, every in-doubt action reconciled. CRASH_KILLS sets
// the number of kills (default 10); CONTINUUM_SEED repeats a run.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import * as path from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { Downstream, Server, here, rng, seed, sleep } from "./harness.js";

class Child {
  readonly proc: ChildProcess;
  readonly lines: string[] = [];
  readonly exited: Promise<void>;

  constructor(env: NodeJS.ProcessEnv) {
    this.proc = spawn(process.execPath, [path.join(here, "agent_child.js")], { env, stdio: ["ignore", "pipe", "pipe"] });
    createInterface({ input: this.proc.stdout! }).on("line", (l) => this.lines.push(l.trim()));
    this.proc.stderr!.on("data", (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((r) => this.proc.once("exit", () => r()));
  }

  stderr = "";

  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  async kill(): Promise<void> {
    if (this.running) this.proc.kill("SIGKILL");
    await this.exited;
  }

  acks(): [number, string][] {
    return this.lines.filter((l) => l.startsWith("ACK ")).map((l) => [Number(l.split(" ")[1]), l.split(" ")[2]!]);
  }
}

test("an agent SIGKILLed at seeded points", async () => {
  const s = seed();
  const rand = rng(s);
  const kills = Number(process.env.CRASH_KILLS || 10);
  const target = 10 * kills + 10;
  const server = await new Server("--lease", "5s").start();
  const ds = await new Downstream(5).start();
  const runId = `crash-${s}`;
  const env = { ...process.env, CONTINUUMD_SOCKET: server.socket, DOWNSTREAM_URL: ds.url, RUN: runId, ATOMS: String(target) };
  const client = server.client();
  const acked = new Map<number, string>();
  const modes: Record<string, number> = {};
  let reconciled = 0;

  const check = async (k: number, mode: string, child: Child) => {
    for (const [seq, head] of child.acks()) acked.set(seq, head);
    const run = await client.run(runId);
    const last = (await run.info()).lastSeq;
    for (const [seq, head] of acked) {
      assert.ok(seq <= last, `seed ${s} kill ${k} (${mode}): acknowledged seq ${seq} lost`);
      assert.equal((await run.atomAt(seq)).head, head, `seed ${s} kill ${k} (${mode}): head of acknowledged seq ${seq} changed`);
    }
    for (const [key, n] of ds.effects) assert.ok(n <= 1, `seed ${s} kill ${k} (${mode}): key ${key} took effect ${n} times`);
    reconciled += child.lines.filter((l) => l.startsWith("RECONCILED ")).length;
  };

  try {
    for (let k = 0; k < kills; k++) {
      const mode = ["delay", "before_effect", "after_effect", "after_ack"][Math.floor(rand() * 4)]!;
      modes[mode] = (modes[mode] ?? 0) + 1;
      const nth = 1 + Math.floor(rand() * 3);
      const child = new Child(env);
      let seen = 0;
      let killed = false;
      const hook = (before: boolean) => {
        if (killed || mode !== (before ? "before_effect" : "after_effect") || ++seen < nth) return undefined;
        killed = true;
        child.proc.kill("SIGKILL"); // while the downstream holds the call
        return before ? false : undefined;
      };
      ds.before = () => hook(true);
      ds.after = () => void hook(false);
      if (mode === "delay") {
        await sleep(20 + rand() * 280);
      } else if (mode === "after_ack") {
        while (child.acks().length < nth && child.running) await sleep(5);
      } else {
        const deadline = Date.now() + 20_000;
        while (!killed && child.running) {
          assert.ok(Date.now() < deadline, `seed ${s} kill ${k} (${mode}): no call to kill the agent in`);
          await sleep(5);
        }
        assert.ok(killed, `seed ${s} kill ${k} (${mode}): the agent exited before its kill:\n${child.stderr}`);
      }
      await child.kill();
      ds.before = ds.after = undefined;
      await check(k, mode, child);
    }
    const child = new Child(env);
    await child.exited;
    assert.equal(child.proc.exitCode, 0, `the agent failed:\n${child.stderr}`);
    assert.ok(child.lines.includes(`DONE ${target}`), child.lines.join("\n"));
    await check(kills, "final", child);

    const run = await client.run(runId);
    const keys = new Set<string>();
    for (let seq = 1; seq <= target; seq++) for (const a of (await run.atomAt(seq)).actions) keys.add(String(a.key));
    const dup = [...ds.effects].filter(([, n]) => n !== 1);
    assert.deepEqual(dup, [], `seed ${s}: keys that took effect more than once`);
    assert.deepEqual([...ds.effects.keys()].sort(), [...keys].sort(), `seed ${s}: effects of no committed action, or committed actions with no effect`);
    assert.equal((await client.verify({ deep: true })).ok, true);
    console.error(`client kills: ${kills} ${JSON.stringify(modes)}, ${target} atoms, ${keys.size} actions each taking effect once, ${reconciled} in-doubt actions reconciled`);
  } finally {
    client.close();
    await ds.close();
    await server.close();
  }
});
