/**
 * The requests of a Client to continuumd over its Unix socket or TCP
 * (TLS for an https URL), in one of the two framings of the protocol,
 * each a small client of its own on node:net and node:tls:
 *
 * - continuum-frames/1 (the default; continuumd's binary framing):
 *   after a 20-byte preface each way, a request is a frame (length, id,
 *   head "METHOD TARGET\n" and header lines, body) and its answer a frame
 *   with the same id ("STATUS\n", headers, body). One connection carries
 *   all of a client's requests in flight, pipelined, answered in any
 *   order; requests written in one tick go out in one write. A server
 *   that answers the preface with HTTP, or closes two connections in a
 *   row before it (an older continuumd), gets the same requests over
 *   HTTP, and HTTP from then on. A body over 64 KiB goes over HTTP.
 * - HTTP/1.1 (transport "http", and blob transfers in blobs.ts): each
 *   request in one write (header and body together), answers with a
 *   Content-Length or chunked body, connections kept alive for the next
 *   request: one request at a time per connection, a new connection for a
 *   request made while the others are busy, idle ones kept (and not
 *   keeping the process alive) until the server closes them or close() is
 *   called. node:http spent about 300 µs of CPU per request in this
 *   process against about 80 µs here (bench/RESULTS-wire-2026-12-06.md).
 *
 * Either way a request that gets no answer (the connection broke, was
 * closed, or the answer did not parse) fails with TransportError, and the
 * caller sends it again (every request of the protocol may be repeated).
 */

import * as net from "node:net";
import * as tls from "node:tls";
import { readFileSync } from "node:fs";
import { ContinuumError } from "./errors.js";

export interface Endpoint {
  socketPath?: string;
  host: string;
  port: number;
  tls: boolean;
  ca?: Buffer;
  token?: string;
  timeoutMs: number;
  /** Forced by the options; undefined: frames, falling back to HTTP for a server without them. */
  transport?: "frames" | "http";
}

export interface ConnectOptions {
  /** The server's Unix socket (continuumd --store DIR serves DIR.sock). */
  socket?: string;
  /** http://HOST:PORT or https://HOST:PORT of its --listen; needs token. */
  url?: string;
  /** The bearer token of the server's --token-file. */
  token?: string;
  /** A CA certificate file (PEM) for a server's own TLS certificate. */
  caFile?: string;
  /** Per request, in milliseconds. Default 60 s. */
  timeoutMs?: number;
  /** How long requests are retried through transport errors and shutting_down, in milliseconds. Default 30 s. */
  retryForMs?: number;
  /**
   * "frames": continuum-frames/1 only; "http": HTTP/1.1 only. Default:
   * frames, and HTTP for a server that does not speak them (an older
   * continuumd). Blob transfers are HTTP whatever this says.
   */
  transport?: "frames" | "http";
}

export function endpoint(o: ConnectOptions): Endpoint {
  const timeoutMs = o.timeoutMs ?? 60_000;
  if ((o.socket === undefined) === (o.url === undefined)) throw new TypeError("give the server's socket path or its url, one of them");
  if (o.transport !== undefined && o.transport !== "frames" && o.transport !== "http") throw new TypeError(`transport ${JSON.stringify(o.transport)}: want "frames" or "http"`);
  const transport = o.transport === undefined ? {} : { transport: o.transport };
  if (o.socket !== undefined) return { socketPath: o.socket, host: "localhost", port: 0, tls: false, timeoutMs, ...(o.token ? { token: o.token } : {}), ...transport };
  const u = new URL(o.url!);
  if ((u.protocol !== "http:" && u.protocol !== "https:") || !u.hostname) throw new TypeError(`url ${o.url}: want http://HOST:PORT or https://HOST:PORT`);
  if (!o.token) throw new TypeError("a TCP server needs its bearer token (token)");
  const tls = u.protocol === "https:";
  return {
    host: u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname,
    port: Number(u.port || (tls ? 443 : 80)),
    tls,
    token: o.token,
    timeoutMs,
    ...transport,
    ...(o.caFile ? { ca: readFileSync(o.caFile) } : {}),
  };
}

/** Thrown for a request that got no HTTP answer. */
export class TransportError extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
    this.name = "TransportError";
  }
}

/** The largest answer header read (the server's are a few hundred bytes). */
const maxHeaderBytes = 64 << 10;

const CRLFCRLF = Buffer.from("\r\n\r\n");

/** An answer being read: its status and how its body is framed, once its header is in. */
interface Reading {
  status: number;
  close: boolean; // Connection: close, or a body that ends with the connection
  length: number; // Content-Length; -1: chunked; -2: until the connection ends
  start: number; // where the body begins in the buffer
}

/**
 * One connection to the server, one request at a time. Bytes are
 * gathered until a whole answer is in; then the request's promise is
 * settled and the connection goes back to its Transport, or is closed.
 */
class Conn {
  readonly sock: net.Socket;
  #buf: Buffer = Buffer.alloc(0);
  #reading: Reading | null = null;
  #done: ((err: Error | null, status?: number, data?: Buffer) => void) | null = null;
  #what = "";
  dead = false;

  constructor(
    readonly owner: HttpPool,
    ep: Endpoint,
  ) {
    this.sock = dial(ep);
    this.sock.on("data", (d: Buffer) => this.#data(d));
    this.sock.on("end", () => this.#end());
    this.sock.on("error", (e) => this.#fail(e));
    this.sock.on("close", () => this.#fail(new Error("the server closed the connection")));
    this.sock.on("timeout", () => this.sock.destroy(new Error(`no answer in ${ep.timeoutMs} ms`)));
  }

  /** Sends one request (head and body in one write); done is called once, with the answer or the error. */
  send(what: string, head: string, body: Uint8Array | undefined, timeoutMs: number, done: (err: Error | null, status?: number, data?: Buffer) => void): void {
    this.#what = what;
    this.#done = done;
    this.#buf = Buffer.alloc(0);
    this.#reading = null;
    this.sock.ref();
    this.sock.setTimeout(timeoutMs);
    const h = Buffer.from(head, "latin1");
    this.sock.write(body === undefined || body.length === 0 ? h : Buffer.concat([h, body]));
  }

  #data(d: Buffer): void {
    if (this.#done === null) {
      // bytes no request asked for: the connection is out of step
      this.sock.destroy();
      return;
    }
    this.#buf = this.#buf.length === 0 ? d : Buffer.concat([this.#buf, d]);
    let r: Reading | null;
    for (;;) {
      r = this.#reading ?? this.#header();
      if (r === null) return; // more of the header to come (or failed)
      if (r.status >= 200) break;
      // 1xx: an interim answer, the final one follows
      this.#buf = this.#buf.subarray(r.start);
      this.#reading = null;
    }
    if (r.length >= 0) {
      if (this.#buf.length - r.start < r.length) return;
      this.#finish(r, this.#buf.subarray(r.start, r.start + r.length), this.#buf.length - r.start > r.length);
    } else if (r.length === -1) {
      const body = this.#chunked(r.start);
      if (body !== null) this.#finish(r, body.data, body.extra);
    }
    // -2: read until the connection ends (#end)
  }

  /** Parses the answer's header once it is whole; null until then, or after failing the request. */
  #header(): Reading | null {
    const i = this.#buf.indexOf(CRLFCRLF);
    if (i < 0) {
      if (this.#buf.length > maxHeaderBytes) this.#protocol(`an answer header longer than ${maxHeaderBytes} bytes`);
      return null;
    }
    const lines = this.#buf.toString("latin1", 0, i).split("\r\n");
    const m = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0]!);
    if (!m) {
      this.#protocol(`not an HTTP/1.x answer: ${JSON.stringify(lines[0]!.slice(0, 80))}`);
      return null;
    }
    const status = Number(m[2]);
    let length = -2;
    let close = m[1] === "0";
    for (let k = 1; k < lines.length; k++) {
      const line = lines[k]!;
      const c = line.indexOf(":");
      if (c <= 0) continue;
      const name = line.slice(0, c).trim().toLowerCase();
      const value = line.slice(c + 1).trim().toLowerCase();
      if (name === "content-length") {
        if (!/^\d+$/.test(value)) {
          this.#protocol(`Content-Length ${JSON.stringify(value)}`);
          return null;
        }
        if (length !== -1) length = Number(value);
      } else if (name === "transfer-encoding") {
        if (value !== "chunked") {
          this.#protocol(`Transfer-Encoding ${JSON.stringify(value)}`);
          return null;
        }
        length = -1;
      } else if (name === "connection") {
        if (value === "close") close = true;
        else if (value === "keep-alive") close = false;
      }
    }
    if (status < 200 || status === 204 || status === 304) length = 0;
    if (length === -2) close = true;
    this.#reading = { status, close, length, start: i + 4 };
    return this.#reading;
  }

  /** Decodes a chunked body from start, if it is all in: the body, and whether bytes follow it. */
  #chunked(start: number): { data: Buffer; extra: boolean } | null {
    const parts: Buffer[] = [];
    let p = start;
    const buf = this.#buf;
    for (;;) {
      const eol = buf.indexOf("\r\n", p);
      if (eol < 0) return null;
      const size = parseInt(buf.toString("latin1", p, eol).split(";")[0]!.trim(), 16);
      if (!Number.isInteger(size) || size < 0) {
        this.#protocol("a malformed chunk size");
        return null;
      }
      if (size === 0) {
        // trailers, if any, then an empty line
        const end = buf.indexOf(CRLFCRLF, eol);
        if (end < 0) return null;
        return { data: Buffer.concat(parts), extra: buf.length > end + 4 };
      }
      if (buf.length < eol + 2 + size + 2) return null;
      parts.push(buf.subarray(eol + 2, eol + 2 + size));
      p = eol + 2 + size + 2;
    }
  }

  #finish(r: Reading, data: Buffer, extra: boolean): void {
    const done = this.#done!;
    this.#done = null;
    this.#reading = null;
    this.#buf = Buffer.alloc(0);
    if (r.close || extra) this.close();
    else {
      this.sock.setTimeout(0);
      this.owner.release(this);
    }
    done(null, r.status, Buffer.from(data)); // a copy: data may share the read buffer
  }

  #end(): void {
    const r = this.#reading;
    if (this.#done !== null && r !== null && r.length === -2) {
      const body = this.#buf.subarray(r.start);
      this.#finish(r, body, false);
      return;
    }
    this.#fail(new Error("the server closed the connection"));
  }

  #protocol(msg: string): void {
    this.sock.destroy(new Error(`the server's answer: ${msg}`));
  }

  /** Ends the connection; a request in flight fails. */
  #fail(e: Error): void {
    if (!this.dead) {
      this.dead = true;
      this.owner.forget(this);
      this.sock.destroy();
    }
    const done = this.#done;
    this.#done = null;
    if (done) done(new TransportError(`${this.#what}: ${e.message}`, e));
  }

  close(): void {
    this.#fail(new Error("the connection was closed"));
  }
}

/** HTTP/1.1 connections to one endpoint: one request at a time on each, idle ones kept. */
export class HttpPool {
  /** Connections idle, the most recently used last. */
  readonly #idle: Conn[] = [];
  readonly #all = new Set<Conn>();
  #auth = "";

  constructor(readonly ep: Endpoint) {
    if (ep.token) this.#auth = "Authorization: Bearer " + ep.token + "\r\n";
  }

  request(method: string, path: string, body?: Uint8Array): Promise<Answer> {
    const what = `${method} ${path}`;
    let head = `${method} ${path} HTTP/1.1\r\nHost: ${this.ep.socketPath ? "localhost" : hostHeader(this.ep)}\r\nAccept: application/json\r\n${this.#auth}`;
    if (body !== undefined) head += `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n`;
    head += "\r\n";
    let c = this.#idle.pop();
    if (c === undefined) {
      c = new Conn(this, this.ep);
      this.#all.add(c);
    }
    const conn = c;
    return new Promise((resolve, reject) => {
      conn.send(what, head, body, this.ep.timeoutMs, (err, status, data) => {
        if (err) reject(err);
        else resolve({ status: status!, data: data! });
      });
    });
  }

  /** Takes back a connection whose answer was read whole. */
  release(c: Conn): void {
    if (c.dead) return;
    c.sock.unref(); // an idle connection does not keep the process alive
    this.#idle.push(c);
  }

  /** Drops a connection that ended. */
  forget(c: Conn): void {
    this.#all.delete(c);
    const i = this.#idle.indexOf(c);
    if (i >= 0) this.#idle.splice(i, 1);
  }

  /** Closes every connection (requests in flight fail with TransportError); a later request opens a new one. */
  close(): void {
    for (const c of [...this.#all]) c.close();
  }
}

/** An answer: its status and its body. */
export interface Answer {
  status: number;
  data: Buffer;
}

/** The preface of continuum-frames/1 (a zero byte, then ASCII), written first by both sides. */
export const PREFACE = Buffer.from("\x00continuum-frames/1\n", "latin1");

/**
 * The requests a server reads in flight on one frames connection (the
 * spec's 128): a request beyond them goes on another connection, so that
 * long polls holding ids never hold up the requests behind them.
 */
export const maxInFlight = 128;

/** The largest answer frame read (n): past it the framing is not trusted. */
const maxFrameBytes = 1 << 30;

/**
 * The largest request body sent in a frame; a larger one goes over HTTP.
 * A frame longer than a head (64 KiB) and the server's --max-body (1 KiB
 * to 128 MiB) is a protocol error that closes the connection, where HTTP
 * answers 413 too_large: up to 64 KiB a body fits under any --max-body's
 * limit, and gets its 413 in a frame when it is over.
 */
export const maxFrameBody = 64 << 10;

/** The last id of a connection: after it the connection takes no new requests and closes once answered. */
const maxId = 0xffffffff;

/**
 * One request frame in one buffer: n (u32 BE, the bytes after it), id
 * (u32 BE), hlen (u32 BE), the head (UTF-8) and the body.
 */
export function encodeFrame(id: number, head: string, body?: Uint8Array): Buffer {
  const hlen = Buffer.byteLength(head, "utf8");
  const blen = body === undefined ? 0 : body.length;
  if (8 + hlen + blen > maxId) throw new RangeError(`a request of ${hlen + blen} bytes does not fit a frame`);
  const f = Buffer.allocUnsafe(12 + hlen + blen);
  f.writeUInt32BE(8 + hlen + blen, 0);
  f.writeUInt32BE(id, 4);
  f.writeUInt32BE(hlen, 8);
  f.write(head, 12, hlen, "utf8");
  if (blen !== 0) f.set(body!, 12 + hlen);
  return f;
}

/** A request sent on a frames connection, waiting for its answer. */
interface Pending {
  method: string;
  path: string;
  body: Uint8Array | undefined;
  resolve: (a: Answer) => void;
  reject: (e: Error) => void;
  /** When it times out (performance.now(), ms). */
  deadline: number;
  /** The connection's count of reads when it was sent. */
  reads: number;
}

function transportError(p: Pending, e: Error): TransportError {
  return new TransportError(`${p.method} ${p.path}: ${e.message}`, e);
}

/**
 * The server answered the preface with something else (an HTTP answer:
 * an older continuumd), and the client was made with transport "frames".
 */
export class FramesUnsupported extends ContinuumError {}

/**
 * One continuum-frames/1 connection: requests are written as they come
 * (those of one tick in one write), each with the next id, and answers
 * are matched to them by id in whatever order they arrive. The server's
 * preface is checked before the first answer.
 */
class FramesConn {
  readonly sock: net.Socket;
  readonly #pending = new Map<number, Pending>();
  #next = 1;
  #preface = 0; // bytes of the server's preface read and checked
  #chunks: Buffer[] = []; // bytes of a frame not yet whole
  #have = 0; // their length
  #need = 4; // bytes needed before a frame can be parsed further
  #reads = 0;
  #connected = false;
  #corked = false;
  /**
   * One timer for the requests in flight, set for the oldest one's
   * deadline: requests are sent in order with the same timeout, so the
   * map's order is their deadlines' (no timer set and cleared per request).
   */
  #timer: NodeJS.Timeout | undefined;
  dead = false;
  /** Past its last id: no new requests; closed once the last answer is in. */
  retired = false;

  constructor(
    readonly owner: Transport,
    readonly ep: Endpoint,
  ) {
    this.sock = dial(ep);
    this.sock.once(ep.tls ? "secureConnect" : "connect", () => (this.#connected = true));
    this.sock.on("data", (d: Buffer) => this.#data(d));
    this.sock.on("end", () => this.#fail(new Error("the server closed the connection")));
    this.sock.on("error", (e) => this.#fail(e));
    this.sock.on("close", () => this.#fail(new Error("the server closed the connection")));
    this.sock.unref(); // kept alive by requests in flight only
    this.#write(PREFACE);
  }

  get inFlight(): number {
    return this.#pending.size;
  }

  /** Sends one request; its promise settles with its answer, or a TransportError. */
  send(method: string, path: string, head: string, body: Uint8Array | undefined): Promise<Answer> {
    const id = this.#next++;
    if (this.#next > maxId) {
      this.retired = true;
      this.owner.forget(this);
    }
    const frame = encodeFrame(id, head, body);
    return new Promise((resolve, reject) => {
      if (this.#pending.size === 0) this.sock.ref();
      this.#pending.set(id, { method, path, body, resolve, reject, reads: this.#reads, deadline: performance.now() + this.ep.timeoutMs });
      this.#timer ??= setTimeout(this.#expire, this.ep.timeoutMs).unref(); // the socket keeps the process alive while requests are in flight
      this.#write(frame);
    });
  }

  /**
   * Writes b with everything else written in this tick: one write, one
   * system call (16 requests at once: 9.4 µs of CPU per request against
   * 13.2 µs written apart; scripts/transport-cpu.mjs).
   */
  #write(b: Buffer): void {
    if (!this.#corked) {
      this.#corked = true;
      this.sock.cork();
      process.nextTick(() => {
        this.#corked = false;
        this.sock.uncork();
      });
    }
    this.sock.write(b);
  }

  #data(d: Buffer): void {
    this.#reads++;
    if (this.#preface < PREFACE.length) {
      const k = Math.min(PREFACE.length - this.#preface, d.length);
      if (PREFACE.compare(d, 0, k, this.#preface, this.#preface + k) !== 0) {
        this.#notFrames(this.#preface === 0 ? d : Buffer.concat([PREFACE.subarray(0, this.#preface), d]));
        return;
      }
      this.#preface += k;
      if (this.#preface === PREFACE.length) this.owner.prefaced();
      if (k === d.length) return;
      d = d.subarray(k);
    }
    if (this.#have + d.length < this.#need) {
      this.#chunks.push(d);
      this.#have += d.length;
      return;
    }
    let buf = d;
    if (this.#have !== 0) {
      this.#chunks.push(d);
      buf = Buffer.concat(this.#chunks, this.#have + d.length);
      this.#chunks = [];
      this.#have = 0;
    }
    this.#need = 4;
    let p = 0;
    while (buf.length - p >= 4 && !this.dead) {
      const n = buf.readUInt32BE(p);
      if (n < 8 || n > maxFrameBytes) return this.#protocol(`a frame of ${n} bytes`);
      if (buf.length - p - 4 < n) {
        this.#need = 4 + n;
        break;
      }
      const id = buf.readUInt32BE(p + 4);
      const hlen = buf.readUInt32BE(p + 8);
      if (hlen > n - 8) return this.#protocol(`a frame of ${n} bytes with a head of ${hlen}`);
      const hs = p + 12;
      p += 4 + n;
      this.#answer(id, buf, hs, hs + hlen, p);
    }
    if (p < buf.length && !this.dead) {
      this.#chunks.push(buf.subarray(p));
      this.#have = buf.length - p;
    }
  }

  /** The answer framed in buf: its head from hs, its body from bs to end. */
  #answer(id: number, buf: Buffer, hs: number, bs: number, end: number): void {
    const p = this.#pending.get(id);
    if (p === undefined) {
      if (id >= 1 && id < this.#next) return; // a request that timed out: its answer came late
      return this.#protocol(`an answer to request ${id}, which was not sent`);
    }
    // "STATUS\n" (three digits), then header lines this client does not need
    const a = buf[hs]! - 48;
    const b = buf[hs + 1]! - 48;
    const c = buf[hs + 2]! - 48;
    if (bs - hs < 4 || buf[hs + 3] !== 10 || !(a >= 1 && a <= 5) || !(b >= 0 && b <= 9) || !(c >= 0 && c <= 9)) {
      const line = buf.toString("latin1", hs, Math.min(bs, hs + 80)).split("\n")[0]!;
      return this.#protocol(`answer ${id}: no status line: ${JSON.stringify(line)}`);
    }
    this.#pending.delete(id);
    if (this.#pending.size === 0) {
      this.sock.unref();
      if (this.retired) this.close();
    }
    p.resolve({ status: a * 100 + b * 10 + c, data: buf.subarray(bs, end) });
  }

  /** The timer: fails the requests past their deadline, then is set for the next one's. */
  readonly #expire = (): void => {
    this.#timer = undefined;
    const now = performance.now();
    const e = new Error(`no answer in ${this.ep.timeoutMs} ms`);
    for (const [id, p] of this.#pending) {
      if (p.deadline > now) {
        this.#timer = setTimeout(this.#expire, Math.ceil(p.deadline - now)).unref();
        return;
      }
      if (p.reads === this.#reads) {
        // nothing came on the connection since it was sent: the connection may be gone
        this.#fail(e, true);
        return;
      }
      this.#pending.delete(id);
      p.reject(transportError(p, e));
    }
    this.sock.unref(); // none left in flight
  };

  #protocol(msg: string): void {
    this.#fail(new Error(`the server's answer: ${msg}`), true);
  }

  /** Takes the requests in flight off a connection that ended. */
  #end(): Pending[] {
    if (!this.dead) {
      this.dead = true;
      this.owner.forget(this);
      this.sock.destroy();
    }
    const ps = [...this.#pending.values()];
    this.#pending.clear();
    clearTimeout(this.#timer);
    this.#timer = undefined;
    return ps;
  }

  /** Ends the connection (ours: by this client); the requests in flight fail, or go to the Transport if the server closed before its preface. */
  #fail(e: Error, ours = false): void {
    const ps = this.#end();
    if (ps.length === 0) return;
    if (!ours && this.#connected && this.#reads === 0) {
      this.owner.noPreface(ps, false, `the server closed the connection before the continuum-frames/1 preface (${e.message})`);
      return;
    }
    for (const p of ps) p.reject(transportError(p, e));
  }

  /** The server answered the preface with other bytes: it does not speak frames. */
  #notFrames(got: Buffer): void {
    const ps = this.#end();
    const start = got.toString("latin1", 0, Math.min(got.length, 40)).split("\r\n")[0]!;
    this.owner.noPreface(ps, true, `the server does not speak continuum-frames/1: it answered ${JSON.stringify(start)}`);
  }

  close(): void {
    this.#fail(new Error("the connection was closed"), true);
  }
}

/** Endpoints (by key) found in this process not to speak continuum-frames/1: served over HTTP since. */
const httpOnly = new Set<string>();

function endpointKey(ep: Endpoint): string {
  if (ep.socketPath !== undefined) return "unix:" + ep.socketPath;
  return `${ep.tls ? "https" : "http"}://${net.isIPv6(ep.host) ? `[${ep.host}]` : ep.host}:${ep.port}`;
}

/**
 * The requests of a Client to one endpoint. With transport "frames" or by
 * default, they go over continuum-frames/1: one connection carries every
 * request in flight, pipelined (another one opens only when one has
 * maxInFlight requests in flight); a body over maxFrameBody goes over
 * HTTP. By default, a server that answers the preface with HTTP, or closes
 * two connections in a row before its preface, is an older continuumd:
 * the requests on that connection are sent again over HTTP, and the
 * endpoint is served over HTTP from then on (remembered in this process;
 * after closes, once an HTTP answer confirms the server is up). One close
 * before the preface is a transport error (a server going down, or one
 * that refused a frame). With transport "http", every request is HTTP/1.1.
 */
export class Transport {
  readonly #http: HttpPool;
  readonly #frames: FramesConn[] = [];
  readonly #auth: string;
  readonly #key: string;
  /** Requests went to HTTP after frames connections closed before their preface; no answer yet. */
  #probing = false;
  /** Frames connections in a row the server closed before its preface. */
  #closedEarly = 0;

  constructor(readonly ep: Endpoint) {
    this.#http = new HttpPool(ep);
    this.#auth = ep.token ? "Authorization: Bearer " + ep.token + "\n" : "";
    this.#key = endpointKey(ep);
  }

  /** The transport requests take now: "frames" or "http". */
  get current(): "frames" | "http" {
    return this.ep.transport === "http" || this.#probing || httpOnly.has(this.#key) ? "http" : "frames";
  }

  request(method: string, path: string, body?: Uint8Array): Promise<Answer> {
    if (this.ep.transport === "http" || this.#probing || httpOnly.has(this.#key) || (body !== undefined && body.length > maxFrameBody)) {
      return this.#http.request(method, path, body);
    }
    let c: FramesConn | undefined;
    for (const f of this.#frames) {
      if (f.inFlight < maxInFlight) {
        c = f;
        break;
      }
    }
    if (c === undefined) {
      c = new FramesConn(this, this.ep);
      this.#frames.push(c);
    }
    return c.send(method, path, method + " " + path + "\n" + this.#auth, body);
  }

  /** Drops a frames connection that ended or takes no new requests. */
  forget(c: FramesConn): void {
    const i = this.#frames.indexOf(c);
    if (i >= 0) this.#frames.splice(i, 1);
  }

  /** A frames connection got the server's whole preface. */
  prefaced(): void {
    this.#closedEarly = 0;
  }

  /**
   * Requests of a frames connection that got no preface: the server closed
   * it first, or (sure) answered with something else. With transport
   * "frames" they fail; by default they are sent again over HTTP when the
   * server answered otherwise or closed a second connection in a row, and
   * fail with TransportError (to be sent again) after a first close.
   */
  noPreface(ps: Pending[], sure: boolean, why: string): void {
    const e = new Error(why);
    if (this.ep.transport === "frames" || (!sure && ++this.#closedEarly < 2)) {
      for (const p of ps) p.reject(sure ? new FramesUnsupported(`${p.method} ${p.path}: ${why}`) : transportError(p, e));
      return;
    }
    if (sure) httpOnly.add(this.#key);
    else this.#probing = true;
    for (const p of ps) {
      this.#http.request(p.method, p.path, p.body).then(
        (a) => {
          if (this.#probing) {
            // an HTTP answer where frames got none: the server is up, and speaks HTTP only
            httpOnly.add(this.#key);
            this.#probing = false;
          }
          p.resolve(a);
        },
        (err: Error) => {
          this.#probing = false; // no answer either way: try frames again next time
          p.reject(err);
        },
      );
    }
  }

  /** Closes every connection (requests in flight fail with TransportError); a later request opens a new one. */
  close(): void {
    for (const c of [...this.#frames]) c.close();
    this.#http.close();
  }
}

/** A new connection to the endpoint (Unix socket, TCP or TLS), without delay for small writes. */
function dial(ep: Endpoint): net.Socket {
  let sock: net.Socket;
  if (ep.socketPath) sock = net.connect({ path: ep.socketPath });
  else if (ep.tls) sock = tls.connect({ host: ep.host, port: ep.port, ...(ep.ca ? { ca: ep.ca } : {}), ...(net.isIP(ep.host) ? {} : { servername: ep.host }) });
  else sock = net.connect({ host: ep.host, port: ep.port, noDelay: true });
  if (!ep.socketPath) sock.setNoDelay(true);
  return sock;
}

function hostHeader(ep: Endpoint): string {
  const h = net.isIPv6(ep.host) ? `[${ep.host}]` : ep.host;
  return (ep.tls && ep.port === 443) || (!ep.tls && ep.port === 80) ? h : `${h}:${ep.port}`;
}
