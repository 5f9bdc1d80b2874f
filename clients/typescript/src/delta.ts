/** Delta: the change an atom makes to its run's frame. */

import { type Bytes, type Obj, putBytes } from "./wire.js";

const statuses = ["open", "active", "done", "failed", "abandoned"];
const roles = ["system", "user", "assistant", "tool"];

/**
 * An ordered list of ops, built by chaining:
 *
 *     new Delta().setObjective("deploy").addSubgoal("s1", "back up the db")
 *
 * The ops are the engine's frame.Delta ops in the protocol's JSON
 * ({@link Delta.ops}); whether they apply to the frame is checked at commit.
 */
export class Delta {
  #ops: Obj[] = [];

  /** The ops as a commit sends them (a copy). */
  get ops(): Obj[] {
    return this.#ops.map((o) => ({ ...o }));
  }

  get length(): number {
    return this.#ops.length;
  }

  #add(op: Obj): this {
    this.#ops.push(op);
    return this;
  }

  setObjective(text: string): this {
    return this.#add({ op: "set_objective", text });
  }

  addSubgoal(id: string, text: string): this {
    if (!id) throw new RangeError("a subgoal id must not be empty");
    return this.#add({ op: "add_subgoal", id, text });
  }

  setSubgoalStatus(id: string, status: string): this {
    if (!statuses.includes(status)) throw new RangeError(`subgoal status ${JSON.stringify(status)}: one of ${statuses.join(", ")}`);
    return this.#add({ op: "set_subgoal_status", id, status });
  }

  /** Working memory: store value (bytes, or text stored as UTF-8). */
  set(key: string, value: Bytes): this {
    const op: Obj = { op: "set", key };
    putBytes(op, "value", value);
    return this.#add(op);
  }

  /** Working memory: store value as JSON (read it with json(state, key)). */
  setJSON(key: string, value: unknown): this {
    return this.set(key, JSON.stringify(value));
  }

  delete(key: string): this {
    return this.#add({ op: "delete", key });
  }

  appendScratch(data: Bytes): this {
    const op: Obj = { op: "append_scratch" };
    putBytes(op, "value", data);
    return this.#add(op);
  }

  clearScratch(): this {
    return this.#add({ op: "clear_scratch" });
  }

  /**
   * A message of the conversation. opts.toolCalls are an assistant's
   * {id, name, arguments} (OpenAI's tool_calls); opts.parts are content
   * blocks {kind: "text" | "tool_call" | "tool_result" | "json", ...}
   * (Anthropic's), instead of content; opts.isError marks a tool message
   * reporting a failure. frame.Message has the rules.
   */
  appendMessage(role: string, content = "", tool?: string, callId?: string, opts: { toolCalls?: Obj[]; parts?: Obj[]; isError?: boolean } = {}): this {
    if (!roles.includes(role)) throw new RangeError(`role ${JSON.stringify(role)}: one of ${roles.join(", ")}`);
    const op: Obj = { op: "append_message", role, content };
    if (tool) op.tool = tool;
    if (callId) op.call_id = callId;
    if (opts.toolCalls?.length) op.tool_calls = opts.toolCalls.map((c) => ({ ...c }));
    if (opts.parts?.length) op.parts = opts.parts.map((p) => ({ ...p }));
    if (opts.isError) op.is_error = true;
    return this.#add(op);
  }

  addPending(callId: string, tool: string, args?: unknown, key?: string): this {
    if (!callId) throw new RangeError("a pending call id must not be empty");
    const op: Obj = { op: "add_pending", call_id: callId, tool };
    if (args !== undefined) op.args = args;
    if (key) op.key = key;
    return this.#add(op);
  }

  /** A tool message with the output, removing the pending call. */
  toolOutput(callId: string, tool: string, output: string): this {
    return this.#add({ op: "tool_output", call_id: callId, tool, content: output });
  }

  removePending(callId: string): this {
    return this.#add({ op: "remove_pending", call_id: callId });
  }

  /** Drop the n oldest messages (context compaction). */
  dropMessages(n: number): this {
    if (!Number.isInteger(n) || n < 0) throw new RangeError("dropMessages takes a count >= 0");
    return this.#add({ op: "drop_messages", count: n });
  }
}
