// Branches over the wire against the real server: a conflict writes
// nothing and its retry by name gets the certified actions back; branches
// retried across SIGKILLs of the server at seeded points never execute a
// certified action twice.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as c from "../src/index.js";
import { served, rng, seed } from "./harness.js";

const dec = (b: Uint8Array) => new TextDecoder().decode(b);

describe("branches", () => {
  const { server, client } = served();

  test("a conflict, and the retry by name", async () => {
    const run = await client.run("ts-br");
    await run.atom(async (atom) => {
      atom.delta.set("total", "0");
    });
    const effects = new Map<string, number>();
    const charge = (key: string) => {
      effects.set(key, (effects.get(key) ?? 0) + 1);
      return "charged";
    };
    const a = await run.branch("a");
    const b = await run.branch("b", { reads: ["memory:total"] });
    assert.equal(a.base, 1);
    assert.equal(b.branch, "b");
    assert.equal(b.seq, 0);
    await assert.rejects(run.branch("b"), c.RunHeld);
    assert.equal(dec(await b.do("billing.charge", charge, { args: { cents: 5 } })), "charged");
    a.delta.set("total", "10");
    assert.equal((await a.commit()).seq, 2);
    b.delta.set("b", "done");
    const err = await b.commit().then(
      () => assert.fail("b's commit must conflict"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof c.BranchConflict, String(err));
    assert.equal(err.key, "memory:total");
    assert.equal(err.seq, 2);
    assert.equal((await run.state()).memory.get("b"), undefined);
    const seq = await run.branchAtom(
      "b",
      async (b2) => {
        assert.equal((await b2.ready()).base, 2);
        assert.equal(dec(await b2.do("billing.charge", charge, { args: { cents: 5 } })), "charged");
        b2.delta.set("b", "done");
        return b2;
      },
      { reads: ["memory:total"] },
    );
    assert.equal(seq.committed?.seq, 3);
    assert.deepEqual([...effects.values()], [1]);

    let tries = 0;
    const out = await run.branchStep(
      "c",
      async (atom) => {
        tries++;
        await atom.ready(); // its base is the state at its begin: before "other" commits
        if (tries === 1) {
          await run.branchAtom("other", async (o) => {
            o.delta.set("total", "20");
          });
        }
        atom.delta.set("total", "30");
        return "ok";
      },
      { reads: ["memory:total"] },
    );
    assert.equal(out, "ok");
    assert.equal(tries, 2);
    assert.equal(c.text(await run.state(), "total"), "30");
  });

  test("retries by name across SIGKILLs of the server", async () => {
    const rand = rng(seed());
    const run = await client.run("ts-brk");
    const effects = new Map<string, number>();
    let kills = 0;
    const maybeKill = async () => {
      if (rand() < 0.25) {
        kills++;
        await server.kill();
        await server.start();
      }
    };
    for (let i = 0; i < 4; i++) {
      await run.branchStep(
        `b${i}`,
        async (atom) => {
          for (let n = 0; n < 3; n++) {
            const want = `paid ${i}/${n}`;
            const got = await atom.do(
              "pay",
              async (key) => {
                if (rand() < 0.2) {
                  kills++; // the effect never happens: the outcome is never reported
                  await server.kill();
                  await server.start();
                  throw new Error("killed before the effect");
                }
                effects.set(key, (effects.get(key) ?? 0) + 1);
                return want;
              },
              {
                args: { b: i, n },
                reconcile: async (key) => (effects.get(key) ? c.happened(want) : c.didNotHappen()),
              },
            );
            assert.equal(dec(got), want);
            await maybeKill();
          }
          atom.delta.set(`b${i}`, "done");
        },
        { maxAttempts: 50 },
      );
    }
    assert.deepEqual([...effects.values()], Array(12).fill(1), JSON.stringify([...effects]));
    const state = await run.state();
    for (let i = 0; i < 4; i++) assert.equal(c.text(state, `b${i}`), "done");
    console.log(`${kills} kills`);
  });
});
