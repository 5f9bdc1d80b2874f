// The README's quick start, compiled with the package (npm run build):
// a graph checkpointed by ContinuumSaver whose node charges a customer
// through a durable tool. Run it with continuumd serving ./agent-store:
//
//	continuumd --store ./agent-store &
//	node dist/examples/quickstart.js
//
// An application imports "@continuumdb/langgraph-checkpoint" where this
// file imports "../src/index.js".
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import { Client, didNotHappen, happened } from "@continuumdb/client";
import { ContinuumSaver, callKey, durableTool } from "../src/index.js";

// A stand-in for a billing API that honours idempotency keys.
const charges = new Map<string, { id: string; cents: number }>();
const billing = {
  charge: async (cents: number, o: { idempotencyKey: string }) => {
    const c = charges.get(o.idempotencyKey) ?? { id: `ch_${charges.size + 1}`, cents };
    charges.set(o.idempotencyKey, c);
    return c;
  },
  lookup: async (key: string) => charges.get(key),
};

const client = new Client({ socket: "./agent-store.sock" }); // continuumd --store ./agent-store
const charge = durableTool(
  tool(async ({ cents }) => billing.charge(cents, { idempotencyKey: callKey() }), {
    name: "charge", description: "charge the customer", schema: z.object({ cents: z.number() }),
  }),
  { client, reconcile: async (key) => { const c = await billing.lookup(key); return c ? happened(c) : didNotHappen(); } },
);
const State = Annotation.Root({ log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });
const workflow = new StateGraph(State)
  .addNode("pay", async (_s, config) => {
    const c = (await charge.invoke({ cents: 500 }, config)) as { id: string };
    return { log: [`charged ${c.id}`] };
  })
  .addEdge(START, "pay")
  .addEdge("pay", END);
const graph = workflow.compile({ checkpointer: new ContinuumSaver({ client }) });
// durability "sync": the checkpoint a task runs from is durable before the
// task runs, so that a task killed mid-call runs again under the same id.
const out = await graph.invoke({ log: ["start"] }, { configurable: { thread_id: "trip-42" }, durability: "sync" });
console.log(JSON.stringify(out));
client.close();
