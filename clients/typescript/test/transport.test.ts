// The HTTP/1.1 transport (transport: "http") against scripted servers on a Unix socket: how
// answers are framed (Content-Length, chunked, up to the connection's end,
// interim 1xx), connections kept and reused, closed by the server while
// idle or after an answer, malformed answers, a server that never answers,
// and requests at once on connections of their own.

import assert from "node:assert/strict";
import type * as net from "node:net";
import * as path from "node:path";
import { describe, test } from "node:test";
import { Transport, TransportError, endpoint } from "../src/transport.js";
import { listenUnix, socketDir } from "./scripted.js";

interface Got {
  head: string;
  body: Buffer;
}

/**
 * A server that reads each request whole (by its Content-Length) and
 * answers with reply(request, its number on the connection, the
 * connection's number), written as given (a string or chunks written
 * apart), or not at all (null).
 */
async function scripted(reply: (req: Got, n: number, conn: number, sock: net.Socket) => string | string[] | null) {
  let conns = 0;
  const requests: Got[] = [];
  const srv = await listenUnix((s) => {
    const conn = conns++;
    let n = 0;
    let buf = Buffer.alloc(0);
    s.on("data", async (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const i = buf.indexOf("\r\n\r\n");
        if (i < 0) return;
        const head = buf.toString("latin1", 0, i);
        const len = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < i + 4 + len) return;
        const got = { head, body: buf.subarray(i + 4, i + 4 + len) };
        buf = buf.subarray(i + 4 + len);
        requests.push(got);
        const r = reply(got, n++, conn, s);
        if (r === null) continue;
        for (const part of Array.isArray(r) ? r : [r]) {
          s.write(part);
          if (Array.isArray(r)) await new Promise((res) => setTimeout(res, 5));
        }
      }
    });
  });
  return { ...srv, requests, conns: () => conns };
}

const ok = (body: string, extra = "") => `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

describe("transport: HTTP/1.1", () => {
  test("a request is one write of its header and body, and the connection is reused", async () => {
    const srv = await scripted((req) => ok(`{"echo":${JSON.stringify(req.body.toString())}}`));
    const t = new Transport(endpoint({ socket: srv.file, transport: "http" }));
    try {
      for (let i = 0; i < 5; i++) {
        const body = Buffer.from(JSON.stringify({ i, s: "é" }));
        const r = await t.request("POST", `/v1/x/${i}`, body);
        assert.equal(r.status, 200);
        assert.deepEqual(JSON.parse(r.data.toString()), { echo: body.toString() });
      }
      const r = await t.request("GET", "/v1/health");
      assert.equal(r.status, 200);
      assert.equal(srv.conns(), 1, "one connection for requests one after the other");
      const [first] = srv.requests;
      assert.match(first!.head, /^POST \/v1\/x\/0 HTTP\/1\.1\r\n/);
      assert.match(first!.head, /\r\nHost: localhost\r\n/);
      assert.match(first!.head, /\r\nContent-Type: application\/json\r\n/);
      assert.match(first!.head, new RegExp(`\r\nContent-Length: ${Buffer.byteLength(JSON.stringify({ i: 0, s: "é" }))}(\r\n|$)`));
      assert.doesNotMatch(srv.requests.at(-1)!.head, /Content-Length/, "a GET has no body");
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("the bearer token is sent on every request", async () => {
    const srv = await scripted(() => ok("{}"));
    const t = new Transport(endpoint({ socket: srv.file, token: "tok-123", transport: "http" }));
    try {
      await t.request("GET", "/a");
      await t.request("POST", "/b", Buffer.from("{}"));
      for (const r of srv.requests) assert.match(r.head, /\r\nAuthorization: Bearer tok-123(\r\n|$)/);
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("answers split across writes, chunked, with trailers, after an interim 1xx, and up to the connection's end", async () => {
    const big = "x".repeat(100_000);
    const srv = await scripted((req) => {
      const p = req.head.split(" ")[1];
      switch (p) {
        case "/split":
          return ["HTTP/1.1 201 Created\r\nContent-Le", "ngth: 11\r\n\r\n{\"a\":", "\"bcd\"}"];
        case "/chunked":
          return ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n", "3;ext=1\r\n\"b\"\r\n1\r\n}\r\n0\r\n\r\n"];
        case "/trailers":
          return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-T: 1\r\n\r\n";
        case "/interim":
          return ["HTTP/1.1 100 Continue\r\n\r\n", ok(`{"after":"continue"}`)];
        case "/big":
          return ok(JSON.stringify({ big }));
        case "/204":
          return "HTTP/1.1 204 No Content\r\n\r\n";
        case "/eof":
          return ["HTTP/1.0 200 OK\r\n\r\n{\"until\":", "\"the end\"}"].concat([]);
      }
      return ok("{}");
    });
    const t = new Transport(endpoint({ socket: srv.file, transport: "http" }));
    try {
      let r = await t.request("GET", "/split");
      assert.equal(r.status, 201);
      assert.deepEqual(JSON.parse(r.data.toString()), { a: "bcd" });
      r = await t.request("GET", "/chunked");
      assert.deepEqual(JSON.parse(r.data.toString()), { a: "b" });
      r = await t.request("GET", "/trailers");
      assert.equal(r.data.toString(), "{}");
      r = await t.request("GET", "/interim");
      assert.equal(r.status, 200);
      assert.deepEqual(JSON.parse(r.data.toString()), { after: "continue" });
      r = await t.request("GET", "/big");
      assert.equal(JSON.parse(r.data.toString()).big.length, big.length);
      r = await t.request("GET", "/204");
      assert.equal(r.status, 204);
      assert.equal(r.data.length, 0);
      assert.equal(srv.conns(), 1, "all on one connection so far");
      // HTTP/1.0 without Content-Length: the body ends with the connection
      const eof = t.request("GET", "/eof");
      setTimeout(() => srv.closeAll(), 50);
      r = await eof;
      assert.deepEqual(JSON.parse(r.data.toString()), { until: "the end" });
      r = await t.request("GET", "/again");
      assert.equal(r.status, 200);
      assert.equal(srv.conns(), 2, "a new connection after the one that ended");
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("Connection: close ends the connection after its answer; the next request opens another", async () => {
    const srv = await scripted((_req, n) => (n === 0 ? ok(`{"n":0}`, "Connection: close\r\n") : ok(`{"n":${n}}`)));
    const t = new Transport(endpoint({ socket: srv.file, transport: "http" }));
    try {
      assert.deepEqual(JSON.parse((await t.request("GET", "/a")).data.toString()), { n: 0 });
      assert.deepEqual(JSON.parse((await t.request("GET", "/b")).data.toString()), { n: 0 });
      assert.equal(srv.conns(), 2);
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("a connection the server closes while idle is dropped, not reused", async () => {
    const srv = await scripted(() => ok("{}"));
    const t = new Transport(endpoint({ socket: srv.file, transport: "http" }));
    try {
      await t.request("GET", "/a");
      srv.closeAll();
      await new Promise((res) => setTimeout(res, 50));
      const r = await t.request("GET", "/b");
      assert.equal(r.status, 200);
      assert.equal(srv.conns(), 2);
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("requests at once go on connections of their own, and each gets its own answer", async () => {
    const srv = await scripted((req, _n, _conn, s) => {
      const p = req.head.split(" ")[1]!;
      setTimeout(() => s.write(ok(JSON.stringify({ p }))), 30 - Number(p.slice(1)) * 5); // later requests answered first
      return null;
    });
    const t = new Transport(endpoint({ socket: srv.file, transport: "http" }));
    try {
      const rs = await Promise.all([0, 1, 2, 3, 4].map((i) => t.request("GET", `/${i}`)));
      rs.forEach((r, i) => assert.deepEqual(JSON.parse(r.data.toString()), { p: `/${i}` }));
      assert.equal(srv.conns(), 5);
      await Promise.all([0, 1, 2, 3, 4].map((i) => t.request("GET", `/${i}`)));
      assert.equal(srv.conns(), 5, "the idle ones are reused");
    } finally {
      t.close();
      await srv.stop();
    }
  });

  test("malformed answers, a connection that ends mid-answer, a server that never answers, no server: TransportError", async () => {
    const srv = await scripted((req, _n, _c, s) => {
      const p = req.head.split(" ")[1];
      switch (p) {
        case "/garbage":
          return "SSH-2.0-OpenSSH\r\n\r\n";
        case "/badlength":
          return "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n";
        case "/encoding":
          return "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n";
        case "/badchunk":
          return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        case "/hugeheader":
          return "HTTP/1.1 200 OK\r\nX: " + "a".repeat(70_000);
        case "/cut":
          setTimeout(() => s.destroy(), 20);
          return "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"partial";
        case "/silent":
          return null;
      }
      return ok("{}");
    });
    const t = new Transport(endpoint({ socket: srv.file, timeoutMs: 300, transport: "http" }));
    try {
      for (const [p, want] of [
        ["/garbage", /not an HTTP\/1\.x answer/],
        ["/badlength", /Content-Length "-1"/],
        ["/encoding", /Transfer-Encoding "gzip"/],
        ["/badchunk", /malformed chunk size/],
        ["/hugeheader", /header longer than/],
        ["/cut", /closed the connection/],
        ["/silent", /no answer in 300 ms/],
      ] as const) {
        await assert.rejects(t.request("GET", p), (e: unknown) => {
          assert.ok(e instanceof TransportError, `${p}: ${e}`);
          assert.match(e.message, new RegExp(`^GET ${p}: `));
          assert.match(e.message, want);
          return true;
        });
      }
      const r = await t.request("GET", "/fine");
      assert.equal(r.status, 200, "a good request after all of them");
    } finally {
      t.close();
      await srv.stop();
    }
    const none = new Transport(endpoint({ socket: path.join(socketDir, "nobody.sock") }));
    await assert.rejects(none.request("GET", "/"), (e: unknown) => e instanceof TransportError && /ENOENT/.test(e.message));
  });

  test("close fails the requests in flight; the transport opens a new connection afterwards", async () => {
    const srv = await scripted((req) => (req.head.startsWith("GET /slow") ? null : ok("{}")));
    const t = new Transport(endpoint({ socket: srv.file, transport: "http" }));
    try {
      const slow = t.request("GET", "/slow");
      await new Promise((res) => setTimeout(res, 20));
      t.close();
      await assert.rejects(slow, TransportError);
      assert.equal((await t.request("GET", "/after")).status, 200);
    } finally {
      t.close();
      await srv.stop();
    }
  });
});
