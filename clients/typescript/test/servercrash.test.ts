// The server SIGKILLed and restarted under load: TypeScript clients keep
// running steps through the outages; nothing acknowledged is lost, no key
// takes effect twice. SERVER_KILLS sets the number of kills (default 8).

import assert from "node:assert/strict";
import { test } from "node:test";
import * as c from "../src/index.js";
import { Downstream, Server, callDownstream, lookupDownstream, rng, seed, sleep } from "./harness.js";

test("the server SIGKILLed under load", async () => {
  const s = seed();
  const rand = rng(s);
  const kills = Number(process.env.SERVER_KILLS || 8);
  const clients = 4;
  const server = await new Server().start();
  const ds = await new Downstream(2).start();
  const acked = new Map<string, Map<number, string>>();
  let stop = false;
  let reconciled = 0;
  const errors: unknown[] = [];

  const reconcile = async (key: string) => {
    const { found, result } = await lookupDownstream(ds.url, key);
    reconciled++;
    return found ? c.happened(result) : c.didNotHappen();
  };
  const worker = async (runId: string) => {
    const client = server.client(30_000);
    try {
      const run = await client.run(runId);
      const seqs = new Map<number, string>();
      acked.set(runId, seqs);
      while (!stop) {
        let last: c.Atom | undefined;
        await run.step(async (atom) => {
          last = atom;
          await atom.ready();
          const args = { run: runId, seq: atom.seq };
          const idem = atom.seq % 2 === 0;
          const out = await atom.doJSON("charge", (key) => callDownstream(ds.url, "charge", args, key, idem), { args, idempotent: idem, reconcile });
          atom.delta.setJSON("charge", out);
        });
        seqs.set(last!.committed!.seq, last!.committed!.head);
      }
    } catch (e) {
      errors.push(e);
    } finally {
      client.close();
    }
  };
  const workers = Array.from({ length: clients }, (_, i) => worker(`load-${i}`));
  const check = server.client();
  try {
    for (let k = 0; k < kills; k++) {
      if (k % 2 === 0) {
        await sleep(50 + rand() * 250);
        await server.kill();
      } else {
        // Kill between an effect and its outcome's report.
        let hit: Promise<unknown> | undefined;
        ds.after = () => {
          hit ??= server.kill();
        };
        const deadline = Date.now() + 20_000;
        while (!hit) {
          assert.ok(Date.now() < deadline, `seed ${s}: no call to kill the server after`);
          await sleep(5);
        }
        await hit;
        ds.after = undefined;
      }
      const snapshot = new Map([...acked].map(([r, m]) => [r, new Map(m)]));
      await server.start();
      for (const [runId, seqs] of snapshot) {
        const run = await check.run(runId);
        const last = (await run.info()).lastSeq;
        for (const [seq, head] of seqs) {
          assert.ok(seq <= last, `seed ${s} kill ${k}: ${runId} acknowledged seq ${seq} lost`);
          assert.equal((await run.atomAt(seq)).head, head, `seed ${s} kill ${k}: ${runId} head of seq ${seq} changed`);
        }
      }
    }
    await sleep(300);
    stop = true;
    await Promise.all(workers);
    assert.deepEqual(errors, [], `seed ${s}`);
    const committed = new Set<string>();
    let total = 0;
    for (const runId of acked.keys()) {
      const run = await check.run(runId);
      const last = (await run.info()).lastSeq;
      total += last;
      for (let seq = 1; seq <= last; seq++) for (const a of (await run.atomAt(seq)).actions) committed.add(String(a.key));
    }
    assert.deepEqual([...ds.effects].filter(([, n]) => n !== 1), [], `seed ${s}: duplicate effects`);
    for (const k of committed) assert.ok(ds.effects.has(k), `seed ${s}: committed action ${k} without effect`);
    assert.ok(ds.effects.size - committed.size <= clients, `seed ${s}`);
    assert.equal((await check.verify({ deep: true })).ok, true);
    console.error(`server kills: ${kills}, ${clients} clients, ${total} atoms committed, ${reconciled} in-doubt actions reconciled by asking the downstream`);
  } finally {
    stop = true;
    check.close();
    await ds.close();
    await server.close();
  }
});
