/**
 * HTTP/1.1 to continuumd with node:http: over its Unix socket (socketPath)
 * or TCP, with TLS (node:https) for an https URL. Connections are kept
 * alive; a request on one the server closed fails like any transport
 * error and is sent again by the caller (every request of the protocol may
 * be repeated).
 */

import * as http from "node:http";
import * as https from "node:https";
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
    host: u.hostname,
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

export class Transport {
  readonly agent: http.Agent;

  constructor(readonly ep: Endpoint) {
    this.agent = ep.tls
      ? new https.Agent({ keepAlive: true, ...(ep.ca ? { ca: ep.ca } : {}) })
      : new http.Agent({ keepAlive: true });
  }

  request(method: string, path: string, body?: Uint8Array): Promise<{ status: number; data: Buffer }> {
    const ep = this.ep;
    const headers: Record<string, string> = { Accept: "application/json" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      headers["Content-Length"] = String(body.length);
    }
    if (ep.token) headers.Authorization = "Bearer " + ep.token;
    const opts: https.RequestOptions = { method, path, headers, agent: this.agent, timeout: ep.timeoutMs };
    if (ep.socketPath) opts.socketPath = ep.socketPath;
    else {
      opts.host = ep.host;
      opts.port = ep.port;
    }
    const lib = ep.tls ? https : http;
    return new Promise((resolve, reject) => {
      const req = lib.request(opts, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, data: Buffer.concat(chunks) }));
        res.on("error", (e) => reject(new TransportError(`${method} ${path}: ${e.message}`, e)));
      });
      req.on("timeout", () => req.destroy(new Error(`no answer in ${ep.timeoutMs} ms`)));
      req.on("error", (e) => reject(new TransportError(`${method} ${path}: ${e.message}`, e)));
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
