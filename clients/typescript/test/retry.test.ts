// Durable retries over the wire: a call with a retry policy is executed
// again after a failure, under the same key, after its backoff; the count
// and the schedule survive the server SIGKILLed during a backoff and
// during an attempt; an action given up throws GaveUp, again after a
// restart, without executing.

import assert from "node:assert/strict";
import { after, test } from "node:test";
import * as c from "../src/index.js";
import { Server, sleep } from "./harness.js";

/** A tool that fails its first `failures` executions; onCall(i) runs before execution i (1-based) answers. */
function flaky(failures: number, onCall?: (i: number) => Promise<void> | void) {
  const keys: string[] = [];
  const times: number[] = [];
  const exec = async (key: string): Promise<Uint8Array> => {
    keys.push(key);
    times.push(performance.now());
    if (onCall) await onCall(keys.length);
    if (keys.length <= failures) throw new Error(`503 on execution ${keys.length}`);
    return new TextEncoder().encode('"posted"');
  };
  return { exec, keys, times };
}

async function server(): Promise<Server> {
  const s = await new Server().start();
  after(() => s.close());
  return s;
}

test("a failed execution is retried under the same key after the backoff", async () => {
  const s = await server();
  const client = s.client(60_000);
  after(() => client.close());
  const t = flaky(2);
  const run = await client.run("r");
  const out = await run.step((atom) => atom.do("http.post", t.exec, { args: { u: 1 }, idempotent: true, retry: { maxAttempts: 4, initialMs: 50, multiplier: 2 } }));
  assert.equal(new TextDecoder().decode(out), '"posted"');
  assert.equal(t.keys.length, 3);
  assert.equal(new Set(t.keys).size, 1);
  assert.ok(t.times[1]! - t.times[0]! >= 50, "first backoff not waited");
  assert.ok(t.times[2]! - t.times[1]! >= 100, "second backoff not waited");
});

test("the server SIGKILLed during a backoff: the count and the wait go on", async () => {
  const s = await server();
  const client = s.client(60_000);
  after(() => client.close());
  const backoff = 1500;
  // The restart is awaited before the test goes on: a start still polling
  // for health when the server is next killed would reject.
  let restarted: Promise<unknown> | undefined;
  const t = flaky(1, (i) => {
    if (i === 1) {
      restarted = (async () => {
        await sleep(300);
        await s.kill();
        await s.start();
      })();
    }
  });
  const run = await client.run("k");
  const out = await run.step((atom) => atom.do("http.post", t.exec, { args: { u: 3 }, idempotent: true, retry: { maxAttempts: 3, initialMs: backoff } }));
  await restarted;
  assert.equal(new TextDecoder().decode(out), '"posted"');
  assert.equal(t.keys.length, 2, `executions ${t.keys}`);
  assert.ok(t.times[1]! - t.times[0]! >= backoff - 50, "the backoff was reset by the restart");
});

test("the server SIGKILLed during an attempt: it counts, and the action is given up once", async () => {
  const s = await server();
  const client = s.client(60_000);
  after(() => client.close());
  let restarted: Promise<unknown> | undefined;
  const t = flaky(100, async (i) => {
    if (i === 2) {
      await s.kill();
      restarted = s.start();
    }
  });
  const retry = { maxAttempts: 2, initialMs: 10 };
  const run = await client.run("d");
  await assert.rejects(
    run.step((atom) => atom.do("http.post", t.exec, { args: { u: 4 }, idempotent: true, retry })),
    (e: unknown) => e instanceof c.GaveUp && e.attempts === 2 && e.reason === "attempts exhausted",
  );
  assert.equal(t.keys.length, 2);
  await restarted; // its health poll must end before this kill
  await s.kill();
  await s.start();
  await assert.rejects(
    run.step((atom) => atom.do("http.post", t.exec, { args: { u: 4 }, idempotent: true, retry })),
    (e: unknown) => e instanceof c.GaveUp,
  );
  assert.equal(t.keys.length, 2, "executed after it was given up");
});
