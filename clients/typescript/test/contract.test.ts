// The contract's semantics over the wire, against the real server.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as c from "../src/index.js";
import { served, sleep } from "./harness.js";

const dec = (b: Uint8Array) => new TextDecoder().decode(b);

describe("contract", () => {
  const { server, client } = served();

  /** Begins an atom, gets execute for tool, and vanishes: the key it was dispatched under. */
  async function abandoned(run: c.Run, tool: string, idempotent = false): Promise<string> {
    const atom = await run.begin();
    atom.stop(); // no heartbeat: the client is gone
    let key = "";
    const vanish = new Promise<never>(() => undefined); // an execution that never ends
    void atom.do(tool, (k) => ((key = k), vanish), { idempotent });
    while (!key) await sleep(5);
    return key;
  }

  test("an atom commits its delta and its certified result", async () => {
    const run = await client.run("ts-commit");
    const keys: string[] = [];
    const out = await run.atom(async (atom) => {
      assert.throws(() => atom.seq, /not begun yet/); // its first request begins it
      await atom.ready();
      assert.equal(atom.seq, 1);
      assert.equal(atom.interrupted, null);
      const r = await atom.doJSON("billing.charge", (key) => (keys.push(key), { charge: "ch_1", key }), { args: { cents: 500 } });
      atom.delta.setObjective("bill").setJSON("charge", r).appendMessage("assistant", "charged");
      return r;
    });
    assert.deepEqual(keys, [`ck1-${run.id.length}:${run.id}:1:0`]);
    const st = await run.state();
    assert.equal(st.objective, "bill");
    assert.deepEqual(c.json(st, "charge"), out);
    assert.equal(st.messages.at(-1)?.content, "charged");
    const info = await run.info();
    assert.equal(info.lastSeq, 1);
    assert.equal(info.lease, null);
    const rec = await run.atomAt(1);
    assert.equal(rec.actions[0]!.status, "done");
    assert.equal((await run.state(0)).objective, "");
  });

  test("a certified action is never executed again", async () => {
    const run = await client.run("ts-certified");
    let calls = 0;
    const send = () => (calls++, "sent");
    await run.atom(async (atom) => void (await atom.do("mail.send", send, { key: "welcome" })));
    await run.atom(async (atom) => assert.equal(dec(await atom.do("mail.send", send, { key: "welcome" })), "sent"));
    assert.equal(calls, 1);
  });

  test("a throwing block fails the atom; its certificates stay", async () => {
    const run = await client.run("ts-fail");
    let calls = 0;
    await assert.rejects(run.atom(async (atom) => {
      await atom.do("t", () => (calls++, "ok"));
      throw new RangeError("after the action");
    }), RangeError);
    assert.equal((await run.info()).lastSeq, 0);
    await run.atom(async (atom) => {
      assert.equal(dec(await atom.do("t", () => (calls++, "ok"))), "ok");
      assert.equal(atom.seq, 1);
    });
    assert.equal(calls, 1);
  });

  test("an execute error is certified failed and rethrown; the next call executes again", async () => {
    const run = await client.run("ts-exec-error");
    const seen: string[] = [];
    class Throttled extends Error {}
    const flaky = (key: string) => {
      seen.push(key);
      if (seen.length === 1) throw new Throttled("429");
      return "charged";
    };
    await run.atom(async (atom) => {
      await assert.rejects(atom.do("billing.charge", flaky, { key: "ch-1" }), Throttled);
      assert.equal(dec(await atom.do("billing.charge", flaky, { key: "ch-1" })), "charged");
    });
    assert.deepEqual(seen, ["ch-1", "ch-1"]);
  });

  test("an in-doubt action after a takeover is reconciled", async () => {
    const run = await client.run("ts-doubt");
    const key = await abandoned(run, "pay");
    await assert.rejects(run.begin(), c.RunHeld);
    await run.atom(async (atom) => {
      await atom.ready();
      assert.equal(atom.interrupted?.reason, "takeover");
      assert.deepEqual(atom.interrupted?.actions.map((a) => [a.tool, a.status, a.key]), [["pay", "in_doubt", key]]);
      const asked: string[] = [];
      const out = await atom.doJSON("pay", () => assert.fail("an in-doubt action must not be executed"), {
        reconcile: (k) => (asked.push(k), c.happened({ paid: true })),
      });
      assert.deepEqual(out, { paid: true });
      assert.deepEqual(asked, [key]);
    }, { takeover: true });
  });

  test("an in-doubt action that did not happen is executed again under its key; one raised is resolved by hand", async () => {
    const run = await client.run("ts-doubt-2");
    const key = await abandoned(run, "mail.send");
    const keys: string[] = [];
    await run.atom(async (atom) => {
      const out = await atom.do("mail.send", (k) => (keys.push(k), "sent"), { reconcile: () => c.didNotHappen() });
      assert.equal(dec(out), "sent");
    }, { takeover: true });
    assert.deepEqual(keys, [key]);

    const key2 = await abandoned(run, "mail.send");
    await run.atom(async (atom) => {
      const err = await atom.do("mail.send", () => "never").then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof c.InDoubt);
      assert.equal(err.key, key2);
      assert.equal(dec(await atom.resolve(err, "found downstream")), "found downstream");
    }, { takeover: true });
  });

  test("an idempotent in-doubt action after a takeover is reported in doubt, then executed again with its key", async () => {
    // The client the attempt was taken from may still be inside the call,
    // and the server cannot bound it: even an idempotent action is in doubt.
    const run = await client.run("ts-idem");
    const key = await abandoned(run, "bucket.create", true);
    const keys: string[] = [];
    await assert.rejects(
      run.atom(async (atom) => void (await atom.do("bucket.create", (k) => (keys.push(k), "never"), { idempotent: true })), { takeover: true }),
      (e: unknown) => e instanceof c.InDoubt && e.key === key,
    );
    assert.equal(keys.length, 0);
    await run.atom(async (atom) => void (await atom.do("bucket.create", (k) => (keys.push(k), "made"), { idempotent: true, reconcile: () => c.didNotHappen() })), { takeover: true });
    assert.deepEqual(keys, [key]);
  });

  test("an expired lease frees the run", async () => {
    const run = await client.run("ts-lease");
    const atom = await run.begin({ leaseMs: 300 });
    atom.stop();
    while ((await run.info()).lease !== null) await sleep(50);
    await assert.rejects(atom.commit(), (e: unknown) => e instanceof c.AttemptLost && e.code === "lease_lost");
    await run.atom(async (a) => {
      await a.ready();
      assert.equal(a.seq, 1);
      assert.equal(a.interrupted?.reason, "lease_expired");
    });
  });

  test("heartbeats keep a slow execution leased", async () => {
    const run = await client.run("ts-heartbeat");
    await run.atom(async (atom) => void (await atom.do("slow", async () => (await sleep(1000), "done"))), { leaseMs: 300 });
    assert.equal((await run.info()).lastSeq, 1);
  });

  test("concurrent calls execute in parallel, with the keys of their order", async () => {
    const run = await client.run("ts-parallel");
    const started: number[] = [];
    const outs = await run.atom(async (atom) =>
      Promise.all([0, 1, 2, 3, 4, 5].map((i) => atom.do("fetch", async (k) => (started.push(Date.now()), await sleep(300), k), { args: { i } }))));
    assert.deepEqual(outs.map(dec), [0, 1, 2, 3, 4, 5].map((i) => `ck1-${run.id.length}:${run.id}:1:${i}`));
    assert.ok(Math.max(...started) - Math.min(...started) < 300, "the executions overlapped");
  });

  test("an invalid delta keeps the atom open", async () => {
    const run = await client.run("ts-invalid");
    const atom = await run.begin();
    await assert.rejects(atom.commit(new c.Delta().setSubgoalStatus("nope", "done")), (e: unknown) => e instanceof c.InvalidDelta && e.field === "delta");
    assert.equal((await atom.commit(new c.Delta().addSubgoal("s1", "x"))).seq, 1);
  });

  test("tool() makes a durable tool call", async () => {
    const run = await client.run("ts-tool");
    const keys: string[] = [];
    const book = c.tool("flights.book", async (origin: string, dest: string) => {
      keys.push(c.idempotencyKey());
      return { pnr: "X" + keys.length, route: `${origin}-${dest}` };
    });
    await assert.rejects(book("A", "B"), c.NoAtom);
    assert.throws(() => c.idempotencyKey(), c.NoAtom);
    for (let i = 0; i < 2; i++) {
      await assert.rejects(run.atom(async () => {
        assert.deepEqual(await book("CDG", "NRT"), { pnr: "X1", route: "CDG-NRT" });
        throw new Error("fail the atom after the booking");
      }));
    }
    await run.atom(async () => void (await book("CDG", "NRT")));
    assert.equal(keys.length, 1);
    assert.deepEqual((await run.atomAt(1)).actions[0]!.args, ["CDG", "NRT"]);
  });

  test("redacted args never reach the store", async () => {
    const run = await client.run("ts-redact");
    await run.atom(async (atom) => void (await atom.do("api.call", () => '{"ok":true,"token":"sk-live-123"}',
      { args: { q: 1, api_key: "sk-live-123" }, redact: ["/api_key"], redactResult: ["/token"] })));
    const rec = await run.atomAt(1);
    assert.ok(!JSON.stringify(rec.actions).includes("sk-live-123"));
  });

  test("a commit whose answer was lost across a restart is found in the log", async () => {
    const run = await client.run("ts-commit-lost");
    const atom = await run.begin();
    const d = new c.Delta().set("k", new Uint8Array([0, 255])).appendMessage("assistant", "x").addSubgoal("s1", "")
      .set("", "empty key").addPending("p", "t", { b: [1, 2.5], a: null }).setObjective("")
      .appendMessage("assistant", "", undefined, undefined, { toolCalls: [{ id: "c1", name: "search", arguments: { q: "x" } }] })
      .appendMessage("tool", "failed", "search", "c1", { isError: true })
      .appendMessage("user", "", undefined, undefined, { parts: [{ kind: "text", text: "see" }, { kind: "tool_result", call_id: "c1", is_error: false, text: "ok" }] });
    const first = await atom.commit(d);
    const msgs = (await run.state()).messages;
    assert.deepEqual(msgs[1]!.toolCalls, [{ id: "c1", name: "search", arguments: { q: "x" } }]);
    assert.equal(msgs[2]!.isError, true);
    assert.equal(msgs[3]!.parts![1]!.kind, "tool_result");
    await server.kill();
    await server.start();
    assert.deepEqual(await atom.commit(d), first);
    await assert.rejects(atom.commit(new c.Delta().set("k", "other")), c.AttemptLost);
  });

  test("step survives a server kill between an effect and its outcome", async () => {
    const run = await client.run("ts-step-kill");
    const effects: string[] = [];
    let restarted: Promise<unknown> | undefined;
    const out = await run.step(async (atom) => {
      const r = await atom.do("charge", async (k) => {
        effects.push(k);
        if (effects.length === 1) {
          await server.kill();
          restarted = sleep(200).then(() => server.start());
        }
        return "effect";
      });
      atom.delta.set("out", r);
      return dec(r);
    });
    assert.equal(out, "effect");
    assert.equal(effects.length, 1);
    assert.equal((await run.atomAt(1)).actions[0]!.status, "resolved");
    await restarted; // its health poll ends before a later test's kill
  });

  test("a run ends, durably, and takes no more atoms", async () => {
    const run = await client.run("ts-end");
    await run.atom(async (atom) => void atom.delta.set("k", "v"));
    const held = await run.begin();
    await assert.rejects(run.end("completed"), c.RunHeld);
    await held.fail("not this time");
    const info = await run.end("completed", '{"deployed":true}');
    assert.equal(info.status, "completed");
    assert.equal(new TextDecoder().decode(info.result), '{"deployed":true}');
    assert.ok(info.ended instanceof Date);
    assert.equal((await run.end("completed", '{"deployed":true}')).head, info.head);
    await assert.rejects(run.end("failed"), c.RunEnded);
    await assert.rejects(run.atom(async () => undefined), c.RunEnded);
  });

  test("a fork starts from its source's state at the fork point", async () => {
    const src = await client.run("ts-fork-src");
    for (const v of ["1", "2", "3"]) await src.atom(async (atom) => void atom.delta.set("k", v).appendMessage("assistant", "at " + v));
    const fork = await client.fork(src.id, 2, "ts-fork");
    assert.deepEqual([fork.id, fork.opened.parent, fork.opened.forkedAt, fork.opened.lastSeq], ["ts-fork", src.id, 2, 2]);
    for (const seq of [0, 1, 2]) assert.deepEqual({ ...(await fork.state(seq)), run: src.id }, await src.state(seq));
    await assert.rejects(fork.state(3), (e: unknown) => e instanceof c.NotFound && e.code === "atom_not_found");
    await fork.atom(async (atom) => {
      assert.equal((await atom.ready()).seq, 3);
      atom.delta.set("k", "f3");
    });
    assert.deepEqual([c.text(await fork.state(), "k"), c.text(await src.state(), "k")], ["f3", "3"]);
    // A repeat (an answer lost) gives the fork back.
    const again = await client.fork(src.id, 2, fork.id);
    assert.deepEqual([again.opened.created.getTime(), again.opened.lastSeq], [fork.opened.created.getTime(), 3]);
    // A fork of the fork, at its own atom and below its fork point.
    const ff = await client.fork(fork.id, 3, "ts-fork-ff");
    assert.deepEqual([ff.opened.parent, ff.opened.forkedAt], [fork.id, 3]);
    assert.deepEqual({ ...(await ff.state(3)), run: fork.id }, await fork.state(3));
    assert.deepEqual({ ...(await ff.state(1)), run: src.id }, await src.state(1));
    const below = await client.fork(fork.id, 1, "ts-fork-below");
    assert.deepEqual([below.opened.parent, below.opened.forkedAt], [src.id, 1]);
  });

  test("fork errors", async () => {
    const src = await client.run("ts-fork-err");
    await src.atom(async (atom) => void atom.delta.set("k", "v"));
    const other = await client.run("ts-fork-err-other");
    await assert.rejects(client.fork("ts-fork-err-nope", 0, "ts-fork-err-x"), c.RunNotFound);
    await assert.rejects(client.fork(src.id, 2, "ts-fork-err-x"),
      (e: unknown) => e instanceof c.NotFound && e.code === "atom_not_found" && e.field === "at" && e.details.last_seq === 1);
    await assert.rejects(client.fork(src.id, 1, other.id), (e: unknown) => e instanceof c.RunExists && e.field === "id" && e.details.parent === "");
    await client.fork(src.id, 0, "ts-fork-err-f");
    await assert.rejects(client.fork(src.id, 1, "ts-fork-err-f"), c.RunExists); // the same id, another fork point
    await assert.rejects(client.fork(src.id, -1, "ts-fork-err-x"), (e: unknown) => e instanceof c.BadRequest && e.field === "at");
    await assert.rejects(client.fork(src.id, 0.5, "ts-fork-err-x"), (e: unknown) => e instanceof c.BadRequest && e.field === "at");
    await assert.rejects(client.fork(src.id, 0, ""), (e: unknown) => e instanceof c.BadRequest && e.code === "invalid_run_id" && e.field === "id");
    assert.ok(!(await client.runs()).some((r) => r.id === "ts-fork-err-x"));
  });

  test("a fork's repeat of its source's call is answered done, executing nothing; a differing call gets a new key (I10)", async () => {
    const src = await client.run("ts-fork-i10");
    const executed: string[] = [];
    const receipt = await src.atom(async (atom) => {
      const r = await atom.doJSON("billing.charge", (k) => (executed.push(k), { charge: "ch_1", key: k }), { args: { cents: 500, customer: "c1" } });
      await atom.do("mail.send", (k) => (executed.push(k), "sent " + k), { args: { to: "ops" } });
      atom.delta.setJSON("receipt", r);
      return r;
    });
    const srcKeys = [...executed];
    const fork = await client.fork(src.id, 0, "ts-fork-i10-f");
    const out = await fork.atom(async (atom) => {
      const again = await atom.doJSON("billing.charge", () => assert.fail("a certified action must not be executed"), { args: { customer: "c1", cents: 500 } });
      assert.deepEqual(again, receipt);
      return dec(await atom.do("mail.send", (k) => (executed.push(k), "sent " + k), { args: { to: "dev" } }));
    });
    const forkKey = `ck1-${fork.id.length}:${fork.id}:1:1`;
    assert.deepEqual(executed, [...srcKeys, forkKey]);
    assert.ok(!srcKeys.includes(forkKey));
    assert.equal(out, "sent " + forkKey);
    assert.deepEqual((await fork.atomAt(1)).actions.map((a) => a.key), [srcKeys[0], forkKey]);
  });

  test("verify, runs and escaped run ids", async () => {
    for (const id of ["a/b", "spaces and ünïcode", "q?x=1#f"]) {
      const run = await client.run(id);
      await run.atom(async (atom) => void atom.delta.set("id", id));
      assert.equal(c.text(await run.state(), "id"), id);
      assert.equal((await run.info()).id, id);
    }
    const rep = await client.verify({ deep: true });
    assert.equal(rep.ok, true, JSON.stringify(rep));
    assert.ok((await client.runs()).some((r) => r.id === "a/b"));
  });
});
