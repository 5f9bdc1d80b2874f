// Deletion and garbage collection over the wire: delete of an ended run is
// durable when it resolves and repeats resolve to the deletion; the run
// then rejects with RunDeleted; an active run, a run with a live fork and
// an unknown run are refused with the engine's errors; gc says what it did.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as c from "../src/index.js";
import { served } from "./harness.js";

describe("delete and gc", () => {
  const { server, client } = served();

  test("delete, repeat, refusals, gc", async () => {
    const run = await client.run("ts-delete-me");
    await run.atom(async (atom) => {
      atom.delta.set("k", "v");
    });
    await assert.rejects(client.delete("ts-delete-me"), c.RunNotEnded);
    await client.fork("ts-delete-me", 1, "ts-delete-fork");
    await run.end("completed");
    await assert.rejects(client.delete("ts-delete-me"), c.RunHasForks);
    await (await client.run("ts-delete-fork")).end("cancelled");
    await client.delete("ts-delete-fork", { reason: "fork abandoned" });
    const d1 = await client.delete("ts-delete-me");
    const d2 = await client.delete("ts-delete-me");
    assert.equal(d1.id, "ts-delete-me");
    assert.deepEqual(d2, d1);
    await assert.rejects(run.state(), c.RunDeleted);
    await assert.rejects(client.delete("ts-no-such-run"), c.RunNotFound);
    const g = await client.gc();
    assert.equal(typeof g.segments, "number");
    await server.kill();
    await server.start();
    assert.deepEqual(await client.delete("ts-delete-me"), d1);
  });
});

describe("verify and inspect of a run", () => {
  const { server, client } = served();

  test("verify, inspect, across a SIGKILL", async () => {
    const run = await client.run("ts-v-1");
    for (let i = 0; i < 2; i++) await run.atom(async (atom) => { await atom.do("t", () => "ok"); });
    const v = await run.verify();
    assert.equal(v.ok, true);
    assert.equal((v.run as any).last_seq, 2);
    const ins = await run.inspect();
    assert.equal(ins.atoms, 2);
    assert.equal(ins.head, (v.run as any).head);
    await server.kill();
    await server.start();
    assert.equal((await run.inspect()).atoms, 2);
    assert.equal((await run.verify({ deep: true })).ok, true);
  });
});

describe("messages between runs", () => {
  const { server, client } = served();

  test("sent with the commit, consumed with the receiver's, given back by a SIGKILL", async () => {
    const a = await client.run("ts-m-a");
    const b = await client.run("ts-m-b");
    await a.atom(async (atom) => { await atom.send("ts-m-b", "hello"); });
    assert.equal((await b.inbox()).length, 1);
    const atom = await b.begin();
    const m = await atom.receive();
    assert.equal(m?.from, "ts-m-a");
    assert.equal(new TextDecoder().decode(m?.payload), "hello");
    await server.kill();
    await server.start();
    await b.atom(async (at) => {
      const again = await at.receive({ from: "ts-m-a", waitMs: 100 });
      assert.equal(new TextDecoder().decode(again?.payload), "hello");
      assert.equal(await at.receive(), null);
    }, { takeover: true });
    assert.equal((await b.inbox()).length, 0);
  });
});

describe("diff", () => {
  const { client } = served();

  test("two seqs of a run, a fork and its parent, unrelated runs", async () => {
    const run = await client.run("ts-d-a");
    for (const v of ["1", "2", "3"]) {
      await run.atom(async (atom) => {
        atom.delta.set("k", v);
      });
    }
    const fork = await client.fork("ts-d-a", 1, "ts-d-f");
    await fork.atom(async (atom) => {
      atom.delta.set("k", "fork");
    });
    type Side = { ops: number; atoms: unknown[]; spans: { run: string }[] };
    let d = (await run.diff(1, "last")) as { base: { run: string; seq: number }; a: Side; b: Side };
    assert.deepEqual([d.base.seq, d.a.ops, d.b.ops, d.b.atoms.length], [1, 0, 2, 2]);
    d = (await run.diff(3, 2, { other: "ts-d-f" })) as typeof d;
    assert.deepEqual([d.base.run, d.base.seq, d.a.atoms.length, d.b.spans[0].run], ["ts-d-a", 1, 2, "ts-d-f"]);
    await client.run("ts-d-other");
    await assert.rejects(run.diff(1, 0, { other: "ts-d-other" }), (e: unknown) => e instanceof c.APIError && e.code === "unrelated_runs");
  });
});
