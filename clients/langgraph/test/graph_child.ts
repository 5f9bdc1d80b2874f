/**
 * A child Node process running a LangGraph.js graph checkpointed by
 * ContinuumSaver, for the tests that SIGKILL it. argv: socket, mode,
 * thread, downstream URL. Prints one line of JSON: the graph's output.
 *
 *   tools   a node that makes two durable calls (charge, then ship) on
 *           the downstream, reconciled by lookup under their keys
 *   ask     a node that interrupt()s for approval, then records the answer
 *   resume  resumes "ask" with Command({resume: "approved"})
 */

import { Annotation, Command, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import { Client, didNotHappen, happened } from "@continuumdb/client";
import { ContinuumSaver, callKey, durableTool } from "../src/index.js";
import { callDownstream, lookupDownstream } from "./downstream.js";

const [socket, mode, thread, url] = process.argv.slice(2);
const client = new Client({ socket: socket!, retryForMs: 20_000 });
const saver = new ContinuumSaver({ client });

const State = Annotation.Root({
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

const reconcile = async (key: string) => {
  const r = await lookupDownstream(url!, key);
  return r === undefined ? didNotHappen() : happened(r);
};
const charge = durableTool(
  tool(async ({ customer, cents }) => callDownstream(url!, "charge", { customer, cents }, callKey()), {
    name: "charge", description: "charge a customer", schema: z.object({ customer: z.string(), cents: z.number() }),
  }),
  { client, reconcile },
);
const ship = durableTool(
  tool(async ({ item }) => callDownstream(url!, "ship", { item }, callKey()), {
    name: "ship", description: "ship an item", schema: z.object({ item: z.string() }),
  }),
  { client, reconcile },
);

async function main(): Promise<unknown> {
  // durability "sync": the checkpoint a task runs from is durable before the task runs,
  // so that a task killed mid-call runs again under the same task id
  const config = { configurable: { thread_id: thread! }, durability: "sync" as const };
  if (mode === "tools") {
    const g = new StateGraph(State)
      .addNode("work", async (_s, cfg) => {
        const a = (await charge.invoke({ customer: "c1", cents: 500 }, cfg)) as { n: number };
        const b = (await ship.invoke({ item: "book" }, cfg)) as { n: number };
        return { log: [`charged#${a.n}`, `shipped#${b.n}`] };
      })
      .addEdge(START, "work")
      .addEdge("work", END)
      .compile({ checkpointer: saver });
    const existing = await g.getState(config);
    // a fresh thread starts; a thread killed mid-run resumes from its checkpoint
    return g.invoke(existing.next.length > 0 ? null : { log: ["start"] }, config);
  }
  const g = new StateGraph(State)
    .addNode("ask", async () => {
      const answer = interrupt({ question: "ship the order?" }) as string;
      return { log: [`answer:${answer}`] };
    })
    .addEdge(START, "ask")
    .addEdge("ask", END)
    .compile({ checkpointer: saver });
  if (mode === "ask") return g.invoke({ log: ["start"] }, config);
  if (mode === "resume") return g.invoke(new Command({ resume: "approved" }), config);
  throw new Error(`unknown mode ${mode}`);
}

main().then(
  (out) => {
    process.stdout.write(JSON.stringify(out) + "\n");
    client.close();
  },
  (e) => {
    process.stderr.write(`${(e as Error).stack ?? e}\n`);
    process.exit(1);
  },
);
