/**
 * Streams out of runs: an atom appends chunks (tokens, progress) to a named
 * stream of its run while it works, before it commits; anyone reads a
 * stream from an offset and follows its tail.
 *
 *     await run.atom(async (atom) => {
 *       for await (const token of llm.stream(prompt)) await atom.append("tokens", token);
 *     });
 *     for await (const chunk of run.follow("tokens", { from: nextOffset })) show(chunk);
 *
 * Offsets are the log's: a reader that resumes from the offset after the
 * last chunk it read sees each chunk once, across its own crash and the
 * server's. Each chunk names the atom's seq and attempt; its status says
 * whether that attempt committed, failed, was abandoned (it stopped and a
 * later attempt of the same seq ran, or the run ended) or is still open. A
 * chunk is readable, and durable, at the server's next group commit after
 * append resolves (flush: true waits for it).
 *
 * The methods are added to Run and Atom here (this module is imported by
 * the package's index).
 */

import { Atom, Run } from "./client.js";
import { type Bytes, type Obj, getBytes, putBytes, seg } from "./wire.js";

/** One chunk of a stream. */
export interface StreamChunk {
  offset: number;
  /** The atom that appended it. */
  seq: number;
  /** That atom's attempt, from 1 (the engine's count, not an attempt id). */
  attempt: number;
  /** open, committed, failed or abandoned, when read. */
  status: "open" | "committed" | "failed" | "abandoned";
  data: Uint8Array;
}

/** What one read returns: the chunks, the offset to read from next, whether the stream ended. */
export interface StreamBatch {
  chunks: StreamChunk[];
  next: number;
  ended: boolean;
}

export interface StreamInfo {
  name: string;
  /** Durable chunks: the next offset a reader of the tail waits for. */
  chunks: number;
}

export interface ReadStreamOptions {
  /** The first offset (default 0). */
  from?: number;
  /** At most this many chunks (default 1000, at most 10000). */
  max?: number;
  /** Wait up to this long for a chunk when there is none (default 0; at most the server's call wait, 20 s). */
  waitMs?: number;
}

export interface FollowOptions {
  from?: number;
  /** Each long poll's wait (default 10 s). */
  pollMs?: number;
  /** Stop when a poll brings nothing instead of when the run ended. */
  untilIdle?: boolean;
}

declare module "./client.js" {
  interface Run {
    /** The durable chunks of stream `name` from an offset (a long poll with waitMs). */
    readStream(name: string, o?: ReadStreamOptions): Promise<StreamBatch>;
    /** The chunks of stream `name` as they become durable, until the run ended and every one was yielded. */
    follow(name: string, o?: FollowOptions): AsyncGenerator<StreamChunk, void, void>;
    /** The run's streams that have durable chunks, by name. */
    streams(): Promise<StreamInfo[]>;
  }
  interface Atom {
    /**
     * Appends the chunks, in order, to stream `name` of the run as part of
     * this attempt; resolves to the first one's offset. Readers see them
     * before the atom commits. At most 1 MiB a chunk, 1024 per call.
     */
    append(name: string, chunks: Bytes | Bytes[], o?: { flush?: boolean }): Promise<number>;
  }
}

function chunkOf(m: Obj): StreamChunk {
  return {
    offset: Number(m.offset), seq: Number(m.seq), attempt: Number(m.attempt),
    status: m.status as StreamChunk["status"], data: getBytes(m, "data") ?? new Uint8Array(),
  };
}

Run.prototype.readStream = async function (this: Run, name: string, o: ReadStreamOptions = {}): Promise<StreamBatch> {
  let q = `?from=${o.from ?? 0}&wait_ms=${Math.floor(o.waitMs ?? 0)}`;
  if (o.max !== undefined) q += `&max=${o.max}`;
  const r = await this.client.request({ kind: "request", method: "GET", path: `${this.path}/streams/${seg(name)}${q}` });
  return { chunks: (r.chunks as Obj[]).map(chunkOf), next: Number(r.next), ended: r.ended === true };
};

Run.prototype.follow = async function* (this: Run, name: string, o: FollowOptions = {}): AsyncGenerator<StreamChunk, void, void> {
  let next = o.from ?? 0;
  for (;;) {
    const b = await this.readStream(name, { from: next, waitMs: o.pollMs ?? 10_000 });
    yield* b.chunks;
    next = b.next;
    if (b.ended || (o.untilIdle && b.chunks.length === 0)) return;
  }
};

Run.prototype.streams = async function (this: Run): Promise<StreamInfo[]> {
  const r = await this.client.request({ kind: "request", method: "GET", path: `${this.path}/streams` });
  return (r.streams as Obj[]).map((s) => ({ name: String(s.name), chunks: Number(s.chunks) }));
};

/**
 * Per atom, the chunks its attempts appended to each stream (keyed by the
 * attempt's path and the stream's name), sent as each append's index so
 * that the client's retries after a lost answer never append a chunk
 * twice, and the tail of its appends: one at a time, in the order made.
 */
const appended = new WeakMap<Atom, { counts: Map<string, number>; tail: Promise<unknown> }>();

Atom.prototype.append = async function (this: Atom, name: string, chunks: Bytes | Bytes[], o: { flush?: boolean } = {}): Promise<number> {
  const list = Array.isArray(chunks) ? chunks : [chunks];
  if (list.length === 0) throw new TypeError("append: no chunk");
  await this.ready();
  let st = appended.get(this);
  if (!st) {
    st = { counts: new Map(), tail: Promise.resolve() };
    appended.set(this, st);
  }
  const counts = st.counts;
  const send = async (): Promise<number> => {
    const key = `${this.path}\n${name}`;
    const index = counts.get(key) ?? 0;
    const r = await sendAppend(this, name, list, o.flush === true, index);
    counts.set(key, index + list.length);
    return r;
  };
  const p = st.tail.then(send, send);
  st.tail = p.catch(() => undefined);
  return p;
};

async function sendAppend(atom: Atom, name: string, list: Bytes[], flush: boolean, index: number): Promise<number> {
  const body: Obj = { flush, index };
  if (list.length === 1) putBytes(body, "data", list[0]!);
  else {
    body.chunks = list.map((c) => {
      const item: Obj = {};
      putBytes(item, "data", c);
      return item;
    });
  }
  const r = await atom.run.client.request({ kind: "request", method: "POST", path: `${atom.path}/streams/${seg(name)}`, body });
  return Number(r.offset);
}
