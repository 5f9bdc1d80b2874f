/** The protocol's JSON: bytes as text or NAME_base64, and the decoding of answers. */

export type Bytes = Uint8Array | string;
export type JSONValue = null | boolean | number | string | JSONValue[] | { [k: string]: JSONValue };
export type Obj = Record<string, unknown>;

const utf8 = new TextDecoder("utf-8", { fatal: true });
const enc = new TextEncoder();

export function toBytes(v: Bytes): Uint8Array {
  return typeof v === "string" ? enc.encode(v) : v;
}

/** Sets NAME (UTF-8 text) or NAME_base64 of o, whichever carries v. */
export function putBytes(o: Obj, name: string, v: Bytes): void {
  if (typeof v === "string") {
    o[name] = v;
    return;
  }
  try {
    o[name] = utf8.decode(v);
  } catch {
    o[name + "_base64"] = Buffer.from(v).toString("base64");
  }
}

/** NAME or NAME_base64 of o as bytes; undefined if neither is there. */
export function getBytes(o: Obj, name: string): Uint8Array | undefined {
  const t = o[name];
  if (typeof t === "string") return enc.encode(t);
  const b = o[name + "_base64"];
  if (typeof b === "string") return new Uint8Array(Buffer.from(b, "base64"));
  return undefined;
}

export function getText(o: Obj, name: string): string {
  const b = getBytes(o, name);
  return b === undefined ? "" : new TextDecoder().decode(b);
}

/** A path segment, percent-encoded, slashes included. */
export function seg(s: string): string {
  return encodeURIComponent(s);
}

export interface Lease {
  seq: number;
  expires: Date;
}

export interface RunInfo {
  id: string;
  created: Date;
  lastSeq: number;
  head: string;
  snapshotSeq: number;
  checkpointSeq: number;
  running: number;
  interrupted: number;
  lease: Lease | null;
  /** active, completed, failed or cancelled; ended and result say when and with what it ended. */
  status: string;
  ended: Date | null;
  result?: Uint8Array;
  /** The run this one was forked from ("" and 0: not a fork). */
  parent: string;
  forkedAt: number;
}

/** The erasure of a deleted run: its link (seq, head), when, and why. */
export interface Erasure {
  seq: number;
  head: string;
  at: Date;
  reason: string;
}

/**
 * A deleted run, as its delete or erase record says: the deletion's link
 * (seq is the end's seq + 1, head), the run's head at its end (final),
 * when and why, and its erasure (null if it was only deleted; the same seq
 * when one record deleted and erased it).
 */
export interface DeletedRun {
  id: string;
  seq: number;
  final: string;
  head: string;
  at: Date;
  reason: string;
  erasure: Erasure | null;
}

/** The erasure of one memory key of a run: the run's last seq then, the erasure's link, the data keys it destroyed, when and why. */
export interface ErasedKey {
  run: string;
  key: string;
  seq: number;
  head: string;
  keyNos: number[];
  at: Date;
  reason: string;
}

export interface ActionState {
  index: number;
  fingerprint: string;
  /** in_doubt, done, failed or resolved */
  status: string;
  tool: string;
  key: string;
  idempotent: boolean;
  call?: number;
}

/** The earlier attempt of a seq that ended without commit or fail: reason restart, lease_expired or takeover. */
export interface Interrupted {
  seq: number;
  reason: string;
  actions: ActionState[];
}

/** One message of the frame's conversation (frame.Message). */
export interface Message {
  role: string;
  content: string;
  tool?: string;
  callId?: string;
  /** An assistant's tool calls: {id, name, arguments}. */
  toolCalls?: Obj[];
  /** The content as blocks. */
  parts?: Obj[];
  isError?: boolean;
}

export interface State {
  run: string;
  seq: number;
  objective: string;
  subgoals: { id: string; text: string; status: string }[];
  memory: Map<string, Uint8Array>;
  scratchpad: Uint8Array;
  messages: Message[];
  pending: { callId: string; tool: string; args: unknown; key?: string }[];
}

export interface Committed {
  run: string;
  seq: number;
  head: string;
}

export interface AtomRecord {
  run: string;
  seq: number;
  head: string;
  delta: Obj[];
  actions: Obj[];
}

export function runInfo(o: Obj): RunInfo {
  const lease = o.lease as Obj | null;
  return {
    id: String(o.id),
    created: new Date(String(o.created)),
    lastSeq: Number(o.last_seq),
    head: String(o.head),
    snapshotSeq: Number(o.snapshot_seq),
    checkpointSeq: Number(o.checkpoint_seq),
    running: Number(o.running),
    interrupted: Number(o.interrupted),
    lease: lease ? { seq: Number(lease.seq), expires: new Date(String(lease.expires)) } : null,
    status: String(o.status ?? "active"),
    ended: o.ended ? new Date(String(o.ended)) : null,
    ...(getBytes(o, "result") !== undefined ? { result: getBytes(o, "result")! } : {}),
    parent: String(o.parent ?? ""),
    forkedAt: Number(o.forked_at ?? 0),
  };
}

export function deletedRun(o: Obj): DeletedRun {
  const e = o.erasure as Obj | null;
  return {
    id: String(o.id),
    seq: Number(o.seq),
    final: String(o.final),
    head: String(o.head),
    at: new Date(String(o.at)),
    reason: String(o.reason),
    erasure: e ? { seq: Number(e.seq), head: String(e.head), at: new Date(String(e.at)), reason: String(e.reason) } : null,
  };
}

export function erasedKey(o: Obj): ErasedKey {
  return {
    run: String(o.run),
    key: String(o.key),
    seq: Number(o.seq),
    head: String(o.head),
    keyNos: (o.key_nos as unknown[]).map(Number),
    at: new Date(String(o.at)),
    reason: String(o.reason),
  };
}

export function interrupted(o: unknown): Interrupted | null {
  if (!o || typeof o !== "object") return null;
  const x = o as Obj;
  return {
    seq: Number(x.seq),
    reason: String(x.reason),
    actions: ((x.actions as Obj[] | undefined) ?? []).map((a) => ({
      index: Number(a.index),
      fingerprint: String(a.fingerprint),
      status: String(a.status),
      tool: String(a.tool),
      key: String(a.key),
      idempotent: Boolean(a.idempotent),
      ...(a.call !== undefined ? { call: Number(a.call) } : {}),
    })),
  };
}

export function state(o: Obj): State {
  const memory = new Map<string, Uint8Array>();
  for (const [k, v] of Object.entries((o.memory as Obj | undefined) ?? {})) memory.set(k, enc.encode(String(v)));
  for (const [k, v] of Object.entries((o.memory_base64 as Obj | undefined) ?? {})) memory.set(k, new Uint8Array(Buffer.from(String(v), "base64")));
  return {
    run: String(o.run),
    seq: Number(o.seq),
    objective: getText(o, "objective"),
    subgoals: ((o.subgoals as Obj[] | undefined) ?? []).map((s) => ({ id: getText(s, "id"), text: getText(s, "text"), status: String(s.status) })),
    memory,
    scratchpad: getBytes(o, "scratchpad") ?? new Uint8Array(),
    messages: ((o.messages as Obj[] | undefined) ?? []).map((m) => {
      const msg: Message = { role: String(m.role), content: getText(m, "content") };
      const tool = getText(m, "tool");
      const callId = getText(m, "call_id");
      if (tool) msg.tool = tool;
      if (callId) msg.callId = callId;
      if (Array.isArray(m.tool_calls)) msg.toolCalls = m.tool_calls as Obj[];
      if (Array.isArray(m.parts)) msg.parts = m.parts as Obj[];
      if (m.is_error === true) msg.isError = true;
      return msg;
    }),
    pending: ((o.pending as Obj[] | undefined) ?? []).map((p) => {
      const key = getText(p, "key");
      return { callId: getText(p, "call_id"), tool: getText(p, "tool"), args: p.args, ...(key ? { key } : {}) };
    }),
  };
}

/** The memory value under key as text, or JSON. */
export function text(s: State, key: string): string | undefined {
  const v = s.memory.get(key);
  return v === undefined ? undefined : new TextDecoder().decode(v);
}

export function json(s: State, key: string): unknown {
  const t = text(s, key);
  return t === undefined ? undefined : JSON.parse(t);
}

export function committed(o: Obj): Committed {
  return { run: String(o.run), seq: Number(o.seq), head: String(o.head) };
}

export function atomRecord(o: Obj): AtomRecord {
  return { run: String(o.run), seq: Number(o.seq), head: String(o.head), delta: o.delta as Obj[], actions: o.actions as Obj[] };
}

/** The server leaves out what is empty: "", false, null, [] (an empty key or subgoal text, is_error false, no tool calls), in parts too. */
function prune(v: unknown): any {
  if (Array.isArray(v)) return v.map(prune);
  if (v && typeof v === "object") {
    const o: Obj = {};
    for (const [k, x] of Object.entries(v)) {
      if (x === "" || x === false || x === null || (Array.isArray(x) && x.length === 0)) continue;
      o[k] = prune(x);
    }
    return o;
  }
  return v;
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  if (v && typeof v === "object") {
    return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canonical((v as Obj)[k])).join(",") + "}";
  }
  return JSON.stringify(v);
}

/** Whether the ops a commit sent are those the store holds (as JSON values; the server writes bytes as text or base64 and leaves out what is empty). */
export function sameDelta(sent: Obj[], stored: Obj[]): boolean {
  const norm = (ops: Obj[]) =>
    ops.map((op) => {
      const o: Obj = { ...op };
      for (const name of ["value", "content"]) {
        const b = getBytes(o, name);
        delete o[name + "_base64"];
        if (b !== undefined) o[name] = Buffer.from(b).toString("base64");
      }
      return prune(o);
    });
  return canonical(norm(sent)) === canonical(norm(stored));
}
