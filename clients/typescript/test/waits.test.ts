// Waits, events and timers against the real server: a run waits after its
// atom, an event ends the wait once (idempotent by its sender), the next
// atom reads the outcome; timeouts, sleeps, cancels, the ready list; and
// the server SIGKILLed at seeded points while a run waits: the event is
// delivered exactly once after the restart.

import assert from "node:assert/strict";
import { test } from "node:test";
import * as c from "../src/index.js";
import { Server, rng, seed, sleep } from "./harness.js";

const dec = (b: Uint8Array) => new TextDecoder().decode(b);

test("a run waits, an event resumes it once", async () => {
  const server = await new Server().start();
  const client = server.client();
  try {
    const run = await client.run("approve-1");
    await run.atom(async (atom) => void atom.delta.set("asked", "yes"));
    const w = await run.wait("approval", { timeoutMs: 3_600_000, after: 1 });
    assert.equal(w.outcome, "open");
    assert.deepEqual([w.run, w.seq, w.name], ["approve-1", 1, "approval"]);
    assert.ok(w.deadline instanceof Date);
    assert.equal((await run.wait("approval")).declared.getTime(), w.declared.getTime());
    await assert.rejects(run.wait("other"), c.WaitExists);
    await assert.rejects(run.wait("approval", { after: 0 }), c.SeqMismatch);
    assert.deepEqual(await client.ready(), []);
    const open = await run.begin();
    await assert.rejects(open.waitOutcome(), c.WaitNotEnded);
    await open.fail("not yet");

    const ended = run.waitEnded();
    await sleep(50);
    const payload = JSON.stringify({ approved: true });
    assert.deepEqual(await client.sendEvent("approve-1", "approval", { sender: "alice-1", payload }), { duplicate: false, delivered: true });
    assert.equal((await ended)?.outcome, "delivered");
    assert.deepEqual(await client.sendEvent("approve-1", "approval", { sender: "alice-1", payload }), { duplicate: true, delivered: false });
    await assert.rejects(client.sendEvent("approve-1", "approval", { sender: "alice-1", payload: "no" }), (e: unknown) => e instanceof c.EventMismatch && e.field === "sender");
    assert.deepEqual((await client.ready({ waitMs: 1000 })).map((r) => [r.run, r.outcome]), [["approve-1", "delivered"]]);
    await run.atom(async (atom) => {
      const got = await atom.waitOutcome();
      assert.equal(got.outcome, "delivered");
      assert.equal(got.event?.sender, "alice-1");
      assert.deepEqual(JSON.parse(dec(got.event!.payload)), { approved: true });
      atom.delta.set("approved", "yes");
    });
    assert.equal(await run.currentWait(), null);
    assert.deepEqual(await client.ready(), []);

    // A timeout, a sleep, a cancel, an event before its wait.
    const t = await client.run("t");
    await t.wait("approval", { timeoutMs: 30 });
    assert.equal((await t.waitEnded())?.outcome, "timed_out");
    assert.equal((await client.sendEvent("t", "approval", { sender: "late" })).delivered, false);
    const s = await client.run("s");
    assert.equal((await s.sleep({ until: new Date(Date.now() + 40) })).name, "");
    assert.equal((await s.waitEnded())?.outcome, "timed_out");
    const cr = await client.run("c");
    await cr.wait("x");
    assert.equal((await cr.cancelWait()).outcome, "cancelled");
    await assert.rejects((await client.run("d")).cancelWait(), c.WaitNotFound);
    const e = await client.run("e");
    await e.sendEvent("go", { sender: "s1", payload: new Uint8Array([0xff, 0]) });
    const we = await e.wait("go");
    assert.equal(we.outcome, "delivered");
    assert.deepEqual([...we.event!.payload], [0xff, 0]);
    assert.deepEqual((await client.ready({ waitMs: 1000 })).map((r) => r.run).sort(), ["e", "s", "t"]);
    await assert.rejects(client.sendEvent("nope", "x", { sender: "s" }), c.RunNotFound);
    assert.equal((await client.verify({ deep: true })).ok, true);
  } finally {
    client.close();
    await server.close();
  }
});

test("the server SIGKILLed while runs wait: each event delivered once", async () => {
  const rand = rng(seed());
  const server = await new Server().start();
  const client = server.client();
  const approver = server.client();
  try {
    const points = ["before the event", "after the event", "after the outcome was read"];
    const order = [...points, points[Math.floor(rand() * points.length)]!];
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (const [i, point] of order.entries()) {
      const rid = `trip-${i}`;
      const run = await client.run(rid);
      await run.atom(async (atom) => void atom.delta.set("asked", "yes"));
      await run.wait("approval", { timeoutMs: 3_600_000 });
      const sender = `human-${rid}`;
      const payload = JSON.stringify({ approved: true });
      const ended = run.waitEnded({ timeoutMs: 60_000 });
      if (point === "before the event") {
        await server.kill();
        await server.start();
        await approver.sendEvent(rid, "approval", { sender, payload });
      } else if (point === "after the event") {
        assert.equal((await approver.sendEvent(rid, "approval", { sender, payload })).delivered, true);
        await server.kill();
        await server.start();
      } else {
        await approver.sendEvent(rid, "approval", { sender, payload });
        const atom = await run.begin();
        assert.equal((await atom.waitOutcome()).outcome, "delivered");
        atom.stop();
        await server.kill();
        await server.start();
      }
      assert.equal((await ended)?.outcome, "delivered", point);
      assert.ok((await client.ready({ waitMs: 5000 })).some((r) => r.run === rid), point);
      await run.atom(async (atom) => {
        const w = await atom.waitOutcome();
        assert.deepEqual([w.outcome, w.event?.sender, dec(w.event!.payload)], ["delivered", sender, payload], point);
        atom.delta.set("booked", "once");
      }, { takeover: true });
      assert.equal((await approver.sendEvent(rid, "approval", { sender, payload })).duplicate, true, point);
      assert.equal((await run.wait("approval", { after: 2 })).outcome, "open", `${point}: a copy of the event was kept`);
      await run.cancelWait();
    }
    assert.deepEqual(await client.ready(), []);
    assert.equal((await client.verify({ deep: true })).ok, true);
  } finally {
    client.close();
    approver.close();
    await server.close();
  }
});
