// Durable tools when a task runs again in the same process: a node that
// fails after its calls and is retried by its retryPolicy, or invoked
// again after the failure, answers the calls it made from the ledger:
// each effect takes place once (calls are numbered per attempt of the
// task, from 0, as LangGraph numbers its interrupts).
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import type { RunnableConfig } from "@langchain/core/runnables";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import { Server } from "./server.js";
import { ContinuumSaver, durableTool } from "../src/index.js";

let server: Server;
before(async () => {
  server = await new Server().start();
});
after(async () => {
  await server.close();
});

const State = Annotation.Root({
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

/** A graph whose node makes two durable calls (charge, ship), then fails its first `failures` attempts. */
function graph(failures: number, retry: boolean, passConfig: boolean) {
  const client = server.client();
  const effects = { charge: 0, ship: 0 };
  const charge = durableTool(
    tool(async ({ cents }) => ({ n: ++effects.charge, cents }), {
      name: "charge", description: "charge", schema: z.object({ cents: z.number() }),
    }),
    { client },
  );
  const ship = durableTool(
    tool(async ({ item }) => ({ n: ++effects.ship, item }), {
      name: "ship", description: "ship", schema: z.object({ item: z.string() }),
    }),
    { client },
  );
  let attempts = 0;
  const work = async (_s: unknown, cfg: RunnableConfig) => {
    const a = (await (passConfig ? charge.invoke({ cents: 5 }, cfg) : charge.invoke({ cents: 5 }))) as { n: number };
    const b = (await (passConfig ? ship.invoke({ item: "book" }, cfg) : ship.invoke({ item: "book" }))) as { n: number };
    if (++attempts <= failures) throw new Error(`attempt ${attempts} fails after its calls`);
    return { log: [`charged#${a.n}`, `shipped#${b.n}`] };
  };
  const g = new StateGraph(State)
    .addNode("work", work, retry ? { retryPolicy: { maxAttempts: failures + 1, initialInterval: 1, jitter: false, logWarning: false } } : {})
    .addEdge(START, "work")
    .addEdge("work", END)
    .compile({ checkpointer: new ContinuumSaver({ client }) });
  return { g, effects, attempts: () => attempts };
}

for (const passConfig of [true, false]) {
  const how = passConfig ? "the node's config passed" : "no config passed";
  test(`retried by its retryPolicy (${how}): each call made once`, async () => {
    const { g, effects, attempts } = graph(2, true, passConfig);
    const config = { configurable: { thread_id: `retry-${passConfig}` } };
    const out = await g.invoke({ log: ["start"] }, config);
    assert.equal(attempts(), 3);
    assert.deepEqual(out.log, ["start", "charged#1", "shipped#1"]);
    assert.deepEqual(effects, { charge: 1, ship: 1 });
  });

  test(`invoked again after it failed (${how}): each call made once`, async () => {
    const { g, effects, attempts } = graph(1, false, passConfig);
    const config = { configurable: { thread_id: `again-${passConfig}` } };
    await assert.rejects(g.invoke({ log: ["start"] }, config), /attempt 1 fails/);
    const out = await g.invoke(null, config);
    assert.equal(attempts(), 2);
    assert.deepEqual(out.log, ["start", "charged#1", "shipped#1"]);
    assert.deepEqual(effects, { charge: 1, ship: 1 });
  });
}
