/**
 * HTTP/1.1 to continuumd over its Unix socket or TCP, with TLS for an
 * https URL: a small client of its own on node:net and node:tls rather
 * than node:http. node:http spent about 300 µs of CPU per request in this
 * process (its ClientRequest, agent and stream machinery) against about
 * 80 µs here, and an agent's atom is two or three requests: with several
 * agent processes on a machine, that CPU was what bounded their atoms/s
 * (bench/RESULTS-wire-2026-12-06.md). This client writes each request in
 * one write (header and body together), reads answers with a
 * Content-Length or chunked body, and keeps each connection alive for the
 * next request: one request at a time per connection, a new connection
 * for a request made while the others are busy, idle ones kept (and not
 * keeping the process alive) until the server closes them or close() is
 * called. A request on a connection the server closed fails like any
 * transport error and is sent again by the caller (every request of the
 * protocol may be repeated).
 */

import * as net from "node:net";
import * as tls from "node:tls";
import { readFileSync } from "node:fs";

export interface Endpoint {
  socketPath?: string;
  host: string;
  port: number;
  tls: boolean;
  ca?: Buffer;
  token?: string;
  timeoutMs: number;
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
}

export function endpoint(o: ConnectOptions): Endpoint {
  const timeoutMs = o.timeoutMs ?? 60_000;
  if ((o.socket === undefined) === (o.url === undefined)) throw new TypeError("give the server's socket path or its url, one of them");
  if (o.socket !== undefined) return { socketPath: o.socket, host: "localhost", port: 0, tls: false, timeoutMs, ...(o.token ? { token: o.token } : {}) };
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
    readonly owner: Transport,
    ep: Endpoint,
  ) {
    if (ep.socketPath) this.sock = net.connect({ path: ep.socketPath });
    else if (ep.tls) this.sock = tls.connect({ host: ep.host, port: ep.port, ...(ep.ca ? { ca: ep.ca } : {}), ...(net.isIP(ep.host) ? {} : { servername: ep.host }) });
    else this.sock = net.connect({ host: ep.host, port: ep.port, noDelay: true });
    if (!ep.socketPath) this.sock.setNoDelay(true);
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

export class Transport {
  /** Connections idle, the most recently used last. */
  readonly #idle: Conn[] = [];
  readonly #all = new Set<Conn>();
  #auth = "";

  constructor(readonly ep: Endpoint) {
    if (ep.token) this.#auth = "Authorization: Bearer " + ep.token + "\r\n";
  }

  request(method: string, path: string, body?: Uint8Array): Promise<{ status: number; data: Buffer }> {
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

function hostHeader(ep: Endpoint): string {
  const h = net.isIPv6(ep.host) ? `[${ep.host}]` : ep.host;
  return (ep.tls && ep.port === 443) || (!ep.tls && ep.port === 80) ? h : `${h}:${ep.port}`;
}
