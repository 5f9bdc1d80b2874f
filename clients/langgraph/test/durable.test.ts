// Durable tools: a graph node's tool calls go through the ledger. A child
// Node process is SIGKILLed after a call's effect took place but before
// its answer came back; the graph resumed in a new process does not make
// the call again (its reconcile finds the effect under its key), and a call
// certified before the kill answers its result without executing.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { Server } from "./server.js";
import { Downstream } from "./downstream.js";
import { runChild } from "./child.js";
import { ledgerCall } from "../src/index.js";

let server: Server;
before(async () => {
  server = await new Server().start();
});
after(async () => {
  await server.close();
});

async function killedAt(tool: string, thread: string): Promise<void> {
  const d = await new Downstream().start();
  let child: ChildProcess | undefined;
  d.after = (c) => {
    if (c.tool === tool && d.count(tool) === 1) {
      child!.kill("SIGKILL");
      return false;
    }
  };
  const first = await runChild([server.socket, "tools", thread, d.url], (p) => (child = p));
  assert.equal(first.signal, "SIGKILL", `the child was to be killed in ${tool}: ${first.err}${first.out}`);
  d.after = undefined;
  const second = await runChild([server.socket, "tools", thread, d.url]);
  assert.equal(second.code, 0, second.err);
  const out = JSON.parse(second.out) as { log: string[] };
  assert.deepEqual(out.log, ["start", "charged#1", "shipped#2"]);
  assert.equal(d.count("charge"), 1, "charge took effect once");
  assert.equal(d.count("ship"), 1, "ship took effect once");
  await d.close();
}

test("killed in the first call: in doubt, reconciled under its key, not made again", async () => {
  await killedAt("charge", "t-charge");
});

test("killed in the second call: the first answers its certified result, the second is reconciled", async () => {
  await killedAt("ship", "t-ship");
});

test("in doubt with no effect downstream: reconciled as not happened, made once", async () => {
  const d = await new Downstream().start();
  let child: ChildProcess | undefined;
  // the child dies before its charge reaches the downstream: the ledger has the intent, the downstream nothing
  d.after = (c) => {
    if (c.tool === "charge") {
      d.effects.pop();
      d.byKey.delete(c.key);
      child!.kill("SIGKILL");
      return false;
    }
  };
  const first = await runChild([server.socket, "tools", "t-none", d.url], (p) => (child = p));
  assert.equal(first.signal, "SIGKILL");
  d.after = undefined;
  const second = await runChild([server.socket, "tools", "t-none", d.url]);
  assert.equal(second.code, 0, second.err);
  assert.equal(d.count("charge"), 1);
  assert.equal(d.count("ship"), 1);
  await d.close();
});

test("a call is four requests (open, begin, call, the commit its outcome rides on), its answer once certified two (open, its atom)", async () => {
  const client = server.client();
  // the server's count of requests, without the stats request itself
  const requests = async () => Number(((await client.stats()).server as Record<string, unknown>).requests) - 1;
  let made = 0;
  let before = await requests();
  assert.deepEqual(await ledgerCall(client, "lg-count/t/task", 0, "t", { a: 1 }, async () => (made++, { ok: 1 })), { ok: 1 });
  assert.equal((await requests()) - before - 1, 4);
  before = await requests();
  assert.deepEqual(await ledgerCall(client, "lg-count/t/task", 0, "t", { a: 1 }, async () => (made++, { ok: 2 })), { ok: 1 });
  assert.equal((await requests()) - before - 1, 2);
  assert.equal(made, 1);
  client.close();
});
