/**
 * A LangGraph.js ReAct agent checkpointed by ContinuumSaver, whose tools
 * have real side effects, kept exactly once across crashes by durableTool.
 *
 * The model is scripted (no network): a travel agent that books a flight,
 * charges the card, and emails the receipt, one tool call per step, then
 * answers. The "downstream" is a file of effects (one JSON line per
 * effect, fsynced) that the tools append to under their idempotency key;
 * reconcile looks a key up in it.
 *
 *     node dist/examples/react_agent.js SOCKET THREAD EFFECTS_FILE
 *
 * Kill it anywhere (SIGKILL) and run it again with the same arguments: it
 * resumes from its last checkpoint, and every effect is in the file once.
 * CRASH_AT=n makes it SIGKILL itself at its n-th crash point (before or
 * after an effect, between steps), as the example's test does.
 */

import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from "node:fs";
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { z } from "zod";
import { Client, didNotHappen, happened } from "@continuumdb/client";
import { ContinuumSaver, callKey, durableTool } from "../src/index.js";

const [socket, thread, effectsFile] = process.argv.slice(2);
if (!socket || !thread || !effectsFile) {
  process.stderr.write("usage: react_agent SOCKET THREAD EFFECTS_FILE\n");
  process.exit(2);
}

let points = 0;
const crashAt = Number(process.env.CRASH_AT ?? 0);
/** A place where the process may die: CRASH_AT=n kills it at the n-th. */
function crashPoint(): void {
  points++;
  if (crashAt && points === crashAt) process.kill(process.pid, "SIGKILL");
}

// ---- the downstream: a file of effects ----------------------------------

interface Effect {
  key: string;
  tool: string;
  args: unknown;
  result: unknown;
}

function effects(): Effect[] {
  if (!existsSync(effectsFile!)) return [];
  return readFileSync(effectsFile!, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as Effect);
}

function effect(toolName: string, args: unknown, result: unknown): unknown {
  crashPoint(); // before the effect
  const fd = openSync(effectsFile!, "a");
  writeSync(fd, JSON.stringify({ key: callKey(), tool: toolName, args, result }) + "\n");
  fsyncSync(fd);
  closeSync(fd);
  crashPoint(); // after the effect, before its answer reached the ledger
  return result;
}

const client = new Client({ socket, retryForMs: 30_000 });
const reconcile = (key: string) => {
  const e = effects().find((x) => x.key === key);
  return e ? happened(e.result) : didNotHappen();
};

const tools = [
  tool(async ({ from, to }) => effect("book_flight", { from, to }, { booking: `BK-${from}-${to}` }), {
    name: "book_flight", description: "Book a flight", schema: z.object({ from: z.string(), to: z.string() }),
  }),
  tool(async ({ cents }) => effect("charge_card", { cents }, { charge: `CH-${cents}` }), {
    name: "charge_card", description: "Charge the customer's card", schema: z.object({ cents: z.number() }),
  }),
  tool(async ({ to, body }) => effect("send_email", { to, body }, { sent: true }), {
    name: "send_email", description: "Email the customer", schema: z.object({ to: z.string(), body: z.string() }),
  }),
].map((t) => durableTool(t, { client, reconcile }));

// ---- the scripted model -------------------------------------------------

const script = [
  { name: "book_flight", args: { from: "CDG", to: "NRT" } },
  { name: "charge_card", args: { cents: 84_000 } },
  { name: "send_email", args: { to: "ada@example.com", body: "Your flight CDG-NRT is booked." } },
];

function model(messages: BaseMessage[]): AIMessage {
  const step = messages.filter((m) => m.getType() === "ai").length;
  const next = script[step];
  if (!next) return new AIMessage("Booked, charged and emailed: have a good trip.");
  return new AIMessage({ content: "", tool_calls: [{ id: `call_${step}`, name: next.name, args: next.args, type: "tool_call" }] });
}

const graph = new StateGraph(MessagesAnnotation)
  .addNode("agent", async (s) => {
    crashPoint();
    return { messages: [model(s.messages)] };
  })
  .addNode("tools", new ToolNode(tools))
  .addEdge(START, "agent")
  .addConditionalEdges("agent", (s) => ((s.messages.at(-1) as AIMessage).tool_calls?.length ? "tools" : END))
  .addEdge("tools", "agent")
  .compile({ checkpointer: new ContinuumSaver({ client }) });

async function main(): Promise<void> {
  // durability "sync": a step's checkpoint is durable before the next step runs
  const config = { configurable: { thread_id: thread! }, durability: "sync" as const };
  const state = await graph.getState(config);
  const input = state.values.messages?.length ? null : { messages: [new HumanMessage("Book me CDG to NRT and send the receipt.")] };
  if (input === null && state.next.length === 0) {
    process.stdout.write(JSON.stringify({ done: true, answer: (state.values.messages.at(-1) as BaseMessage).content }) + "\n");
    return;
  }
  const out = await graph.invoke(input, config);
  process.stdout.write(JSON.stringify({ done: true, answer: out.messages.at(-1)!.content }) + "\n");
}

main().then(
  () => client.close(),
  (e) => {
    process.stderr.write(`${(e as Error).stack ?? e}\n`);
    process.exitCode = 1;
    client.close();
  },
);
