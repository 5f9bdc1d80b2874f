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
 *   cp                 the checkpoint record: id, parent, the checkpoint
 *                      without channel_values (serde-typed)
 *   c/<ch>             a channel's value (serde-typed)
 *   n/<ch>, a/<ch>/<i> a channel whose value is an array: its length and
 *                      its items one key each, so that an appended message
 *                      is one new key, never the list again
 *   i/<id>             the index: every checkpoint of the lineage, with
 *                      its run, seq, parent and metadata
 *   w/<id>/<task>/<i>  a pending write of checkpoint id (its own atom)
 *
 * An atom's delta holds only what changed: the channels of newVersions
 * whose value differs from the parent's, an array's new tail, the deletes
 * of channels the checkpoint no longer has, its record and index entry.
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
import { Client, Delta } from "@continuumdb/client";

type Obj = Record<string, unknown>;

/** A channel as a frame holds it: one encoded value, or encoded items. */
type Stored = { kind: "v"; data: string } | { kind: "a"; items: string[] };

/** The index entry of one checkpoint. */
interface Entry {
  run: string;
  seq: number;
  parent: string | undefined;
  md: string; // encoded metadata
}

/** What a frame holds, decoded as far as keys go. */
interface FrameView {
  seq: number;
  record: CpRecord | undefined;
  channels: Map<string, Stored>;
  index: Map<string, Entry>;
  writes: Map<string, WriteRec>; // by key w/<id>/<task>/<idx>
}

interface CpRecord {
  id: string;
  parent?: string;
  cp: string; // encoded checkpoint without channel_values
}

/** [taskId, channel, encoded value, taskPath] */
type WriteRec = [string, string, string, string];

interface Branch {
  run: string;
  head: string | undefined; // the newest checkpoint put in this run
  last: FrameView | undefined; // the frame at head, when known
}

interface Thread {
  threadId: string;
  ns: string;
  branches: Map<string, Branch>;
  index: Map<string, Entry>;
}

export interface ContinuumSaverOptions {
  /** The server: a Client, or the options of one (socket, url, token). */
  client: Client;
  /** The runs' id prefix (default "lg"): savers with different prefixes share a store without seeing each other. */
  prefix?: string;
  serde?: SerializerProtocol;
}

const enc = encodeURIComponent;
/** list replays a run from its deltas when it lists this many of its checkpoints or more. */
const REPLAY_FROM = 16;
const dec = decodeURIComponent;

function must(v: unknown, what: string): string {
  if (typeof v !== "string" || v === "") throw new Error(`ContinuumSaver: config.configurable.${what} is required (a non-empty string)`);
  return v;
}

export class ContinuumSaver extends BaseCheckpointSaver {
  readonly client: Client;
  readonly prefix: string;
  #threads = new Map<string, Thread>();
  #locks = new Map<string, Promise<unknown>>();

  constructor(o: ContinuumSaverOptions) {
    super(o.serde);
    this.client = o.client;
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
    if (s.startsWith("j")) return this.serde.loadsTyped("json", s.slice(1));
    const nl = s.indexOf("\n");
    if (!s.startsWith("b") || nl < 0) throw new Error(`ContinuumSaver: a stored value is not in the saver's encoding (starts ${JSON.stringify(s.slice(0, 16))})`);
    return this.serde.loadsTyped(s.slice(1, nl), new Uint8Array(Buffer.from(s.slice(nl + 1), "base64")));
  }

  async #store(v: unknown): Promise<Stored> {
    if (Array.isArray(v)) return { kind: "a", items: await Promise.all(v.map((x) => this.#encode(x))) };
    return { kind: "v", data: await this.#encode(v) };
  }

  async #load(s: Stored, cache?: Map<string, unknown>): Promise<unknown> {
    const one = async (x: string) => {
      if (!cache) return this.#decode(x);
      if (cache.has(x)) return cache.get(x);
      const v = await this.#decode(x);
      cache.set(x, v);
      return v;
    };
    if (s.kind === "v") return one(s.data);
    return Promise.all(s.items.map(one));
  }

  // ---- the server -----------------------------------------------------

  #threadPrefix(threadId: string, ns?: string): string {
    return ns === undefined ? `${this.prefix}/${enc(threadId)}/` : `${this.prefix}/${enc(threadId)}/${enc(ns)}/`;
  }

  #get(path: string): Promise<Obj> {
    return this.client.request({ kind: "request", method: "GET", path });
  }

  async #frame(run: string, seq?: number): Promise<FrameView> {
    const q = seq === undefined ? "" : `?seq=${seq}`;
    const o = await this.#get(`/v1/runs/${enc(run)}/state${q}`);
    return parseFrame(o);
  }

  /** The active runs of the store under this saver's prefix, by id. */
  async #runs(prefix: string): Promise<string[]> {
    const o = await this.#get("/v1/runs");
    const out: string[] = [];
    for (const r of (o.runs as Obj[]) ?? []) {
      const id = String(r.id);
      if (id.startsWith(prefix) && r.status === "active") out.push(id);
    }
    return out;
  }

  async #loadThread(threadId: string, ns: string): Promise<Thread> {
    const t: Thread = { threadId, ns, branches: new Map(), index: new Map() };
    const runs = await this.#runs(this.#threadPrefix(threadId, ns));
    const frames = await Promise.all(runs.map((r) => this.#frame(r)));
    runs.forEach((run, i) => {
      const f = frames[i];
      // the frame's cp is the run's newest checkpoint when it was put in this run
      const own = f.record && f.index.get(f.record.id)?.run === run ? f.record.id : undefined;
      t.branches.set(run, { run, head: own, last: own ? f : undefined });
      for (const [id, e] of f.index) t.index.set(id, e);
    });
    this.#threads.set(threadKey(threadId, ns), t);
    return t;
  }

  async #thread(threadId: string, ns: string, refresh = false): Promise<Thread> {
    const t = this.#threads.get(threadKey(threadId, ns));
    if (t && !refresh) return t;
    return this.#loadThread(threadId, ns);
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

  async #commit(run: string, ops: Delta): Promise<number> {
    const r = await this.client.run(run);
    const atom = await r.begin({ takeover: true });
    try {
      await atom.commit(ops);
    } catch (e) {
      atom.stop();
      throw e;
    }
    return atom.seq;
  }

  // ---- reads ----------------------------------------------------------

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined) return undefined;
    const ns: string = config.configurable?.checkpoint_ns ?? "";
    const id = getCheckpointId(config);
    let t = await this.#thread(String(threadId), ns);
    if (id) {
      if (!t.index.has(id)) t = await this.#thread(String(threadId), ns, true);
      if (!t.index.has(id)) return undefined;
      return this.#tuple(t, id);
    }
    if (t.index.size === 0) t = await this.#thread(String(threadId), ns, true);
    const latest = newest(t.index.keys());
    return latest === undefined ? undefined : this.#tuple(t, latest);
  }

  /** The frame at checkpoint id's seq, and the frame holding its writes (its run's latest). */
  async #frames(t: Thread, id: string): Promise<{ at: FrameView; writes: FrameView }> {
    const e = t.index.get(id)!;
    const b = t.branches.get(e.run);
    if (b && b.head === id && b.last) return { at: b.last, writes: b.last };
    const [at, latest] = await Promise.all([this.#frame(e.run, e.seq), this.#frame(e.run)]);
    return { at, writes: latest };
  }

  async #tuple(t: Thread, id: string, frames?: { at: FrameView; writes: FrameView }, cache?: Map<string, unknown>): Promise<CheckpointTuple> {
    const e = t.index.get(id)!;
    const { at, writes } = frames ?? (await this.#frames(t, id));
    if (!at.record || at.record.id !== id) throw new Error(`ContinuumSaver: run ${e.run} at seq ${e.seq} holds checkpoint ${at.record?.id ?? "(none)"}, its index says ${id}: the store was changed by hand`);
    const checkpoint = (await this.#decode(at.record.cp)) as Checkpoint;
    checkpoint.channel_values = {};
    for (const [ch, s] of at.channels) checkpoint.channel_values[ch] = await this.#load(s, cache);
    const pendingWrites = await this.#writesOf(writes, id);
    const tuple: CheckpointTuple = {
      config: { configurable: { thread_id: t.threadId, checkpoint_ns: t.ns, checkpoint_id: id } },
      checkpoint,
      metadata: (await this.#decode(e.md)) as CheckpointMetadata,
      pendingWrites,
    };
    if (e.parent !== undefined) {
      tuple.parentConfig = { configurable: { thread_id: t.threadId, checkpoint_ns: t.ns, checkpoint_id: e.parent } };
      if (checkpoint.v < 4) await this.#migratePendingSends(t, checkpoint, e.parent);
    }
    return tuple;
  }

  async #writesOf(f: FrameView, id: string): Promise<CheckpointPendingWrite[]> {
    const pre = `w/${enc(id)}/`;
    const recs: { key: readonly [string, string, number]; w: WriteRec }[] = [];
    for (const [k, w] of f.writes) {
      if (!k.startsWith(pre)) continue;
      const idx = Number(k.slice(k.lastIndexOf("/") + 1));
      recs.push({ key: writesSortKey(w[3], w[0], idx), w });
    }
    recs.sort((a, b) => compareWritesSortKeys(a.key, b.key));
    return Promise.all(recs.map(async ({ w }) => [w[0], w[1], await this.#decode(w[2])] as CheckpointPendingWrite));
  }

  /** Checkpoints before v4 kept pending sends as their parent's writes to TASKS. */
  async #migratePendingSends(t: Thread, checkpoint: Checkpoint, parent: string): Promise<void> {
    if (!t.index.has(parent)) return;
    const { writes } = await this.#frames(t, parent);
    const sends = (await this.#writesOf(writes, parent)).filter((w) => w[1] === TASKS).map((w) => w[2]);
    checkpoint.channel_values ??= {};
    checkpoint.channel_values[TASKS] = sends;
    checkpoint.channel_versions ??= {};
    const vs = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] = vs.length > 0 ? maxChannelVersion(...vs) : this.getNextVersion(undefined);
  }

  /**
   * Every checkpoint frame of run, rebuilt from its atoms' deltas (GET
   * .../atoms/{seq}, a few at once) instead of one state read per
   * checkpoint: the history of a thread costs its deltas once.
   */
  /**
   * The frames of run's checkpoints at seqs, rebuilt from their atoms'
   * deltas (GET .../atoms/{seq}) over the run's frame where it was forked:
   * a thread's history costs each delta once, not a frame per checkpoint.
   * Writes' atoms change no channel: the writes are read from the run's
   * latest frame.
   */
  async #replay(run: string, seqs: number[]): Promise<{ frames: Map<number, FrameView>; last: FrameView }> {
    const info = await this.#get(`/v1/runs/${enc(run)}`);
    const forkedAt = info.parent ? Number(info.forked_at) : 0;
    const own = [...new Set(seqs)].filter((q) => q > forkedAt).sort((a, b) => a - b);
    const [base, latest] = await Promise.all([forkedAt > 0 ? this.#frame(run, forkedAt) : Promise.resolve(emptyFrame()), this.#frame(run)]);
    const atoms = new Map<number, Obj>();
    let next = 0;
    const worker = async () => {
      while (next < own.length) {
        const seq = own[next++]!;
        atoms.set(seq, await this.#get(`/v1/runs/${enc(run)}/atoms/${seq}`));
      }
    };
    await Promise.all(Array.from({ length: Math.min(2, own.length) }, worker));
    const frames = new Map<number, FrameView>();
    if (forkedAt > 0) frames.set(forkedAt, base);
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
    for (const seq of own) {
      let isCp = false;
      for (const op of (atoms.get(seq)!.delta as Obj[]) ?? []) {
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
        }
      }
      if (!isCp) throw new Error(`ContinuumSaver: run ${run} seq ${seq} is a checkpoint in the index, but its atom writes none`);
      const channels = new Map<string, Stored>();
      for (const [ch, v] of scalars) channels.set(ch, { kind: "v", data: v });
      for (const [ch, a] of arrays) {
        if (a.n < 0) continue;
        const items = a.items.slice(0, a.n);
        if (items.length !== a.n || items.some((x) => x === undefined)) throw new Error(`ContinuumSaver: run ${run} at seq ${seq}: channel ${ch} lacks items of its ${a.n}`);
        channels.set(ch, { kind: "a", items });
      }
      frames.set(seq, { seq, record, channels, index: new Map(), writes: new Map() });
    }
    return { frames, last: latest };
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
      const ids = [...t.index.keys()].sort().reverse();
      const chosen: string[] = [];
      for (const id of ids) {
        if (idWanted && id !== idWanted) continue;
        if (beforeId && id >= beforeId) continue;
        if (filter && Object.keys(filter).length > 0) {
          const md = (await this.#decode(t.index.get(id)!.md)) as Record<string, unknown>;
          if (!Object.entries(filter).every(([k, v]) => deepEqual(md?.[k], v))) continue;
        }
        if (limit !== undefined) {
          if (limit <= 0) break;
          limit -= 1;
        }
        chosen.push(id);
      }
      // a run with many checkpoints listed is replayed from its deltas; the values they
      // share are decoded once, and the tuples of this call share those objects
      const perRun = new Map<string, number>();
      for (const id of chosen) perRun.set(t.index.get(id)!.run, (perRun.get(t.index.get(id)!.run) ?? 0) + 1);
      const replays = new Map<string, Promise<{ frames: Map<number, FrameView>; last: FrameView }>>();
      const cache = new Map<string, unknown>();
      for (const id of chosen) {
        const e = t.index.get(id)!;
        if ((perRun.get(e.run) ?? 0) < REPLAY_FROM) {
          yield await this.#tuple(t, id);
          continue;
        }
        if (!replays.has(e.run)) replays.set(e.run, this.#replay(e.run, chosen.map((c) => t.index.get(c)!).filter((x) => x.run === e.run).map((x) => x.seq)));
        const r = await replays.get(e.run)!;
        const at = r.frames.get(e.seq);
        yield at ? await this.#tuple(t, id, { at, writes: r.last }, cache) : await this.#tuple(t, id);
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
      let t = await this.#thread(threadId, ns);
      if (parentId && !t.index.has(parentId)) t = await this.#thread(threadId, ns, true);
      const parent = parentId ? t.index.get(parentId) : undefined;

      // the run the checkpoint goes to, and the frame it starts from
      let branch: Branch;
      let base: FrameView;
      if (parent) {
        const pb = t.branches.get(parent.run);
        if (pb && pb.head === parentId) {
          branch = pb;
          base = pb.last ?? (await this.#frame(pb.run, parent.seq));
        } else {
          const run = this.#threadPrefix(threadId, ns) + newBranchName();
          await this.client.fork(parent.run, parent.seq, run);
          base = await this.#frame(run, parent.seq);
          branch = { run, head: parentId, last: undefined };
          t.branches.set(run, branch);
        }
      } else {
        const run = this.#threadPrefix(threadId, ns) + newBranchName();
        if (run.length > 256) throw new Error(`ContinuumSaver: thread ${JSON.stringify(threadId)} with namespace ${JSON.stringify(ns)} makes a run id of ${run.length} bytes (256 at most)`);
        await this.client.run(run);
        base = emptyFrame();
        branch = { run, head: undefined, last: undefined };
        t.branches.set(run, branch);
      }
      const baseCp = base.record ? ((await this.#decode(base.record.cp)) as Checkpoint) : undefined;

      // the channels the checkpoint keeps: newVersions' with their new values, the others as the parent has them
      const want = new Map<string, Stored>();
      const values = checkpoint.channel_values ?? {};
      for (const ch of Object.keys(checkpoint.channel_versions ?? {}).concat(Object.keys(newVersions ?? {}))) {
        if (want.has(ch)) continue;
        if (newVersions && Object.prototype.hasOwnProperty.call(newVersions, ch)) {
          if (Object.prototype.hasOwnProperty.call(values, ch) && values[ch] !== undefined) want.set(ch, await this.#store(values[ch]));
        } else {
          const had = base.channels.get(ch);
          if (had && baseCp && baseCp.channel_versions?.[ch] === checkpoint.channel_versions?.[ch]) want.set(ch, had);
        }
      }

      const delta = new Delta();
      const channels = new Map<string, Stored>();
      for (const [ch, old] of base.channels) {
        if (!want.has(ch)) {
          removeChannel(delta, ch, old);
        }
      }
      for (const [ch, s] of want) {
        channels.set(ch, s);
        writeChannel(delta, ch, base.channels.get(ch), s);
      }
      const bare = copyCheckpoint(checkpoint) as Partial<Checkpoint>;
      delete bare.channel_values;
      const record: CpRecord = { id: checkpoint.id, cp: await this.#encode(bare) };
      if (parentId) record.parent = parentId;
      delta.set("cp", JSON.stringify(record));
      const md = await this.#encode(metadata);
      // the seq is the run's next: known once begun, so the index entry is written after begin
      const r = await this.client.run(branch.run);
      const atom = await r.begin({ takeover: true });
      const entry: Entry = { run: branch.run, seq: atom.seq, parent: parentId, md };
      delta.set(`i/${enc(checkpoint.id)}`, JSON.stringify([entry.run, entry.seq, entry.parent ?? null, entry.md]));
      try {
        await atom.commit(delta);
      } catch (e) {
        atom.stop();
        throw e;
      }
      const index = new Map(base.index);
      index.set(checkpoint.id, entry);
      t.index.set(checkpoint.id, entry);
      branch.head = checkpoint.id;
      branch.last = { seq: atom.seq, record, channels, index, writes: new Map(base.writes) };
    });
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const threadId = must(config.configurable?.thread_id, "thread_id");
    const ns: string = config.configurable?.checkpoint_ns ?? "";
    const id = must(config.configurable?.checkpoint_id, "checkpoint_id");
    await this.#locked(threadKey(threadId, ns), async () => {
      let t = await this.#thread(threadId, ns);
      if (!t.index.has(id)) t = await this.#thread(threadId, ns, true);
      const e = t.index.get(id);
      if (!e) throw new Error(`ContinuumSaver.putWrites: no checkpoint ${id} in thread ${JSON.stringify(threadId)} (namespace ${JSON.stringify(ns)})`);
      const b = t.branches.get(e.run);
      const cur = b?.last && b.head !== undefined ? b.last : await this.#frame(e.run);
      const delta = new Delta();
      const added = new Map<string, WriteRec>();
      for (let i = 0; i < writes.length; i++) {
        const [channel, value] = writes[i];
        const idx = WRITES_IDX_MAP[channel] ?? i;
        const key = `w/${enc(id)}/${enc(taskId)}/${idx}`;
        if (idx >= 0 && (cur.writes.has(key) || added.has(key))) continue;
        const rec: WriteRec = [taskId, channel, await this.#encode(value), taskPath ?? ""];
        added.set(key, rec);
        delta.set(key, JSON.stringify(rec));
      }
      if (added.size === 0) return;
      await this.#commit(e.run, delta);
      if (b?.last && b.head !== undefined) for (const [k, w] of added) b.last.writes.set(k, w);
    });
  }

  /** Deletes every checkpoint and write of the thread, in every namespace: its runs end (cancelled) and leave the saver's view. */
  async deleteThread(threadId: string): Promise<void> {
    const prefix = this.#threadPrefix(threadId);
    for (const run of await this.#runs(prefix)) {
      const r = await this.client.run(run);
      await r.end("cancelled", "deleted by deleteThread");
    }
    for (const k of [...this.#threads.keys()]) if (JSON.parse(k)[0] === threadId) this.#threads.delete(k);
  }
}

// ---- helpers ------------------------------------------------------------

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

function emptyFrame(): FrameView {
  return { seq: 0, record: undefined, channels: new Map(), index: new Map(), writes: new Map() };
}

function removeChannel(d: Delta, ch: string, old: Stored): void {
  if (old.kind === "v") {
    d.delete(`c/${enc(ch)}`);
    return;
  }
  d.delete(`n/${enc(ch)}`);
  for (let i = 0; i < old.items.length; i++) d.delete(`a/${enc(ch)}/${i}`);
}

/** The ops that turn channel ch from old into s: an array that extends old's gets its new items only. */
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
  let same = 0;
  while (same < prev.length && same < s.items.length && prev[same] === s.items[same]) same++;
  for (let i = same; i < s.items.length; i++) d.set(`a/${enc(ch)}/${i}`, s.items[i]);
  for (let i = s.items.length; i < prev.length; i++) d.delete(`a/${enc(ch)}/${i}`);
  if (!old || prev.length !== s.items.length) d.set(`n/${enc(ch)}`, String(s.items.length));
}

/** A frame as GET /state answers it, read as the saver's keys. */
export function parseFrame(o: Obj): FrameView {
  const mem = (o.memory as Record<string, string> | undefined) ?? {};
  if (o.memory_base64 && Object.keys(o.memory_base64 as Obj).length > 0) {
    throw new Error(`ContinuumSaver: run ${String(o.run)} holds memory that is not UTF-8: not written by this saver`);
  }
  const f: FrameView = { seq: Number(o.seq), record: undefined, channels: new Map(), index: new Map(), writes: new Map() };
  const arrays = new Map<string, number>();
  for (const [k, v] of Object.entries(mem)) {
    if (k === "cp") f.record = JSON.parse(v) as CpRecord;
    else if (k.startsWith("c/")) f.channels.set(dec(k.slice(2)), { kind: "v", data: v });
    else if (k.startsWith("n/")) arrays.set(dec(k.slice(2)), Number(v));
    else if (k.startsWith("i/")) {
      const [run, seq, parent, md] = JSON.parse(v) as [string, number, string | null, string];
      f.index.set(dec(k.slice(2)), { run, seq, parent: parent ?? undefined, md });
    } else if (k.startsWith("w/")) f.writes.set(k, JSON.parse(v) as WriteRec);
  }
  for (const [ch, n] of arrays) {
    const items: string[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const it = mem[`a/${enc(ch)}/${i}`];
      if (it === undefined) throw new Error(`ContinuumSaver: run ${String(o.run)} at seq ${String(o.seq)}: channel ${ch} lacks item ${i} of ${n}`);
      items[i] = it;
    }
    f.channels.set(ch, { kind: "a", items });
  }
  return f;
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
