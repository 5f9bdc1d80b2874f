// Rollback with compensations over the wire against the real server: each
// compensation runs in the client exactly once, newest first, across
// SIGKILLs of the server at seeded points (before and after its effect).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as c from "../src/index.js";
import { served, rng, seed } from "./harness.js";

describe("rollback", () => {
  const { server, client } = served();

  test("compensations exactly once across SIGKILLs of the server", async () => {
    const rand = rng(seed());
    const run = await client.run("ts-rb");
    await run.atom(async (atom) => {
      atom.delta.set("x", "1");
    });
    for (let i = 0; i < 3; i++) {
      await run.atom(async (atom) => {
        await atom.do("pay", () => "paid", { args: { i }, compensate: { tool: "refund", args: { i }, idempotent: i === 1 } });
        atom.delta.set(`p${i}`, "paid");
      });
    }
    await run.atom(async (atom) => {
      await atom.do("notify", () => "sent", { args: {} });
    });
    await assert.rejects(run.rollback(1, () => ""), (e: unknown) => e instanceof c.Conflict && e.code === "not_undone");

    const effects = new Map<string, number>();
    const order: number[] = [];
    let kills = 0;
    const kill = async () => {
      kills++;
      await server.kill();
      await server.start();
      throw new c.Unavailable("killed");
    };
    const refund = async (step: c.CompensationStep) => {
      if (rand() < 0.3) await kill(); // before the effect
      if (!(step.idempotent && effects.get(step.key))) {
        effects.set(step.key, (effects.get(step.key) ?? 0) + 1);
        order.push((step.args as { i: number }).i);
      }
      if (rand() < 0.2) await kill(); // after it, before its outcome
      return "refunded";
    };
    const reconcile = (step: { key: string }) => (effects.get(step.key) ? c.happened("refunded") : c.didNotHappen());
    let done: Record<string, unknown> | undefined;
    for (let i = 0; i < 50 && !done; i++) {
      try {
        done = await run.rollback(1, refund, { allowNotUndone: true, reconcile });
      } catch (e) {
        if (!(e instanceof c.ContinuumError)) throw e;
        assert.equal(await run.pendingRollback(), 1);
      }
    }
    assert.ok(done);
    assert.deepEqual([...effects.values()], [1, 1, 1], JSON.stringify([...effects]));
    assert.deepEqual(order, [2, 1, 0]);
    const st = await run.state();
    assert.equal(st.seq, done.seq);
    assert.equal(c.text(st, "x"), "1");
    assert.equal(c.text(st, "p0"), undefined);
    assert.equal(await run.pendingRollback(), null);
    console.log(`${kills} kills`);
  });
});
