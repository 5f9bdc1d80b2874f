/**
 * durableTool: a LangChain.js tool whose calls go through continuumd's
 * exactly-once ledger.
 *
 * A graph node's task has an id LangGraph derives from the checkpoint it
 * runs on (config.configurable.__pregel_task_id): after a crash the graph
 * resumes from that checkpoint and runs the task again under the same id.
 * The wrapper keeps, per (thread, namespace, task), a run of the store
 * whose atom k+1 is the task's k-th durable call: an action of the ledger
 * (tool name, args), committed once it is done. When the task runs again,
 * a call already committed answers its certified result without running
 * the tool; the one that was in flight when the process died answers
 * in_doubt, which `reconcile` settles (happened(result) or didNotHappen())
 * or which is thrown as InDoubt; a tool declared idempotent runs again
 * under the same idempotency key (callKey() inside the tool reads it).
 *
 * Calls of one task are numbered in the order they start, as the ledger
 * numbers an atom's calls, from 0 in each attempt of the task: each time
 * LangGraph prepares it (an invoke or stream, in this process or after a
 * restart) and each retry of its retryPolicy, as LangGraph numbers a
 * task's interrupts. So a task that runs again, for whatever reason,
 * answers the calls it already made from the ledger. A task must make its
 * durable calls in the same order each time it runs (ToolNode does, for
 * the tool calls of one message). Calls of one task are serialized.
 */

import { DynamicStructuredTool, type StructuredToolInterface } from "@langchain/core/tools";
import type { RunnableConfig } from "@langchain/core/runnables";
import { AsyncLocalStorage } from "node:async_hooks";
import { Client, InDoubt, type Verdict } from "@continuumdb/client";

const keys = new AsyncLocalStorage<string>();

/** Inside a durable tool: the idempotency key of the call, to pass to the downstream. */
export function callKey(): string {
  const k = keys.getStore();
  if (k === undefined) throw new Error("callKey: not inside a durable tool's call");
  return k;
}

export interface DurableToolOptions {
  client: Client;
  /** Asks the downstream whether an in-doubt call took effect under its key. */
  reconcile?: (key: string, args: unknown) => Verdict<unknown> | Promise<Verdict<unknown>>;
  /** The downstream honours the idempotency key: an in-doubt call runs again under it. */
  idempotent?: boolean;
  /** The prefix of the runs that hold the calls (default "lg-tools"). */
  prefix?: string;
}

const enc = encodeURIComponent;
const chains = new Map<string, Promise<unknown>>();

/** The count of durable calls one attempt of a task has started. */
interface Attempt {
  calls: number;
}

// The attempts of each prepared task: LangGraph gives a task it prepares
// (each invoke or stream) a scratchpad of its own, kept across the retries
// of its retryPolicy, which it counts in config.executionInfo.nodeAttempt.
// Weak: a task's counts go with its scratchpad.
const attemptsByPad = new WeakMap<object, Map<number, Attempt>>();
// Without a scratchpad (a LangGraph that has none), per task for the
// process: a retry in the same process is numbered on.
const attemptsByRun = new Map<string, Attempt>();

function attemptOf(config: RunnableConfig | undefined, runId: string): Attempt {
  const pad = (config?.configurable as Record<string, unknown> | undefined)?.__pregel_scratchpad;
  if (typeof pad !== "object" || pad === null) {
    let a = attemptsByRun.get(runId);
    if (!a) attemptsByRun.set(runId, (a = { calls: 0 }));
    return a;
  }
  const info = (config as { executionInfo?: { nodeAttempt?: unknown } }).executionInfo;
  const n = typeof info?.nodeAttempt === "number" ? info.nodeAttempt : 1;
  let byAttempt = attemptsByPad.get(pad);
  if (!byAttempt) attemptsByPad.set(pad, (byAttempt = new Map()));
  let a = byAttempt.get(n);
  if (!a) byAttempt.set(n, (a = { calls: 0 }));
  return a;
}

/** The run that holds the durable calls of the task config belongs to. */
export function taskRun(config: RunnableConfig | undefined, prefix = "lg-tools"): string {
  const c = config?.configurable ?? {};
  const thread = c.thread_id;
  const task = c.__pregel_task_id;
  if (typeof thread !== "string" || typeof task !== "string" || !thread || !task) {
    throw new Error("durableTool: called outside a graph node of a checkpointed graph (no thread_id or task id in the config)");
  }
  return `${prefix}/${enc(thread)}/${enc(String(c.checkpoint_ns ?? ""))}/${enc(task)}`;
}

/**
 * The k-th durable call of the task whose run is runId: the certified
 * result of a call already made, or the action made now through the
 * ledger (executed at most once, in doubt after a crash unless reconciled).
 */
export async function ledgerCall<T>(client: Client, runId: string, k: number, tool: string, args: unknown, execute: () => Promise<T>, o: Omit<DurableToolOptions, "client" | "prefix"> = {}): Promise<T> {
  const run = await client.run(runId); // its answer is the run's info: lastSeq says which calls are certified
  if (k + 1 <= run.opened.lastSeq) {
    const rec = await run.atomAt(k + 1);
    const a = rec.actions[0] as Record<string, unknown> | undefined;
    if (!a || a.tool !== tool) {
      throw new Error(`durableTool: run ${runId} call ${k} was ${JSON.stringify(a?.tool)}, now ${JSON.stringify(tool)}: the task's durable calls changed order`);
    }
    if (a.status !== "done" && a.status !== "resolved") throw new Error(`durableTool: run ${runId} call ${k} (${tool}) is ${String(a.status)}${a.error ? ": " + String(a.error) : ""}`);
    const text = typeof a.result === "string" ? a.result : Buffer.from(String(a.result_base64 ?? ""), "base64").toString("utf8");
    return (text ? JSON.parse(text) : null) as T;
  }
  const atom = await run.begin({ takeover: true });
  if (atom.seq !== k + 1) {
    atom.stop();
    throw new Error(`durableTool: run ${runId} begins seq ${atom.seq} for call ${k}: the task's calls are out of step`);
  }
  let out: T;
  try {
    out = await atom.doJSON<T>(tool, (key) => keys.run(key, execute), {
      args,
      idempotent: o.idempotent ?? false,
      ...(o.reconcile ? { reconcile: (key: string) => o.reconcile!(key, args) } : {}),
    });
  } catch (e) {
    atom.stop();
    throw e;
  }
  await atom.commit();
  return out;
}

/**
 * Wraps tool: the same name, description and schema; each call made inside
 * a graph node goes through the ledger (see the file's comment). The
 * tool's result must be a JSON value.
 */
export function durableTool<T extends StructuredToolInterface>(tool: T, o: DurableToolOptions): DynamicStructuredTool {
  const prefix = o.prefix ?? "lg-tools";
  return new DynamicStructuredTool({
    name: tool.name,
    description: tool.description,
    schema: tool.schema as any,
    func: async (input: unknown, _runManager?: unknown, config?: RunnableConfig) => {
      const runId = taskRun(config, prefix);
      const attempt = attemptOf(config, runId);
      const prev = chains.get(runId) ?? Promise.resolve();
      const call = prev.then(async () => {
        const k = attempt.calls++;
        try {
          return await ledgerCall(o.client, runId, k, tool.name, input, async () => {
            const r = await tool.invoke(input as any);
            return typeof r === "object" && r !== null && "content" in (r as object) && (r as any).lc_serializable ? (r as any).content : r;
          }, o);
        } catch (e) {
          // the call was not committed: the task's next call in this
          // attempt makes it again, as call k
          if (attempt.calls === k + 1) attempt.calls = k;
          if (e instanceof InDoubt && !o.reconcile && !o.idempotent) {
            e.message += `. In durableTool (run ${runId}): give it a reconcile, which asks the downstream under this key and returns happened(result) or didNotHappen(), or declare the tool idempotent if the downstream honours the key; then invoke the graph again`;
          }
          throw e;
        }
      });
      const tail = call.catch(() => undefined);
      chains.set(runId, tail);
      // the chain of a task with no call waiting is forgotten
      void tail.then(() => {
        if (chains.get(runId) === tail) chains.delete(runId);
      });
      return call;
    },
  } as any);
}
