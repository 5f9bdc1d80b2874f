// Human in the loop through ContinuumSaver: a graph interrupt()s in one
// Node process; that process exits, the server is SIGKILLed and started
// again on the same store, and a new process resumes the graph with
// Command({resume}): the node completes with the answer, once.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { Client } from "@continuumdb/client";
import { Server } from "./server.js";
import { runChild } from "./child.js";
import { ContinuumSaver } from "../src/index.js";

let server: Server;
before(async () => {
  server = await new Server().start();
});
after(async () => {
  await server.close();
});

test("interrupt, restart the process and the server, resume with Command", async () => {
  const first = await runChild([server.socket, "ask", "hitl-1", ""]);
  assert.equal(first.code, 0, first.err);
  const out1 = JSON.parse(first.out) as Record<string, unknown>;
  assert.deepEqual(out1.log, ["start"]);
  const intr = out1.__interrupt__ as { value: unknown }[];
  assert.ok(Array.isArray(intr) && intr.length === 1, `an interrupt: ${first.out}`);
  assert.deepEqual(intr[0]!.value, { question: "ship the order?" });

  await server.kill();
  await server.start();

  // the interrupt is durable: the latest checkpoint's pending writes hold it
  const client = new Client({ socket: server.socket });
  const t = await new ContinuumSaver({ client }).getTuple({ configurable: { thread_id: "hitl-1" } });
  client.close();
  assert.ok(t, "the thread survived the restart");
  assert.ok(t!.pendingWrites!.some((w) => w[1] === "__interrupt__"), `pending writes: ${JSON.stringify(t!.pendingWrites)}`);

  const second = await runChild([server.socket, "resume", "hitl-1", ""]);
  assert.equal(second.code, 0, second.err);
  const out2 = JSON.parse(second.out) as Record<string, unknown>;
  assert.deepEqual(out2.log, ["start", "answer:approved"]);
  assert.equal(out2.__interrupt__, undefined);
});
