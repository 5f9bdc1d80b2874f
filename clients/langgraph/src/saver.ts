/**
 * ContinuumSaver: LangGraph.js's BaseCheckpointSaver over continuumd.
 *
 * Layout in the store. A thread (thread_id, checkpoint_ns) is a set of
 * runs named `${prefix}/${enc(thread_id)}/${enc(ns)}/${branch}`: its
 * first checkpoint creates one, and a checkpoint put on a parent that is
 * not the newest checkpoint of its run forks that run at the parent's seq
 * (continuumd's fork), so the history of a thread is a tree of runs as
 * LangGraph's is a tree of checkpoints. Each checkpoint is one atom; its
 * frame (the run's working memory at that seq) is the checkpoint:
 *
 *   cp                 the checkpoint record: id, parent, the run it was
 *                      put in, its seq and metadata, the checkpoint
 *                      without channel_values
 *   c/<ch>             a channel's value (serde-typed)
 *   n/<ch>, a/<ch>/<i> a channel whose value is an array: its length and
 *                      its items one key each, so that an appended message
 *                      is one new key, never the list again
 *   top                the greatest checkpoint id of the lineage (latest)
 *   i/<id>             the index entry of checkpoint id: its run, seq,
 *                      parent, metadata, and once its run has moved on
 *                      the last seq of its stretch (end)
 *   w/<id>/<task>/<i>  a pending write of the run's newest checkpoint (its
 *                      own atom); the run's next checkpoint deletes them,
 *                      so they stay readable at the stretch's end seq
 *   lw/<id>/<task>/<i> a pending write made after its checkpoint's run
 *                      moved on (kept)
 *
 * Reads. A thread is read with GET /v1/heads (the newest frames of the
 * runs of its id prefix, one request): its runs, their last seqs, and
 * each run's record, top, channels and writes; a record that heads its own
 * run is its checkpoint's index entry too, so the latest checkpoint in a
 * new process is that one request. Other reads go through GET .../read
 * (chosen memory keys of a frame at a seq, a range of atoms): a
 * checkpoint by id reads its record, its channels, its index entry and its
 * own writes, never the index of the whole thread or other checkpoints'
 * writes; list reads the index and replays a run from its atoms (one
 * request per 2048 atoms). Values are decoded by the serializer, except
 * that the JSON of LangGraph's JsonPlusSerializer (the default) is revived
 * by fastLoad (./revive.ts) when it is plain JSON and LangChain messages:
 * the same values, without @langchain/core's load per message.
 *
 * Writes. A run's working memory holds the channels, the index and the
 * newest checkpoint's writes only, so a put costs the same at turn 300 as
 * at turn 1 save for the index entry per checkpoint. A put, and a
 * putWrites, is one request with no read before it: a begin that carries
 * its commit and the seq the saver expects (its own last commit's + 1);
 * another seq (the run was written by another process) reads the thread
 * again and puts once more.
 *
 * An atom's delta holds only what changed: the channels of newVersions
 * whose value differs from the parent's, an array's new tail, the deletes
 * of channels the checkpoint no longer has and of the previous
 * checkpoint's writes, its record and index entry.
 *
 * One saver (one process) writes a thread at a time: the saver caches the
 * runs of the threads it touched; a thread written meanwhile by another
 * process is read again when an id is not found.
 */

import { randomBytes } from "node:crypto";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
  TASKS,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  copyCheckpoint,
  getCheckpointId,
  maxChannelVersion,
  writesSortKey,
} from "@langchain/langgraph-checkpoint";
import { APIError, Client, Conflict, Delta, type ConnectOptions, type Run } from "@continuumdb/client";
import { JsonPlusSerializer } from "@langchain/langgraph-checkpoint";
import { SLOW, fastLoad } from "./revive.js";

type Obj = Record<string, unknown>;

/** A channel as a frame holds it: one encoded value, or encoded items. */
type Stored = { kind: "v"; data: string } | { kind: "a"; items: string[]; raw?: unknown[] };

/** The index entry of one checkpoint. */
interface Entry {
  run: string;
  seq: number;
  parent: string | undefined;
  md: string; // encoded metadata
  end: number | undefined; // the last seq of its stretch, once its run has a next checkpoint
}

/** A checkpoint's frame as far as the saver reads it: record and channels. */
interface CpView {
  record: CpRecord | undefined;
  channels: Map<string, Stored>;
}

/** The newest state of a run: its checkpoint, lineage's top, and the writes of its newest checkpoint (by key). */
interface Head extends CpView {
  top: string | undefined;
  writes: Map<string, WriteRec>;
}

interface CpRecord {
  id: string;
  parent?: string;
  run?: string; // the run it was put in
  cp: string; // encoded checkpoint without channel_values
  md?: string; // encoded metadata (as its index entry's), and
  seq?: number; // the checkpoint's seq: a head's record is its index entry too
}

/** [taskId, channel, encoded value, taskPath] */
type WriteRec = [string, string, string, string];

interface Thread {
  threadId: string;
  ns: string;
  runs: string[];
  entries: Map<string, Entry>; // a cache: the entries read or written
  heads: Map<string, Head>; // a cache of runs' newest states
}

interface ReadAnswer {
  seq: number;
  mem: Record<string, string>;
  atoms: Obj[];
}

export interface ContinuumSaverOptions {
  /** The server: a Client, or the options of one (socket, url, token), for a Client the saver makes. */
  client: Client | ConnectOptions;
  /** The runs' id prefix (default "lg"): savers with different prefixes share a store without seeing each other. */
  prefix?: string;
  serde?: SerializerProtocol;
}

const enc = encodeURIComponent;
/** list replays a run from its atoms when it lists this many of its checkpoints or more. */
const REPLAY_FROM = 16;
const dec = decodeURIComponent;
const CHANNELS = ["c/", "n/", "a/"];

function must(v: unknown, what: string): string {
  if (typeof v !== "string" || v === "") throw new Error(`ContinuumSaver: config.configurable.${what} is required (a non-empty string)`);
  return v;
}

export class ContinuumSaver extends BaseCheckpointSaver {
  readonly client: Client;
  readonly prefix: string;
  #threads = new Map<string, Thread>();
  #opened = new Map<string, Run>(); // the runs this saver opened, created or forked, by id
  #locks = new Map<string, Promise<unknown>>();
  #last = new Map<string, number>(); // the last seq of a run as this saver knows it: a put rides on one request
  #fast: boolean; // the serializer is LangGraph's JsonPlusSerializer: its JSON is revived by fastLoad

  constructor(o: ContinuumSaverOptions) {
    super(o.serde);
    this.#fast = o.serde === undefined || o.serde.constructor === JsonPlusSerializer;
    this.client = o.client instanceof Client ? o.client : new Client(o.client);
    this.prefix = o.prefix ?? "lg";
    if (this.prefix.includes("/") || this.prefix === "") throw new Error(`ContinuumSaver: prefix ${JSON.stringify(this.prefix)} must be non-empty and without "/"`);
  }

  // ---- encoding -------------------------------------------------------

  async #encode(v: unknown): Promise<string> {
    const [type, bytes] = await this.serde.dumpsTyped(v);
    if (type === "json") return "j" + Buffer.from(bytes).toString("utf8");
    return "b" + type + "\n" + Buffer.from(bytes).toString("base64");
  }

  async #decode(s: string): Promise<unknown> {
    if (s.startsWith("j")) {
      if (this.#fast) {
        const v = fastLoad(s.slice(1));
        if (v !== SLOW) return v;
      }
      return this.serde.loadsTyped("json", s.slice(1));
    }
    const nl = s.indexOf("\n");
    if (!s.startsWith("b") || nl < 0) throw new Error(`ContinuumSaver: a stored value is not in the saver's encoding (starts ${JSON.stringify(s.slice(0, 16))})`);
    return this.serde.loadsTyped(s.slice(1, nl), new Uint8Array(Buffer.from(s.slice(nl + 1), "base64")));
  }

  /**
   * v as stored. An array item that is the very value (===) the previous
   * checkpoint's array held at the same index, when this process stored it
   * (prev.raw), keeps its encoding: a put encodes the new messages, not the
   * whole list again. LangGraph's state values are immutable (a reducer
   * makes new arrays and messages); an item changed in place between two
   * puts would keep its old encoding.
   */
  async #store(v: unknown, prev?: Stored): Promise<Stored> {
    if (!Array.isArray(v)) return { kind: "v", data: await this.#encode(v) };
    const raw = prev?.kind === "a" ? prev.raw : undefined;
    const had = prev?.kind === "a" ? prev.items : [];
    const items = await Promise.all(v.map((x, i) => (raw && i < raw.length && i < had.length && raw[i] === x ? had[i] : this.#encode(x))));
    return { kind: "a", items, raw: [...v] };
  }

  /** s's value; with cache, an encoded item seen before is decoded once (the values are shared). */
  async #load(s: Stored, cache?: Map<string, unknown>): Promise<unknown> {
    const one = async (x: string) => {
      if (!cache) return this.#decode(x);
      if (cache.has(x)) return cache.get(x);
      const v = await this.#decode(x);
      cache.set(x, v);
      return v;
    };
    if (s.kind === "v") return one(s.data);
    if (!cache) return Promise.all(s.items.map(one));
    const out = new Array<unknown>(s.items.length);
    const missing: Promise<void>[] = [];
    s.items.forEach((x, i) => {
      if (cache.has(x)) out[i] = cache.get(x);
      else missing.push(one(x).then((v) => void (out[i] = v)));
    });
    await Promise.all(missing);
    return out;
  }

  // ---- the server -----------------------------------------------------

  #threadPrefix(threadId: string, ns?: string): string {
    return ns === undefined ? `${this.prefix}/${enc(threadId)}/` : `${this.prefix}/${enc(threadId)}/${enc(ns)}/`;
  }

  #get(path: string): Promise<Obj> {
    return this.client.request({ kind: "request", method: "GET", path });
  }

  /** GET .../read: the keys and prefixes chosen of run's frame at seq (default its last), and with from its atoms from..seq. */
  async #read(run: string, o: { seq?: number; keys?: string[]; prefixes?: string[]; from?: number }): Promise<ReadAnswer> {
    const q = new URLSearchParams();
    if (o.seq !== undefined) q.append("seq", String(o.seq));
    for (const k of o.keys ?? []) q.append("key", k);
    for (const p of o.prefixes ?? []) q.append("prefix", p);
    const atoms: Obj[] = [];
    let from = o.from;
    if (from !== undefined) q.append("from", String(from));
    let a = await this.#get(`/v1/runs/${enc(run)}/read?${q}`);
    if (a.memory_base64 && Object.keys(a.memory_base64 as Obj).length > 0) {
      throw new Error(`ContinuumSaver: run ${run} holds memory that is not UTF-8: not written by this saver`);
    }
    const seq = Number(a.seq);
    const mem = (a.memory as Record<string, string> | undefined) ?? {};
    for (;;) {
      for (const x of (a.atoms as Obj[] | undefined) ?? []) atoms.push(x);
      if (a.next_from === undefined || from === undefined) break;
      from = Number(a.next_from);
      a = await this.#get(`/v1/runs/${enc(run)}/read?seq=${seq}&from=${from}`);
    }
    return { seq, mem, atoms };
  }

  /**
   * The active runs whose id starts with prefix (GET /v1/heads, one request
   * for the runs of a thread, not the store's list) and their last seqs;
   * with heads, each run's newest state too (record, top, channels, writes).
   */
  async #runHeads(prefix: string, heads = false): Promise<{ run: string; seq: number; mem: Record<string, string> }[]> {
    const q = new URLSearchParams({ run_prefix: prefix });
    if (heads) {
      for (const k of ["cp", "top"]) q.append("key", k);
      for (const p of [...CHANNELS, "w/"]) q.append("prefix", p);
    }
    const o = await this.#get(`/v1/heads?${q}`);
    if (o.truncated) {
      // more runs than one answer holds: the store's list, and no heads
      const all = await this.#get("/v1/runs");
      return ((all.runs as Obj[]) ?? [])
        .filter((r) => String(r.id).startsWith(prefix) && r.status === "active")
        .map((r) => ({ run: String(r.id), seq: Number(r.last_seq), mem: {} }));
    }
    return ((o.runs as Obj[]) ?? []).map((r) => {
      if (r.memory_base64 && Object.keys(r.memory_base64 as Obj).length > 0) {
        throw new Error(`ContinuumSaver: run ${String(r.run)} holds memory that is not UTF-8: not written by this saver`);
      }
      return { run: String(r.run), seq: Number(r.seq), mem: heads ? ((r.memory as Record<string, string>) ?? {}) : {} };
    });
  }

  /** The active runs of the store whose id starts with prefix. */
  async #runs(prefix: string): Promise<string[]> {
    return (await this.#runHeads(prefix)).map((r) => r.run);
  }

  /**
   * The thread (its runs), from the cache or read; with heads, a thread
   * read comes with its runs' newest states, and the index entries of the
   * checkpoints that head their own runs: the latest checkpoint of a thread
   * in a new process is one request.
   */
  async #thread(threadId: string, ns: string, refresh = false, heads = false): Promise<Thread> {
    const key = threadKey(threadId, ns);
    const t = this.#threads.get(key);
    if (t && !refresh) return t;
    const fresh: Thread = { threadId, ns, runs: [], entries: new Map(), heads: new Map() };
    for (const r of await this.#runHeads(this.#threadPrefix(threadId, ns), heads)) {
      fresh.runs.push(r.run);
      this.#last.set(r.run, r.seq);
      if (!heads || r.mem.cp === undefined) continue;
      const head = this.#headOf(r.run, r.seq, r.mem);
      fresh.heads.set(r.run, head);
      const rec = head.record;
      if (rec && rec.run === r.run && rec.md !== undefined && rec.seq !== undefined) {
        fresh.entries.set(rec.id, { run: r.run, seq: rec.seq, parent: rec.parent, md: rec.md, end: undefined });
      }
    }
    this.#threads.set(key, fresh);
    return fresh;
  }

  /** A run's newest state from its frame's keys cp, top, c/, n/, a/ and w/. */
  #headOf(run: string, seq: number, mem: Record<string, string>): Head {
    const v = parseView(run, seq, mem);
    const head: Head = { ...v, top: mem.top, writes: new Map() };
    for (const [k, x] of Object.entries(mem)) if (k.startsWith("w/")) head.writes.set(k, JSON.parse(x) as WriteRec);
    return head;
  }

  /** Checkpoint id's index entry: the cache's, or read (key i/<id>) from the thread's runs. */
  async #entry(t: Thread, id: string): Promise<{ t: Thread; e: Entry | undefined }> {
    const cached = t.entries.get(id);
    if (cached) return { t, e: cached };
    const find = async (th: Thread) => {
      const key = `i/${enc(id)}`;
      const got = await Promise.all(th.runs.map((run) => this.#read(run, { keys: [key] })));
      let e: Entry | undefined;
      got.forEach((g, i) => {
        const v = g.mem[key];
        if (v === undefined) return;
        const x = parseEntry(v);
        if (!e || x.run === th.runs[i]) e = x; // a fork holds its source's entries as of the fork: the own run's is newer
      });
      if (e) th.entries.set(id, e);
      return e;
    };
    let e = await find(t);
    if (!e) {
      t = await this.#thread(t.threadId, t.ns, true);
      e = await find(t);
    }
    return { t, e };
  }

  /** The newest state of run: the cache's, or read (record, top, channels, writes). */
  async #head(t: Thread, run: string): Promise<Head> {
    const h = t.heads.get(run);
    if (h) return h;
    const r = await this.#read(run, { keys: ["cp", "top"], prefixes: [...CHANNELS, "w/"] });
    const head = this.#headOf(run, r.seq, r.mem);
    this.#last.set(run, r.seq);
    t.heads.set(run, head);
    return head;
  }

  /** Whether id is the newest checkpoint put in its run. */
  #isHead(h: Head, id: string, e: Entry): boolean {
    return h.record?.id === id && (h.record.run === undefined || h.record.run === e.run);
  }

  /** Serializes the writes of one thread in this saver. */
  async #locked<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#locks.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.#locks.set(key, tail);
    try {
      return await next;
    } finally {
      if (this.#locks.get(key) === tail) this.#locks.delete(key);
    }
  }

  /** The client's Run of id: opened (PUT, a round trip) once per saver, not per write. */
  async #open(id: string): Promise<Run> {
    let r = this.#opened.get(id);
    if (!r) this.#opened.set(id, (r = await this.client.run(id)));
    return r;
  }

  /** The seq the run's next atom will have, as this saver knows the run. */
  async #nextSeq(run: string): Promise<number> {
    let last = this.#last.get(run);
    if (last === undefined) {
      last = (await this.#open(run)).opened.lastSeq;
      this.#last.set(run, last);
    }
    return last + 1;
  }

  /**
   * Commits ops as run's atom seq in one request: a begin (taking over an
   * attempt left open) that carries its commit and the seq it expects
   * (continuumd's begin with commit and seq). A repeat after a lost answer
   * is the same request (its request_id), and a repeat after a restart of
   * the server cannot commit twice (the seq). Another seq than expected is
   * a SeqMoved: the run was written by another process, nothing was.
   */
  async #ride(run: string, seq: number, ops: Delta): Promise<void> {
    const body = { request_id: randomBytes(16).toString("hex"), takeover: true, seq, commit: { delta: ops.ops } };
    try {
      await this.client.request({ kind: "request", method: "POST", path: `/v1/runs/${enc(run)}/attempts`, body });
    } catch (e) {
      this.#last.delete(run);
      if (e instanceof Conflict && e.code === "seq_mismatch") throw new SeqMoved(run, seq);
      const att = e instanceof APIError ? (e.details?.attempt as Obj | undefined)?.attempt : undefined;
      if (typeof att === "string") {
        // the begin was made, its commit refused: the attempt is given up (its seq is begun again)
        await this.client
          .request({ kind: "request", method: "POST", path: `/v1/runs/${enc(run)}/attempts/${enc(att)}/fail`, body: { reason: "ContinuumSaver: commit refused" } })
          .catch(() => undefined);
      }
      throw e;
    }
    this.#last.set(run, seq);
  }

  async #commit(run: string, ops: Delta): Promise<number> {
    const seq = await this.#nextSeq(run);
    await this.#ride(run, seq, ops);
    return seq;
  }

  // ---- reads ----------------------------------------------------------

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined) return undefined;
    const ns: string = config.configurable?.checkpoint_ns ?? "";
    const id = getCheckpointId(config);
    let t = await this.#thread(String(threadId), ns, false, true);
    if (id) {
      const { t: t2, e } = await this.#entry(t, id);
      return e ? this.#tuple(t2, id, e) : undefined;
    }
    let latest = await this.#latest(t);
    if (latest === undefined) {
      t = await this.#thread(String(threadId), ns, true);
      latest = await this.#latest(t);
    }
    if (latest === undefined) return undefined;
    const { t: t2, e } = await this.#entry(t, latest);
    if (!e) throw new Error(`ContinuumSaver: thread ${JSON.stringify(t.threadId)} names ${latest} its latest checkpoint, but no run of it has its index entry`);
    return this.#tuple(t2, latest, e);
  }

  /** The greatest checkpoint id of the thread: the greatest of its runs' tops. */
  async #latest(t: Thread): Promise<string | undefined> {
    const tops = await Promise.all(
      t.runs.map(async (run) => {
        const h = t.heads.get(run);
        if (h) return h.top;
        return (await this.#read(run, { keys: ["top"] })).mem.top;
      }),
    );
    return newest(tops.filter((x): x is string => x !== undefined));
  }

  /** Checkpoint id's own pending writes, by key: those of its stretch (w/) and the later ones (lw/). */
  async #writes(t: Thread, id: string, e: Entry): Promise<[string, WriteRec][]> {
    const h = t.heads.get(e.run);
    if (h && this.#isHead(h, id, e)) return [...h.writes];
    const r = await this.#read(e.run, { keys: [`i/${enc(id)}`], prefixes: [`w/${enc(id)}/`, `lw/${enc(id)}/`] });
    const fresh = r.mem[`i/${enc(id)}`];
    if (fresh !== undefined) {
      const f = parseEntry(fresh);
      if (f.end !== undefined) e.end = f.end;
    }
    const out: [string, WriteRec][] = [];
    for (const [k, v] of Object.entries(r.mem)) if (k.startsWith("lw/") || (e.end === undefined && k.startsWith("w/"))) out.push([k, JSON.parse(v) as WriteRec]);
    if (e.end !== undefined) {
      const s = await this.#read(e.run, { seq: e.end, prefixes: [`w/${enc(id)}/`] });
      for (const [k, v] of Object.entries(s.mem)) out.push([k, JSON.parse(v) as WriteRec]);
    }
    return out;
  }

  /** The checkpoint at id's seq: its record and channels. */
  async #view(t: Thread, id: string, e: Entry): Promise<CpView> {
    const h = t.heads.get(e.run);
    if (h && this.#isHead(h, id, e)) return h;
    const r = await this.#read(e.run, { seq: e.seq, keys: ["cp"], prefixes: CHANNELS });
    return parseView(e.run, e.seq, r.mem);
  }

  async #tuple(t: Thread, id: string, e: Entry, given?: { at: CpView; writes: [string, WriteRec][] }, cache?: Map<string, unknown>): Promise<CheckpointTuple> {
    const [at, writes] = given ? [given.at, given.writes] : await Promise.all([this.#view(t, id, e), this.#writes(t, id, e)]);
    if (!at.record || at.record.id !== id) throw new Error(`ContinuumSaver: run ${e.run} at seq ${e.seq} holds checkpoint ${at.record?.id ?? "(none)"}, its index says ${id}: the store was changed by hand`);
    const checkpoint = (await this.#decode(at.record.cp)) as Checkpoint;
    checkpoint.channel_values = {};
    for (const [ch, s] of at.channels) checkpoint.channel_values[ch] = await this.#load(s, cache);
    const tuple: CheckpointTuple = {
      config: { configurable: { thread_id: t.threadId, checkpoint_ns: t.ns, checkpoint_id: id } },
      checkpoint,
      metadata: (await this.#decode(e.md)) as CheckpointMetadata,
      pendingWrites: await this.#pending(writes),
    };
    if (e.parent !== undefined) {
      tuple.parentConfig = { configurable: { thread_id: t.threadId, checkpoint_ns: t.ns, checkpoint_id: e.parent } };
      if (checkpoint.v < 4) await this.#migratePendingSends(t, checkpoint, e.parent);
    }
    return tuple;
  }

  async #pending(writes: [string, WriteRec][]): Promise<CheckpointPendingWrite[]> {
    const recs: { key: readonly [string, string, number]; w: WriteRec }[] = [];
    for (const [k, w] of writes) {
      const idx = Number(k.slice(k.lastIndexOf("/") + 1));
      recs.push({ key: writesSortKey(w[3], w[0], idx), w });
    }
    recs.sort((a, b) => compareWritesSortKeys(a.key, b.key));
    return Promise.all(recs.map(async ({ w }) => [w[0], w[1], await this.#decode(w[2])] as CheckpointPendingWrite));
  }

  /** Checkpoints before v4 kept pending sends as their parent's writes to TASKS. */
  async #migratePendingSends(t: Thread, checkpoint: Checkpoint, parent: string): Promise<void> {
    const { t: t2, e } = await this.#entry(t, parent);
    if (!e) return;
    const sends = (await this.#pending(await this.#writes(t2, parent, e))).filter((w) => w[1] === TASKS).map((w) => w[2]);
    checkpoint.channel_values ??= {};
    checkpoint.channel_values[TASKS] = sends;
    checkpoint.channel_versions ??= {};
    const vs = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] = vs.length > 0 ? maxChannelVersion(...vs) : this.getNextVersion(undefined);
  }

  /**
   * The checkpoints of run at seqs and every write made in it, rebuilt from
   * its atoms (GET .../read?from=, a page of 2048 atoms a request) over its
   * frame where it was forked: a thread's history costs its deltas once.
   */
  async #replay(run: string, seqs: number[]): Promise<{ frames: Map<number, CpView>; writes: Map<string, [string, WriteRec][]> }> {
    const info = await this.#get(`/v1/runs/${enc(run)}`);
    const forkedAt = info.parent ? Number(info.forked_at) : 0;
    const want = new Set(seqs);
    const base = forkedAt > 0 ? parseView(run, forkedAt, (await this.#read(run, { seq: forkedAt, keys: ["cp"], prefixes: CHANNELS })).mem) : { record: undefined, channels: new Map<string, Stored>() };
    const frames = new Map<number, CpView>();
    const writes = new Map<string, [string, WriteRec][]>();
    if (forkedAt > 0 && want.has(forkedAt)) frames.set(forkedAt, base);
    const r = await this.#read(run, { from: forkedAt + 1 });
    const scalars = new Map<string, string>();
    const arrays = new Map<string, { n: number; items: string[] }>();
    for (const [ch, st] of base.channels) {
      if (st.kind === "v") scalars.set(ch, st.data);
      else arrays.set(ch, { n: st.items.length, items: [...st.items] });
    }
    let record: CpRecord | undefined = base.record;
    const arr = (ch: string) => {
      let a = arrays.get(ch);
      if (!a) arrays.set(ch, (a = { n: -1, items: [] }));
      return a;
    };
    for (const atom of r.atoms) {
      const seq = Number(atom.seq);
      let isCp = false;
      for (const op of (atom.delta as Obj[]) ?? []) {
        if (op.op !== "set" && op.op !== "delete") continue;
        const key = String(op.key);
        if (op.op === "set" && op.value_base64 !== undefined) throw new Error(`ContinuumSaver: run ${run} seq ${seq} sets ${key} to bytes that are not UTF-8: not written by this saver`);
        const value = op.op === "set" ? String(op.value ?? "") : undefined;
        if (key === "cp") {
          record = value === undefined ? undefined : (JSON.parse(value) as CpRecord);
          isCp = true;
        } else if (key.startsWith("c/")) {
          if (value === undefined) scalars.delete(dec(key.slice(2)));
          else scalars.set(dec(key.slice(2)), value);
        } else if (key.startsWith("n/")) {
          const a = arr(dec(key.slice(2)));
          a.n = value === undefined ? -1 : Number(value);
        } else if (key.startsWith("a/")) {
          const slash = key.lastIndexOf("/");
          const a = arr(dec(key.slice(2, slash)));
          if (value !== undefined) a.items[Number(key.slice(slash + 1))] = value;
        } else if (value !== undefined && (key.startsWith("w/") || key.startsWith("lw/"))) {
          const rest = key.slice(key.indexOf("/") + 1);
          const id = dec(rest.slice(0, rest.indexOf("/")));
          let l = writes.get(id);
          if (!l) writes.set(id, (l = []));
          l.push([key, JSON.parse(value) as WriteRec]);
        }
      }
      if (!want.has(seq)) continue;
      if (!isCp) throw new Error(`ContinuumSaver: run ${run} seq ${seq} is a checkpoint in the index, but its atom writes none`);
      const channels = new Map<string, Stored>();
      for (const [ch, v] of scalars) channels.set(ch, { kind: "v", data: v });
      for (const [ch, a] of arrays) {
        if (a.n < 0) continue;
        const items = a.items.slice(0, a.n);
        if (items.length !== a.n || items.some((x) => x === undefined)) throw new Error(`ContinuumSaver: run ${run} at seq ${seq}: channel ${ch} lacks items of its ${a.n}`);
        channels.set(ch, { kind: "a", items });
      }
      frames.set(seq, { record, channels });
    }
    return { frames, writes };
  }

  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options ?? {};
    let limit = options?.limit;
    const threadId = config.configurable?.thread_id;
    const nsWanted: string | undefined = config.configurable?.checkpoint_ns;
    const idWanted = config.configurable?.checkpoint_id;
    const beforeId = before?.configurable?.checkpoint_id;
    // the threads: one, or every thread of the prefix
    const keys: [string, string][] = [];
    const prefix = threadId !== undefined ? this.#threadPrefix(String(threadId)) : `${this.prefix}/`;
    const seen = new Set<string>();
    for (const run of await this.#runs(prefix)) {
      const parts = run.split("/");
      if (parts.length !== 4) continue;
      const tk = threadKey(dec(parts[1]), dec(parts[2]));
      if (seen.has(tk)) continue;
      seen.add(tk);
      keys.push([dec(parts[1]), dec(parts[2])]);
    }
    keys.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    for (const [tid, ns] of keys) {
      if (nsWanted !== undefined && ns !== nsWanted) continue;
      const t = await this.#thread(tid, ns, true);
      // the thread's index: every run's i/ keys, a run's own entries over its forks' copies
      const idx = await Promise.all(t.runs.map((run) => this.#read(run, { prefixes: ["i/"] })));
      idx.forEach((r, i) => {
        for (const [k, v] of Object.entries(r.mem)) {
          const id = dec(k.slice(2));
          const e = parseEntry(v);
          if (!t.entries.has(id) || e.run === t.runs[i]) t.entries.set(id, e);
        }
      });
      const ids = [...t.entries.keys()].sort().reverse();
      const chosen: string[] = [];
      for (const id of ids) {
        if (idWanted && id !== idWanted) continue;
        if (beforeId && id >= beforeId) continue;
        if (filter && Object.keys(filter).length > 0) {
          const md = (await this.#decode(t.entries.get(id)!.md)) as Record<string, unknown>;
          if (!Object.entries(filter).every(([k, v]) => deepEqual(md?.[k], v))) continue;
        }
        if (limit !== undefined) {
          if (limit <= 0) break;
          limit -= 1;
        }
        chosen.push(id);
      }
      // a run with many checkpoints listed is replayed from its atoms; the values they
      // share are decoded once, and the tuples of this call share those objects
      const perRun = new Map<string, number>();
      for (const id of chosen) perRun.set(t.entries.get(id)!.run, (perRun.get(t.entries.get(id)!.run) ?? 0) + 1);
      const replays = new Map<string, Promise<{ frames: Map<number, CpView>; writes: Map<string, [string, WriteRec][]> }>>();
      const cache = new Map<string, unknown>();
      for (const id of chosen) {
        const e = t.entries.get(id)!;
        if ((perRun.get(e.run) ?? 0) < REPLAY_FROM) {
          yield await this.#tuple(t, id, e);
          continue;
        }
        if (!replays.has(e.run)) replays.set(e.run, this.#replay(e.run, chosen.map((c) => t.entries.get(c)!).filter((x) => x.run === e.run).map((x) => x.seq)));
        const r = await replays.get(e.run)!;
        const at = r.frames.get(e.seq);
        yield at ? await this.#tuple(t, id, e, { at, writes: r.writes.get(id) ?? [] }, cache) : await this.#tuple(t, id, e);
      }
      if (limit !== undefined && limit <= 0) return;
    }
  }

  // ---- writes ---------------------------------------------------------

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const threadId = must(config.configurable?.thread_id, "thread_id");
    const ns: string = config.configurable?.checkpoint_ns ?? "";
    const parentId: string | undefined = config.configurable?.checkpoint_id || undefined;
    if (typeof checkpoint?.id !== "string" || checkpoint.id === "") throw new Error("ContinuumSaver.put: the checkpoint has no id");
    await this.#locked(threadKey(threadId, ns), async () => {
      for (let tries = 0; ; tries++) {
        try {
          return await this.#put(threadId, ns, parentId, checkpoint, metadata, newVersions);
        } catch (e) {
          // the run was written by another process since this saver read it: read the thread again, once
          if (!(e instanceof SeqMoved) || tries > 0) throw e;
          await this.#thread(threadId, ns, true);
        }
      }
    });
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  async #put(threadId: string, ns: string, parentId: string | undefined, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<void> {
    {
      let t = await this.#thread(threadId, ns);
      let parent: Entry | undefined;
      if (parentId) ({ t, e: parent } = await this.#entry(t, parentId));

      // the run the checkpoint goes to, and the state it starts from
      let run: string;
      let base: Head;
      let extends_ = false;
      if (parent) {
        const h = await this.#head(t, parent.run);
        if (this.#isHead(h, parentId!, parent)) {
          run = parent.run;
          base = h;
          extends_ = true;
        } else {
          run = this.#threadPrefix(threadId, ns) + newBranchName();
          this.#opened.set(run, await this.client.fork(parent.run, parent.seq, run));
          t.runs.push(run);
          const r = await this.#read(run, { seq: parent.seq, keys: ["cp", "top"], prefixes: CHANNELS });
          base = { ...parseView(run, parent.seq, r.mem), top: r.mem.top, writes: new Map() };
        }
      } else {
        run = this.#threadPrefix(threadId, ns) + newBranchName();
        if (run.length > 256) throw new Error(`ContinuumSaver: thread ${JSON.stringify(threadId)} with namespace ${JSON.stringify(ns)} makes a run id of ${run.length} bytes (256 at most)`);
        this.#opened.set(run, await this.client.run(run));
        t.runs.push(run);
        base = { record: undefined, channels: new Map(), top: undefined, writes: new Map() };
      }
      const baseCp = base.record ? ((await this.#decode(base.record.cp)) as Checkpoint) : undefined;

      // the channels the checkpoint keeps: newVersions' with their new values, the others as the parent has them
      const want = new Map<string, Stored>();
      const values = checkpoint.channel_values ?? {};
      for (const ch of Object.keys(checkpoint.channel_versions ?? {}).concat(Object.keys(newVersions ?? {}))) {
        if (want.has(ch)) continue;
        if (newVersions && Object.prototype.hasOwnProperty.call(newVersions, ch)) {
          if (Object.prototype.hasOwnProperty.call(values, ch) && values[ch] !== undefined) want.set(ch, await this.#store(values[ch], base.channels.get(ch)));
        } else {
          const had = base.channels.get(ch);
          if (had && baseCp && baseCp.channel_versions?.[ch] === checkpoint.channel_versions?.[ch]) want.set(ch, had);
        }
      }

      const delta = new Delta();
      const channels = new Map<string, Stored>();
      for (const [ch, old] of base.channels) {
        if (!want.has(ch)) removeChannel(delta, ch, old);
      }
      for (const [ch, s] of want) {
        channels.set(ch, s);
        writeChannel(delta, ch, base.channels.get(ch), s);
      }
      // the parent's writes leave the working memory: they stay readable at the end of its stretch
      for (const k of base.writes.keys()) delta.delete(k);
      const top = base.top === undefined || checkpoint.id > base.top ? checkpoint.id : base.top;
      if (top !== base.top) delta.set("top", top);
      const bare = copyCheckpoint(checkpoint) as Partial<Checkpoint>;
      delete bare.channel_values;
      // the seq is the run's next as this saver knows it: the begin that carries the commit checks it
      const seq = await this.#nextSeq(run);
      const md = await this.#encode(metadata);
      const record: CpRecord = { id: checkpoint.id, run, cp: await this.#encode(bare), md, seq };
      if (parentId) record.parent = parentId;
      delta.set("cp", JSON.stringify(record));
      const entry: Entry = { run, seq, parent: parentId, md, end: undefined };
      delta.set(`i/${enc(checkpoint.id)}`, entryJSON(entry));
      const ended = extends_ && parent ? { ...parent, end: seq - 1 } : undefined;
      if (ended) delta.set(`i/${enc(parentId!)}`, entryJSON(ended));
      try {
        await this.#ride(run, seq, delta);
      } catch (e) {
        t.heads.delete(run);
        throw e;
      }
      if (ended) t.entries.set(parentId!, ended);
      t.entries.set(checkpoint.id, entry);
      t.heads.set(run, { record, channels, top, writes: new Map() });
    }
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const threadId = must(config.configurable?.thread_id, "thread_id");
    const ns: string = config.configurable?.checkpoint_ns ?? "";
    const id = must(config.configurable?.checkpoint_id, "checkpoint_id");
    await this.#locked(threadKey(threadId, ns), async () => {
      for (let tries = 0; ; tries++) {
        try {
          return await this.#putWrites(threadId, ns, id, writes, taskId, taskPath);
        } catch (e) {
          if (!(e instanceof SeqMoved) || tries > 0) throw e;
          await this.#thread(threadId, ns, true);
        }
      }
    });
  }

  async #putWrites(threadId: string, ns: string, id: string, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    {
      const { t, e } = await this.#entry(await this.#thread(threadId, ns), id);
      if (!e) throw new Error(`ContinuumSaver.putWrites: no checkpoint ${id} in thread ${JSON.stringify(threadId)} (namespace ${JSON.stringify(ns)})`);
      const h = await this.#head(t, e.run);
      const head = this.#isHead(h, id, e);
      // the writes id has, by their task and index
      const have = new Set<string>();
      for (const [k] of head ? h.writes : await this.#writes(t, id, e)) have.add(k.slice(k.indexOf("/") + 1));
      const delta = new Delta();
      const added = new Map<string, WriteRec>();
      for (let i = 0; i < writes.length; i++) {
        const [channel, value] = writes[i];
        const idx = WRITES_IDX_MAP[channel] ?? i;
        const tail = `${enc(id)}/${enc(taskId)}/${idx}`;
        if (idx >= 0 && have.has(tail)) continue;
        have.add(tail);
        const rec: WriteRec = [taskId, channel, await this.#encode(value), taskPath ?? ""];
        const key = (head ? "w/" : "lw/") + tail;
        added.set(key, rec);
        delta.set(key, JSON.stringify(rec));
      }
      if (added.size === 0) return;
      try {
        await this.#commit(e.run, delta);
      } catch (err) {
        t.heads.delete(e.run);
        throw err;
      }
      if (head) for (const [k, w] of added) h.writes.set(k, w);
    }
  }

  /** Deletes every checkpoint and write of the thread, in every namespace: its runs end (cancelled) and leave the saver's view. */
  async deleteThread(threadId: string): Promise<void> {
    const prefix = this.#threadPrefix(threadId);
    for (const run of await this.#runs(prefix)) {
      await (await this.#open(run)).end("cancelled", "deleted by deleteThread");
      this.#opened.delete(run);
    }
    for (const k of [...this.#threads.keys()]) if (JSON.parse(k)[0] === threadId) this.#threads.delete(k);
  }
}

// ---- helpers ------------------------------------------------------------

/** A run's next seq is not the one the saver expected: another process wrote it. */
class SeqMoved extends Error {
  constructor(readonly run: string, readonly seq: number) {
    super(`ContinuumSaver: run ${run} was written by another process (its next seq is not ${seq})`);
  }
}

function threadKey(threadId: string, ns: string): string {
  return JSON.stringify([threadId, ns]);
}

function newBranchName(): string {
  return Date.now().toString(36) + randomBytes(6).toString("hex");
}

function newest(ids: Iterable<string>): string | undefined {
  let best: string | undefined;
  for (const id of ids) if (best === undefined || id > best) best = id;
  return best;
}

function removeChannel(d: Delta, ch: string, old: Stored): void {
  if (old.kind === "v") {
    d.delete(`c/${enc(ch)}`);
    return;
  }
  d.delete(`n/${enc(ch)}`);
  for (let i = 0; i < old.items.length; i++) d.delete(`a/${enc(ch)}/${i}`);
}

/** The ops that turn channel ch from old into s: an array gets the items that differ from old's at their index only. */
function writeChannel(d: Delta, ch: string, old: Stored | undefined, s: Stored): void {
  if (old && old.kind !== s.kind) {
    removeChannel(d, ch, old);
    old = undefined;
  }
  if (s.kind === "v") {
    if (!old || (old as { data: string }).data !== s.data) d.set(`c/${enc(ch)}`, s.data);
    return;
  }
  const prev = old ? (old as { items: string[] }).items : [];
  for (let i = 0; i < s.items.length; i++) if (i >= prev.length || prev[i] !== s.items[i]) d.set(`a/${enc(ch)}/${i}`, s.items[i]);
  for (let i = s.items.length; i < prev.length; i++) d.delete(`a/${enc(ch)}/${i}`);
  if (!old || prev.length !== s.items.length) d.set(`n/${enc(ch)}`, String(s.items.length));
}

function entryJSON(e: Entry): string {
  return JSON.stringify([e.run, e.seq, e.parent ?? null, e.md, e.end ?? null]);
}

function parseEntry(v: string): Entry {
  const [run, seq, parent, md, end] = JSON.parse(v) as [string, number, string | null, string, number | null | undefined];
  return { run, seq, parent: parent ?? undefined, md, end: end ?? undefined };
}

/** A checkpoint's record and channels, from the memory keys cp, c/, n/ and a/ of a frame. */
function parseView(run: string, seq: number, mem: Record<string, string>): CpView {
  const v: CpView = { record: undefined, channels: new Map() };
  const arrays = new Map<string, number>();
  for (const [k, x] of Object.entries(mem)) {
    if (k === "cp") v.record = JSON.parse(x) as CpRecord;
    else if (k.startsWith("c/")) v.channels.set(dec(k.slice(2)), { kind: "v", data: x });
    else if (k.startsWith("n/")) arrays.set(dec(k.slice(2)), Number(x));
  }
  for (const [ch, n] of arrays) {
    const items: string[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const it = mem[`a/${enc(ch)}/${i}`];
      if (it === undefined) throw new Error(`ContinuumSaver: run ${run} at seq ${seq}: channel ${ch} lacks item ${i} of ${n}`);
      items[i] = it;
    }
    v.channels.set(ch, { kind: "a", items });
  }
  return v;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a as Obj);
  const kb = Object.keys(b as Obj);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => deepEqual((a as Obj)[k], (b as Obj)[k]));
}
