// The continuum-frames/1 transport (the default) against scripted servers
// on a Unix socket that speak the framing as the spec writes it: the bytes
// of a request frame, answers split to single bytes and coalesced into one
// write, answered out of order, many requests in flight on one connection,
// a connection broken mid-answer (a TransportError, which Client's retry
// rules send again), malformed frames, a server that never answers, and
// older servers (closing after the preface, or answering it with HTTP):
// fallback to HTTP by default, an error with transport "frames".

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type * as net from "node:net";
import { describe, test } from "node:test";
import { Client, FramesUnsupported, Unavailable } from "../src/index.js";
import { PREFACE, Transport, TransportError, encodeFrame, endpoint, maxFrameBody, maxInFlight } from "../src/transport.js";
import { listenUnix } from "./scripted.js";

interface Req {
  id: number;
  head: string;
  body: Buffer;
}

/** An answer frame, built by hand from the spec: n, id, hlen (u32 BE), head, body. */
function answer(id: number, status: number | string, body = "", headers = "Content-Type: application/json\n"): Buffer {
  const head = Buffer.from(`${status}\n${headers}`, "utf8");
  const b = Buffer.from(body, "utf8");
  const f = Buffer.alloc(12);
  f.writeUInt32BE(8 + head.length + b.length, 0);
  f.writeUInt32BE(id, 4);
  f.writeUInt32BE(head.length, 8);
  return Buffer.concat([f, head, b]);
}

type Reply = Buffer | Buffer[] | null;
type Preface = boolean | "split" | "close" | "http";

/**
 * A frames server: a connection whose first byte is 0 must send the
 * preface, gets it back (unless preface is false; "split": a byte at a
 * time; "close": the connection is closed instead; "http": an HTTP 400
 * answer, as Go's net/http gives), and each request frame read whole is answered with
 * reply(request, connection number, socket): written as given (a buffer,
 * or buffers written apart), or not at all (null). Other connections get
 * http(head) as HTTP/1.1, or are closed.
 */
async function framesServer(reply: (req: Req, conn: number, s: net.Socket) => Reply, o: { preface?: Preface | ((conn: number) => Preface); http?: (head: string) => string } = {}) {
  let conns = 0;
  let httpConns = 0;
  const requests: Req[] = [];
  const raws: Buffer[] = [];
  const srv = await listenUnix((s) => {
    s.on("error", () => {});
    let buf = Buffer.alloc(0);
    let kind: "?" | "frames" | "http" = "?";
    let conn = -1;
    let queue = Promise.resolve();
    s.on("data", (d: Buffer) => {
      queue = queue.then(() => handle(d)).catch(() => {
        s.destroy();
      });
    });
    const pause = () => new Promise((res) => setTimeout(res, 1));
    const handle = async (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (kind === "?") {
        if (buf[0] !== 0) {
          kind = "http";
          httpConns++;
        } else {
          if (buf.length < PREFACE.length) return;
          assert.deepEqual(buf.subarray(0, PREFACE.length), PREFACE, "the client's preface");
          conn = conns++;
          raws[conn] = Buffer.from(buf);
          buf = buf.subarray(PREFACE.length);
          const preface = typeof o.preface === "function" ? o.preface(conn) : o.preface;
          if (preface === "close") {
            s.destroy();
            return;
          }
          if (preface === "http") {
            s.end("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request");
            return;
          }
          kind = "frames";
          if (preface === "split") {
            for (const b of PREFACE) {
              s.write(Buffer.from([b]));
              await pause();
            }
          } else if (preface !== false) s.write(PREFACE);
        }
      }
      if (kind === "http") {
        for (;;) {
          const i = buf.indexOf("\r\n\r\n");
          if (i < 0) return;
          const head = buf.toString("latin1", 0, i);
          const len = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
          if (buf.length < i + 4 + len) return;
          buf = buf.subarray(i + 4 + len);
          if (!o.http) {
            s.destroy();
            return;
          }
          const body = o.http(head);
          s.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
        }
      }
      while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
        const n = buf.readUInt32BE(0);
        const hlen = buf.readUInt32BE(8);
        const req = { id: buf.readUInt32BE(4), head: buf.toString("utf8", 12, 12 + hlen), body: Buffer.from(buf.subarray(12 + hlen, 4 + n)) };
        buf = buf.subarray(4 + n);
        requests.push(req);
        const r = reply(req, conn, s);
        if (r === null) continue;
        if (!Array.isArray(r)) s.write(r);
        else {
          for (const part of r) {
            s.write(part);
            await pause();
          }
        }
      }
    };
  });
  return {
    ...srv,
    requests,
    /** The bytes of each frames connection up to its first read (the preface and what came with it). */
    raws,
    conns: () => conns,
    httpConns: () => httpConns,
  };
}

const json = (a: { data: Buffer }) => JSON.parse(a.data.toString("utf8"));
const path1 = (r: Req) => r.head.split("\n")[0]!.split(" ")[1]!;

describe("transport: continuum-frames/1", () => {
  test("a request frame is the spec's bytes", () => {
    const head = "POST /v1/runs/r%2F1/atoms?wait=1\nAuthorization: Bearer t\n";
    const body = Buffer.from('{"a":"é"}');
    const want = Buffer.concat([
      Buffer.from([0, 0, 0, 8 + head.length + body.length]), // n: 8 + hlen + len(body)
      Buffer.from([0, 0, 1, 2]), // id 258
      Buffer.from([0, 0, 0, head.length]), // hlen
      Buffer.from(head, "ascii"),
      body,
    ]);
    assert.deepEqual(encodeFrame(258, head, body), want);
    assert.deepEqual(encodeFrame(1, "GET /v1/health\n"), Buffer.concat([Buffer.from([0, 0, 0, 23, 0, 0, 0, 1, 0, 0, 0, 15]), Buffer.from("GET /v1/health\n")]));
    // a UTF-8 head counts its bytes, not its characters
    assert.equal(encodeFrame(2, "GET /é\n").readUInt32BE(8), 8);
    assert.equal(PREFACE.length, 20);
    assert.deepEqual(PREFACE, Buffer.from([0, ...Buffer.from("continuum-frames/1\n")]));
  });

  test("the preface comes first; requests carry their head and body, the token, no HTTP headers; ids count up on one connection", async () => {
    const srv = await framesServer((req) => answer(req.id, 200, JSON.stringify({ p: path1(req), body: req.body.toString() })));
    const t = new Transport(endpoint({ socket: srv.file, token: "tok-123" }));
    try {
      const body = Buffer.from(JSON.stringify({ s: "é" }));
      const r = await t.request("POST", "/v1/runs/a%2Fb/atoms?wait=1", body);
      assert.equal(r.status, 200);
      assert.deepEqual(json(r), { p: "/v1/runs/a%2Fb/atoms?wait=1", body: body.toString() });
      for (let i = 0; i < 4; i++) assert.equal((await t.request("GET", `/v1/x/${i}`)).status, 200);
      assert.equal(srv.conns(), 1, "one connection");
      assert.deepEqual(srv.raws[0]!.subarray(0, 20), PREFACE);
      assert.deepEqual(
        srv.requests.map((q) => q.id),
        [1, 2, 3, 4, 5],
      );
      assert.equal(srv.requests[0]!.head, "POST /v1/runs/a%2Fb/atoms?wait=1\nAuthorization: Bearer tok-123\n");
      assert.equal(srv.requests[1]!.head, "GET /v1/x/0\nAuthorization: Bearer tok-123\n");
      assert.equal(srv.requests[1]!.body.length, 0);
      assert.equal(t.current, "frames");
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("answers split to single bytes, coalesced into one write, out of order, with headers; the preface split too", async () => {
    const big = "x".repeat(3 << 20);
    const held: Req[] = [];
    const srv = await framesServer((req, _c, s) => {
      const p = path1(req);
      if (p === "/split") {
        const a = answer(req.id, 201, '{"a":"bcd"}', "Content-Type: application/json\nRetry-After: 1\n");
        return [...a].map((b) => Buffer.from([b]));
      }
      if (p === "/big") return answer(req.id, 200, JSON.stringify({ big }));
      held.push(req);
      if (held.length < 5) return null;
      // five answers in one write, the last request's first
      s.write(Buffer.concat(held.reverse().map((q) => answer(q.id, 200 + Number(path1(q).slice(2)), JSON.stringify({ p: path1(q) })))));
      return null;
    }, { preface: "split" });
    const t = new Transport(endpoint({ socket: srv.file }));
    try {
      const r = await t.request("GET", "/split");
      assert.equal(r.status, 201);
      assert.deepEqual(json(r), { a: "bcd" });
      const rs = await Promise.all([0, 1, 2, 3, 4].map((i) => t.request("GET", `/c${i}`)));
      rs.forEach((a, i) => {
        assert.equal(a.status, 200 + i);
        assert.deepEqual(json(a), { p: `/c${i}` });
      });
      const b = await t.request("GET", "/big");
      assert.equal(json(b).big.length, big.length);
      assert.equal(srv.conns(), 1);
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("many requests in flight share one connection; past maxInFlight another opens", async () => {
    const held: { q: Req; s: net.Socket; conn: number }[] = [];
    const srv = await framesServer((q, conn, s) => {
      held.push({ q, s, conn });
      return null;
    });
    const t = new Transport(endpoint({ socket: srv.file }));
    const answerHeld = () => {
      for (const h of held.splice(0).reverse()) h.s.write(answer(h.q.id, 200, JSON.stringify({ p: path1(h.q) })));
    };
    try {
      let all = Promise.all(Array.from({ length: 50 }, (_, i) => t.request("GET", `/${i}`)));
      await until(() => held.length === 50);
      answerHeld();
      (await all).forEach((a, i) => assert.deepEqual(json(a), { p: `/${i}` }));
      assert.equal(srv.conns(), 1, "50 in flight on one connection");
      const n = maxInFlight + 10;
      all = Promise.all(Array.from({ length: n }, (_, i) => t.request("GET", `/m${i}`)));
      await until(() => held.length === n);
      assert.equal(srv.conns(), 2, `${n} in flight: two connections`);
      assert.deepEqual(
        [0, 1].map((c) => held.filter((h) => h.conn === c).length),
        [maxInFlight, 10],
      );
      answerHeld();
      (await all).forEach((a, i) => assert.deepEqual(json(a), { p: `/m${i}` }));
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("a connection broken mid-answer fails every request in flight with TransportError; Client sends them again", async () => {
    let cut = true;
    const srv = await framesServer((q, _c, s) => {
      if (path1(q) === "/v1/health" && !cut) return answer(q.id, 200, '{"status":"ok"}');
      if (path1(q) === "/other") return null;
      if (!cut) return answer(q.id, 200, "{}");
      cut = false;
      const a = answer(q.id, 200, '{"status":"ok","long":"' + "y".repeat(1000) + '"}');
      setTimeout(() => s.destroy(), 20);
      return a.subarray(0, 40);
    });
    const t = new Transport(endpoint({ socket: srv.file }));
    try {
      const other = t.request("GET", "/other");
      await assert.rejects(t.request("GET", "/v1/health"), (e: unknown) => {
        assert.ok(e instanceof TransportError, String(e));
        assert.match(e.message, /^GET \/v1\/health: the server closed the connection/);
        return true;
      });
      await assert.rejects(other, (e: unknown) => e instanceof TransportError && /^GET \/other: /.test(e.message));
      assert.equal((await t.request("GET", "/next")).status, 200, "a new connection after the broken one");
      assert.equal(srv.conns(), 2);
      assert.equal(t.current, "frames", "a connection broken after the preface is no reason to leave frames");
    } finally {
      t.close();
      await srv.stop();
    }
    // the same through Client: the request is sent again and answered
    cut = true;
    const srv2 = await framesServer((q, _c, s) => {
      if (!cut) return answer(q.id, 200, '{"status":"ok"}');
      cut = false;
      setTimeout(() => s.destroy(), 20);
      return answer(q.id, 200, '{"status":"ok"}').subarray(0, 30);
    });
    const c = new Client({ socket: srv2.file, retryForMs: 10_000 });
    try {
      assert.deepEqual(await c.health(), { status: "ok" });
      assert.equal(srv2.requests.length, 2, "sent twice");
      assert.equal(srv2.conns(), 2);
    } finally {
      c.close();
      await srv2.stop();
    }
  });

  test("malformed frames, answers to ids never sent, a server that never answers: TransportError, and the next request works", async () => {
    const bad = (q: Req): Buffer | null => {
      const raw = (n: number, id: number, hlen: number, rest: string) => {
        const f = Buffer.alloc(12);
        f.writeUInt32BE(n, 0);
        f.writeUInt32BE(id, 4);
        f.writeUInt32BE(hlen, 8);
        return Buffer.concat([f, Buffer.from(rest)]);
      };
      switch (path1(q)) {
        case "/short":
          return raw(7, q.id, 0, "");
        case "/hlen":
          return raw(8 + 4, q.id, 5, "200\n");
        case "/nostatus":
          return answer(q.id, "OK");
        case "/status1000":
          return answer(q.id, "1000");
        case "/nonewline":
          return raw(8 + 3, q.id, 3, "200");
        case "/stranger":
          return answer(q.id + 1000, 200, "{}");
        case "/huge":
          return raw(0xfffffff0, q.id, 4, "200\n");
        case "/silent":
          return null;
      }
      return answer(q.id, 200, "{}");
    };
    const srv = await framesServer(bad);
    const t = new Transport(endpoint({ socket: srv.file, timeoutMs: 300 }));
    try {
      for (const [p, want] of [
        ["/short", /a frame of 7 bytes/],
        ["/hlen", /a frame of 12 bytes with a head of 5/],
        ["/nostatus", /no status line: "OK"/],
        ["/status1000", /no status line: "1000"/],
        ["/nonewline", /no status line: "200"/],
        ["/stranger", /an answer to request \d+, which was not sent/],
        ["/huge", /a frame of 4294967280 bytes/],
        ["/silent", /no answer in 300 ms/],
      ] as const) {
        await assert.rejects(t.request("GET", p), (e: unknown) => {
          assert.ok(e instanceof TransportError, `${p}: ${e}`);
          assert.match(e.message, new RegExp(`^GET ${p}: `));
          assert.match(e.message, want);
          return true;
        });
        assert.equal((await t.request("GET", "/fine")).status, 200, `a good request after ${p}`);
      }
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("a request whose answer is late fails alone while the connection answers others; its late answer is ignored", async () => {
    let late: Req | undefined;
    const srv = await framesServer((q) => {
      if (path1(q) === "/late") {
        late = q;
        return null;
      }
      if (path1(q) === "/tick") return answer(q.id, 200, "{}");
      // /late's answer, which nobody waits for any more, then this one's
      return Buffer.concat([answer(late!.id, 200, '{"late":true}'), answer(q.id, 200, '{"after":true}')]);
    });
    const t = new Transport(endpoint({ socket: srv.file, timeoutMs: 300 }));
    try {
      const lateOne = t.request("GET", "/late");
      // the connection reads something while /late waits: it is alive, and kept
      await new Promise((res) => setTimeout(res, 50));
      await t.request("GET", "/tick");
      await assert.rejects(lateOne, (e: unknown) => e instanceof TransportError && /^GET \/late: no answer in 300 ms/.test(e.message));
      assert.deepEqual(json(await t.request("GET", "/after")), { after: true });
      assert.equal(srv.conns(), 1);
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("requests time out each at its own deadline", async () => {
    const srv = await framesServer((q) => (path1(q) === "/tick" ? answer(q.id, 200, "{}") : null));
    const t = new Transport(endpoint({ socket: srv.file, timeoutMs: 300 }));
    try {
      const order: string[] = [];
      const t0 = performance.now();
      const a = t.request("GET", "/a").catch((e: Error) => (order.push("a"), e));
      await new Promise((res) => setTimeout(res, 150));
      const b = t.request("GET", "/b").catch((e: Error) => (order.push("b"), e));
      await t.request("GET", "/tick"); // the connection is alive: each times out alone
      const [ea, eb] = await Promise.all([a, b]);
      const elapsed = performance.now() - t0;
      assert.ok(ea instanceof TransportError && /^GET \/a: no answer in 300 ms/.test(ea.message), String(ea));
      assert.ok(eb instanceof TransportError && /^GET \/b: no answer in 300 ms/.test(eb.message), String(eb));
      assert.deepEqual(order, ["a", "b"]);
      assert.ok(elapsed >= 440, `b timed out 300 ms after it was sent, 150 ms after a: ${elapsed} ms`);
      assert.equal(srv.conns(), 1);
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("an idle frames connection does not keep the process alive", async () => {
    const srv = await framesServer((q) => answer(q.id, 200, "{}"));
    try {
      const mod = new URL("../src/transport.js", import.meta.url).href;
      const code = `const { Transport, endpoint } = await import(${JSON.stringify(mod)});
        const t = new Transport(endpoint({ socket: ${JSON.stringify(srv.file)} }));
        const r = await t.request("GET", "/v1/health");
        await new Promise((res) => setImmediate(res));
        console.log(r.status, t.current, JSON.stringify(process.getActiveResourcesInfo()));`;
      const child = spawn(process.execPath, ["--input-type=module", "-e", code], { stdio: ["ignore", "pipe", "inherit"] });
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d));
      const code_ = await new Promise<number | null>((res) => child.on("exit", res));
      assert.equal(code_, 0);
      // nothing of the transport's keeps the loop alive (an unref'd socket or timer is not listed)
      assert.equal(out.trim(), "200 frames []");
      assert.equal(srv.conns(), 1);
    } finally {
      await srv.stop();
    }
  });

  test("close fails the requests in flight; the transport opens a new connection afterwards", async () => {
    const srv = await framesServer((q) => (path1(q) === "/slow" ? null : answer(q.id, 200, "{}")));
    const t = new Transport(endpoint({ socket: srv.file }));
    try {
      const slow = t.request("GET", "/slow");
      await new Promise((res) => setTimeout(res, 20));
      t.close();
      await assert.rejects(slow, (e: unknown) => e instanceof TransportError && /the connection was closed/.test(e.message));
      assert.equal((await t.request("GET", "/after")).status, 200);
      assert.equal(srv.conns(), 2);
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("a server that closes after the preface twice in a row (an older continuumd): HTTP for the requests and from then on; with transport frames, no fallback", async () => {
    const srv = await framesServer(() => answer(1, 500, "{}"), { preface: "close", http: (head) => JSON.stringify({ over: "http", line: head.split("\r\n")[0] }) });
    const t = new Transport(endpoint({ socket: srv.file }));
    try {
      // the first close is a transport error: a server going down closes connections too
      await assert.rejects(t.request("GET", "/a"), (e: unknown) => e instanceof TransportError && /^GET \/a: the server closed the connection before the continuum-frames\/1 preface/.test(e.message));
      assert.equal(t.current, "frames");
      const rs = await Promise.all([t.request("GET", "/a"), t.request("POST", "/b", Buffer.from("{}"))]);
      assert.deepEqual(rs.map(json), [
        { over: "http", line: "GET /a HTTP/1.1" },
        { over: "http", line: "POST /b HTTP/1.1" },
      ]);
      assert.equal(t.current, "http");
      assert.deepEqual(json(await t.request("GET", "/c")), { over: "http", line: "GET /c HTTP/1.1" });
      assert.equal(srv.conns(), 2, "frames were tried twice");
      // remembered for the endpoint: another Transport to it goes straight to HTTP
      const t2 = new Transport(endpoint({ socket: srv.file }));
      assert.deepEqual(json(await t2.request("GET", "/d")), { over: "http", line: "GET /d HTTP/1.1" });
      t2.close();
      assert.equal(srv.conns(), 2);
    } finally {
      t.close();
      await srv.stop();
    }
    const srv2 = await framesServer(() => null, { preface: "close", http: () => "{}" });
    const forced = new Transport(endpoint({ socket: srv2.file, transport: "frames" }));
    try {
      await assert.rejects(forced.request("GET", "/a"), (e: unknown) => e instanceof TransportError && /^GET \/a: the server closed the connection before the continuum-frames\/1 preface/.test(e.message));
      await assert.rejects(forced.request("GET", "/a"), TransportError);
      assert.equal(srv2.conns(), 2, "tried again on frames");
      assert.equal(srv2.httpConns(), 0);
      assert.equal(forced.current, "frames");
      // through Client: retried as any transport error, then Unavailable
      const c = new Client({ socket: srv2.file, transport: "frames", retryForMs: 200 });
      await assert.rejects(c.health(), Unavailable);
      c.close();
    } finally {
      forced.close();
      await srv2.stop();
    }
    // through Client by default: the first close retried, the second falls back, the request answered over HTTP
    const srv3 = await framesServer(() => null, { preface: "close", http: () => '{"status":"ok"}' });
    const c = new Client({ socket: srv3.file });
    try {
      assert.deepEqual(await c.health(), { status: "ok" });
      assert.equal(c.transport, "http");
      assert.equal(srv3.conns(), 2);
    } finally {
      c.close();
      await srv3.stop();
    }
  });

  test("a frames server that closes a connection before its preface now and then is not taken for an older one", async () => {
    // connections 0 and 2 closed at once, 1 and 3 served: never two closes in a row
    const srv = await framesServer((q) => answer(q.id, 200, "{}"), { preface: (conn) => (conn % 2 === 0 ? "close" : true), http: () => '{"over":"http"}' });
    const t = new Transport(endpoint({ socket: srv.file }));
    try {
      for (let round = 0; round < 2; round++) {
        await assert.rejects(t.request("GET", "/a"), TransportError);
        assert.deepEqual(json(await t.request("GET", "/a")), {});
        assert.equal(t.current, "frames");
        t.close(); // the next request opens a new connection
      }
      assert.equal(srv.conns(), 4);
      assert.equal(srv.httpConns(), 0);
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("a body over maxFrameBody goes over HTTP; up to it, in a frame", async () => {
    const srv = await framesServer((q) => answer(q.id, 200, JSON.stringify({ over: "frames", n: q.body.length })), {
      http: (head) => JSON.stringify({ over: "http", n: Number(/content-length: *(\d+)/i.exec(head)?.[1]) }),
    });
    const t = new Transport(endpoint({ socket: srv.file }));
    try {
      assert.deepEqual(json(await t.request("POST", "/a", Buffer.alloc(maxFrameBody, 97))), { over: "frames", n: maxFrameBody });
      assert.deepEqual(json(await t.request("POST", "/a", Buffer.alloc(maxFrameBody + 1, 97))), { over: "http", n: maxFrameBody + 1 });
      assert.equal(t.current, "frames");
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("a server that answers the preface with HTTP: HTTP at once; with transport frames, FramesUnsupported (not retried)", async () => {
    const srv = await framesServer(() => null, { preface: "http", http: (head) => JSON.stringify({ line: head.split("\r\n")[0] }) });
    const t = new Transport(endpoint({ socket: srv.file }));
    try {
      assert.deepEqual(json(await t.request("GET", "/a")), { line: "GET /a HTTP/1.1" });
      assert.equal(t.current, "http");
      assert.equal(srv.conns(), 1);
    } finally {
      t.close();
      await srv.stop();
    }
    const srv2 = await framesServer(() => null, { preface: "http" });
    const c = new Client({ socket: srv2.file, transport: "frames" });
    try {
      await assert.rejects(c.health(), (e: unknown) => {
        assert.ok(e instanceof FramesUnsupported, String(e));
        assert.match(e.message, /^GET \/v1\/health: the server does not speak continuum-frames\/1: it answered "HTTP\/1\.1 400 Bad Request"/);
        return true;
      });
      assert.equal(srv2.conns(), 1, "not retried");
    } finally {
      c.close();
      await srv2.stop();
    }
  });

  test("transport: \"http\" never sends the preface; a bad transport option is a TypeError", async () => {
    const srv = await framesServer(() => null, { http: () => '{"h":1}' });
    const t = new Transport(endpoint({ socket: srv.file, transport: "http" }));
    try {
      assert.deepEqual(json(await t.request("GET", "/a")), { h: 1 });
      assert.equal(srv.conns(), 0);
      assert.equal(srv.httpConns(), 1);
    } finally {
      t.close();
      await srv.stop();
    }
    assert.throws(() => endpoint({ socket: "x", transport: "h2" as "http" }), TypeError);
  });
});

/** Resolves once cond() holds, checking every 5 ms. */
async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((res) => setTimeout(res, 5));
}
