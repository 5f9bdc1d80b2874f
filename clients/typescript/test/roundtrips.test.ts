// Round trips: an atom begins with its first request (its first call or
// its commit), and an execution's outcome rides on the atom's next request,
// against the real server, counted by its stats.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as c from "../src/index.js";
import { served } from "./harness.js";

const dec = (b: Uint8Array) => new TextDecoder().decode(b);

describe("round trips", () => {
  const { client } = served();

  /** The server's request count, without the stats request that reads it. */
  async function requests(): Promise<number> {
    const s = await client.stats();
    return Number((s.server as Record<string, unknown>).requests) - 1;
  }

  async function counted(fn: () => Promise<unknown>): Promise<number> {
    const before = await requests();
    await fn();
    return (await requests()) - before - 1; // without the stats request of before
  }

  test("requests take continuum-frames/1 unless CONTINUUMD_TRANSPORT=http", async () => {
    await client.health();
    assert.equal(client.transport, process.env.CONTINUUMD_TRANSPORT === "http" ? "http" : "frames");
  });

  test("an atom without actions is one request", async () => {
    const run = await client.run("ts-rt-none");
    const n = await counted(() => run.atom(async (atom) => void atom.delta.set("k", "v")));
    assert.equal(n, 1);
    assert.equal(dec((await run.state()).memory.get("k")!), "v");
  });

  test("an atom with k actions is k + 1 requests", async () => {
    for (const k of [1, 2, 5]) {
      const run = await client.run(`ts-rt-${k}`);
      let last: c.Atom | undefined;
      const n = await counted(() =>
        run.atom(async (atom) => {
          last = atom;
          const outs: string[] = [];
          for (let i = 0; i < k; i++) outs.push(dec(await atom.do(`t${i}`, () => `r${i}`)));
          atom.delta.set("k", outs.join(","));
        }),
      );
      assert.equal(n, k + 1, `${k} actions`);
      assert.equal(last!.committed!.seq, 1);
      const rec = await run.atomAt(1);
      assert.deepEqual(rec.actions.map((a) => [a.status, a.result]), Array.from({ length: k }, (_, i) => ["done", `r${i}`]));
      assert.equal(dec((await run.state()).memory.get("k")!), Array.from({ length: k }, (_, i) => `r${i}`).join(","));
    }
  });

  test("the held outcome is certified before a fail: the next attempt does not execute again", async () => {
    const run = await client.run("ts-rt-fail");
    const ran: string[] = [];
    await assert.rejects(
      run.atom(async (atom) => {
        await atom.do("t", (key) => (ran.push(key), "once"));
        throw new RangeError("the agent gave up");
      }),
      RangeError,
    );
    await run.atom(async (atom) => {
      atom.delta.set("k", await atom.do("t", (key) => (ran.push(key), "twice")));
    });
    assert.equal(ran.length, 1);
    assert.equal(dec((await run.state()).memory.get("k")!), "once");
  });

  test("a refused delta: the held outcome is certified alone, and a good delta commits", async () => {
    const run = await client.run("ts-rt-bad-delta");
    const atom = await run.begin();
    await atom.do("t", () => "r");
    const bad = { ops: [{ op: "no-such-op" }] } as unknown as c.Delta;
    await assert.rejects(atom.commit(bad), (e: unknown) => e instanceof c.APIError && (e.field ?? "").startsWith("commit."));
    const att = await client.request({ kind: "request", method: "GET", path: atom.path });
    assert.deepEqual((att.calls as Record<string, unknown>[]).map((x) => x.status), ["done"]);
    atom.delta.set("k", "v");
    assert.equal((await atom.commit()).seq, 1);
    assert.deepEqual((await run.atomAt(1)).actions.map((a) => a.status), ["done"]);
  });

  test("a stale next seq: the ridden commit is refused, the atom begun and committed at the run's next seq", async () => {
    const a = await client.run("ts-rt-two");
    const b = await client.run("ts-rt-two");
    await b.atom(async (atom) => void atom.delta.set("k", "b"));
    let last: c.Atom | undefined;
    await a.atom(async (atom) => void ((last = atom), atom.delta.set("k", "a")));
    assert.equal(last!.committed!.seq, 2);
    assert.equal(dec((await a.state()).memory.get("k")!), "a");
  });
});
