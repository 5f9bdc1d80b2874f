/**
 * Blobs: large values kept outside the log, streamed both ways.
 *
 * A value too large for a run's frame (a page, a PDF, a long tool output)
 * is uploaded as a blob and referenced by its reference value, a short
 * string put where the value would stand (a memory value, a tool output, a
 * message's text):
 *
 *     const ref = await putBlob(atom, createReadStream("page.html"), { mediaType: "text/html" });
 *     atom.delta.set("page", ref.value);
 *     ...
 *     const r = parseRef((await run.state()).memory.get("page"));
 *     for await (const chunk of await openBlob(client, run.id, r!)) { ... }
 *
 * Both directions stream (a chunked upload, the answer read as it
 * arrives): neither the client nor continuumd holds more than about a
 * chunk of it. The server checks each 1 MiB chunk of a download against
 * the blob's hash before it sends it; a damaged blob ends the transfer
 * early, which the stream reports as an error, never as a short body.
 * These are functions of their own, not methods of Client or Atom.
 */

import * as http from "node:http";
import * as https from "node:https";
import { Readable } from "node:stream";
import type { Atom, Client } from "./client.js";
import { ContinuumError, errorFromAnswer } from "./errors.js";
import type { Endpoint } from "./transport.js";

/** The endpoint of each Client, for the streamed requests here (set by Client's constructor). */
export const endpoints = new WeakMap<object, Endpoint>();

/** The start of a reference value (Go's blob.ValuePrefix). */
export const VALUE_PREFIX = "\u0000continuum-blob:";

const VALUE = /^\u0000continuum-blob:([0-9a-f]{64})\/(0|[1-9][0-9]{0,18})(?:;([^\u0000]+))?$/s;

/** A blob's reference: its tree hash (hex), size and media type. */
export class BlobRef {
  constructor(readonly hash: string, readonly size: number, readonly mediaType = "") {}

  /** The reference value: put it in a delta to reference the blob. */
  get value(): string {
    return `${VALUE_PREFIX}${this.hash}/${this.size}` + (this.mediaType ? ";" + this.mediaType : "");
  }

  toString(): string {
    return `blake3t:${this.hash}/${this.size}` + (this.mediaType ? " " + this.mediaType : "");
  }
}

/** The reference a value of a state holds, or null if it is not a reference value. */
export function parseRef(value: string | Uint8Array | undefined | null): BlobRef | null {
  if (value === undefined || value === null) return null;
  const s = typeof value === "string" ? value : new TextDecoder("utf-8", { fatal: false }).decode(value);
  const m = VALUE.exec(s);
  if (!m) return null;
  return new BlobRef(m[1]!, Number(m[2]), m[3] ?? "");
}

function endpointOf(client: Client): Endpoint {
  const ep = endpoints.get(client);
  if (!ep) throw new TypeError("not a Client of this package");
  return ep;
}

function options(ep: Endpoint, method: string, path: string, headers: Record<string, string>): https.RequestOptions {
  headers.Accept = "application/json";
  if (ep.token) headers.Authorization = "Bearer " + ep.token;
  const o: https.RequestOptions = { method, path, headers, timeout: ep.timeoutMs, agent: false };
  if (ep.socketPath) o.socketPath = ep.socketPath;
  else {
    o.host = ep.host;
    o.port = ep.port;
    if (ep.ca) o.ca = ep.ca;
  }
  return o;
}

async function readError(res: http.IncomingMessage): Promise<Error> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  let body: unknown = null;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    body = null;
  }
  return errorFromAnswer(res.statusCode ?? 0, body);
}

export interface PutBlobOptions {
  /** The blob's media type (the upload's Content-Type). */
  mediaType?: string;
}

/**
 * Uploads data (bytes, or any async iterable of bytes such as a file's
 * read stream) as a blob of the atom's attempt, with chunked transfer
 * encoding, and returns its reference: put `ref.value` in the atom's
 * delta to reference it. The blob is durable when this returns; the same
 * bytes uploaded again are stored once. Not retried (a stream cannot be
 * read twice): on a transport error, upload again.
 */
export async function putBlob(atom: Atom, data: Uint8Array | AsyncIterable<Uint8Array> | Iterable<Uint8Array>, o: PutBlobOptions = {}): Promise<BlobRef> {
  const ep = endpointOf(atom.run.client);
  await atom.ready(); // begins the atom if its first request was not made
  const path = `${atom.run.path}/attempts/${atom.attempt}/blobs`;
  const headers: Record<string, string> = {};
  if (o.mediaType) headers["Content-Type"] = o.mediaType;
  const lib = ep.tls ? https : http;
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    const req = lib.request(options(ep, "POST", path, headers), resolve);
    req.on("timeout", () => req.destroy(new Error(`no answer in ${ep.timeoutMs} ms`)));
    req.on("error", (e) => reject(new ContinuumError(`POST ${path}: ${e.message}`)));
    const src = data instanceof Uint8Array ? Readable.from([data]) : Readable.from(data as AsyncIterable<Uint8Array>);
    src.on("error", (e) => req.destroy(e));
    src.pipe(req);
  });
  if (res.statusCode !== 200) throw await readError(res);
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  const b = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { hash: string; size: number; media_type?: string };
  return new BlobRef(String(b.hash), Number(b.size), b.media_type ?? "");
}

/**
 * Opens the blob ref (a BlobRef, or a reference value) that run
 * references, as a readable stream of its bytes. A transfer that ends
 * short of the blob's size (a damaged chunk on the server, a lost
 * connection) ends the stream with an error.
 */
export async function openBlob(client: Client, run: string, ref: BlobRef | string): Promise<Readable> {
  const r = typeof ref === "string" ? parseRef(ref) : ref;
  if (!r) throw new TypeError("not a reference value");
  const ep = endpointOf(client);
  let path = `/v1/runs/${encodeURIComponent(run)}/blobs/${r.hash}/${r.size}`;
  if (r.mediaType) path += "?media_type=" + encodeURIComponent(r.mediaType);
  const lib = ep.tls ? https : http;
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    const req = lib.request(options(ep, "GET", path, {}), resolve);
    req.on("timeout", () => req.destroy(new Error(`no answer in ${ep.timeoutMs} ms`)));
    req.on("error", (e) => reject(new ContinuumError(`GET ${path}: ${e.message}`)));
    req.end();
  });
  if (res.statusCode !== 200) throw await readError(res);
  let left = r.size;
  async function* checked(): AsyncGenerator<Buffer> {
    try {
      for await (const c of res) {
        left -= (c as Buffer).length;
        yield c as Buffer;
      }
    } catch (e) {
      throw new ContinuumError(`the blob's transfer ended ${left} bytes short: damaged on the server, or the connection was lost (${(e as Error).message})`);
    }
    if (left !== 0) throw new ContinuumError(`the blob's transfer ended ${left} bytes short: damaged on the server, or the connection was lost`);
  }
  return Readable.from(checked(), { objectMode: false });
}
