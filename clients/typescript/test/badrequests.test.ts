// Bad requests get clear answers (a status, a code, the field) and the
// server stays up: raw HTTP, and the client's errors.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import * as c from "../src/index.js";
import { Server, raw, transport } from "./harness.js";

function assertError(r: { status: number; body: any }, status: number, code: string, field?: string): void {
  assert.equal(r.status, status, JSON.stringify(r.body));
  assert.equal(r.body.error.code, code, JSON.stringify(r.body));
  assert.ok(r.body.error.message);
  if (field !== undefined) assert.equal(r.body.error.field, field, JSON.stringify(r.body));
}

describe("bad requests", () => {
  const server = new Server("--max-body", "65536");
  before(() => server.start());
  after(() => server.close());
  const req = (m: string, p: string, b?: string) => raw(server.socket, m, p, b);

  async function attempt(run: string): Promise<string> {
    assert.equal((await req("PUT", `/v1/runs/${run}`)).status, 200);
    const r = await req("POST", `/v1/runs/${run}/attempts`, "{}");
    assert.equal(r.status, 201);
    return `/v1/runs/${run}/attempts/${r.body.attempt}`;
  }

  test("malformed JSON and wrong fields", async () => {
    const p = await attempt("malformed");
    assertError(await req("POST", p + "/commit", '{"delta": [}'), 400, "bad_request");
    assertError(await req("POST", p + "/commit", '{"delta": []} trailing'), 400, "bad_request");
    assertError(await req("POST", p + "/commit", '{"delta": [], "extra": 1}'), 400, "bad_request", "extra");
    assertError(await req("POST", p + "/commit", '{"delta": [{"op": "set", "key": 3}]}'), 400, "bad_request", "delta[0].key");
    assertError(await req("POST", p + "/calls/0", '{"tool": ""}'), 400, "bad_request", "tool");
    assertError(await req("POST", "/v1/runs/malformed/attempts", '{"lease_ms": "long"}'), 400, "bad_request", "lease_ms");
    assert.equal((await req("POST", p + "/commit", '{"delta": []}')).status, 200);
  });

  test("huge bodies", async () => {
    const p = await attempt("huge");
    assertError(await req("POST", p + "/commit", JSON.stringify({ delta: [{ op: "set", key: "k", value: "x".repeat(100_000) }] })), 413, "too_large");
    const client = server.client();
    const run = await client.run("huge-client");
    await assert.rejects(run.atom(async (atom) => void atom.delta.set("k", "z".repeat(100_000))), c.TooLarge);
    // past --max-body and a frame's head: a frames server closes the connection; the client sends such bodies over HTTP, and gets 413
    await assert.rejects(run.atom(async (atom) => void atom.delta.set("k", "z".repeat(300_000))), c.TooLarge);
    assert.equal(client.transport, transport().transport ?? "frames");
    client.close();
  });

  test("unknown run, attempt, call and route", async () => {
    assertError(await req("GET", "/v1/runs/nobody"), 404, "run_not_found", "run");
    assertError(await req("POST", "/v1/runs/nobody/attempts", "{}"), 404, "run_not_found", "run");
    await attempt("known");
    assertError(await req("POST", "/v1/runs/known/attempts/att_nope/commit", '{"delta":[]}'), 404, "attempt_not_found", "attempt");
    const p = await attempt("known2");
    assertError(await req("POST", p + "/calls/5/outcome", '{"result":"x"}'), 404, "call_not_found", "call");
    assertError(await req("GET", "/v1/nothing"), 404, "route_not_found");
    assertError(await req("PATCH", "/v1/runs/known"), 405, "method_not_allowed");
    const client = server.client();
    await assert.rejects(client.run("x".repeat(300)), (e: unknown) => e instanceof c.BadRequest && e.code === "invalid_run_id");
    client.close();
  });
});

async function freePort(): Promise<number> {
  return new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

function hasOpenSSL(): boolean {
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

test("TLS with a token", { skip: !hasOpenSSL() && "needs the openssl command to make a certificate" }, async () => {
  const dir = mkdtempSync("/tmp/cdts-tls-");
  const [cert, key, tokenFile] = ["cert.pem", "key.pem", "token"].map((n) => path.join(dir, n)) as [string, string, string];
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
    "-days", "1", "-subj", "/CN=continuumd test", "-addext", "subjectAltName=IP:127.0.0.1"], { stdio: "ignore" });
  chmodSync(key, 0o600);
  writeFileSync(tokenFile, "tls-token-0123456789abcdef");
  chmodSync(tokenFile, 0o600);
  const port = await freePort();
  const server = await new Server("--listen", `127.0.0.1:${port}`, "--token-file", tokenFile, "--tls-cert", cert, "--tls-key", key).start();
  try {
    const client = new c.Client({ url: `https://127.0.0.1:${port}`, token: "tls-token-0123456789abcdef", caFile: cert, ...transport() });
    const run = await client.run("over-tls");
    await run.atom(async (atom) => assert.equal(new TextDecoder().decode(await atom.do("t", () => "ok")), "ok"));
    assert.equal((await run.info()).lastSeq, 1);
    assert.equal(client.transport, transport().transport ?? "frames");
    client.close();
    const untrusting = new c.Client({ url: `https://127.0.0.1:${port}`, token: "tls-token-0123456789abcdef", retryForMs: 500, ...transport() });
    await assert.rejects(untrusting.runs(), (e: unknown) => (e as { code?: string }).code === "DEPTH_ZERO_SELF_SIGNED_CERT");
    untrusting.close();
  } finally {
    await server.close();
  }
});

describe("bearer token over TCP", () => {
  const dir = mkdtempSync("/tmp/cdts-tok-");
  const tokenFile = path.join(dir, "token");
  writeFileSync(tokenFile, "t0k3n-0123456789abcdef\n");
  chmodSync(tokenFile, 0o600);
  let port = 0;
  let server: Server;
  before(async () => {
    port = await freePort();
    server = new Server("--listen", `127.0.0.1:${port}`, "--token-file", tokenFile);
    await server.start();
  });
  after(() => server.close());

  test("a wrong or missing token is refused; the right one works", async () => {
    const get = async (token?: string) =>
      fetch(`http://127.0.0.1:${port}/v1/runs`, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
    const none = await get();
    assert.equal(none.status, 401);
    assert.equal(((await none.json()) as any).error.code, "unauthorized");
    assert.equal((await get("t0k3n-0123456789abcdeX")).status, 401);
    assert.equal((await get("t0k3n-0123456789abcdef")).status, 200);
    assert.equal((await raw(server.socket, "GET", "/v1/runs")).status, 401);
    const bad = new c.Client({ url: `http://127.0.0.1:${port}`, token: "wrong-token-000000000", ...transport() });
    await assert.rejects(bad.runs(), c.Unauthorized);
    bad.close();
    const good = new c.Client({ url: `http://127.0.0.1:${port}`, token: "t0k3n-0123456789abcdef", ...transport() });
    const run = await good.run("over-tcp");
    await run.atom(async (atom) => void (await atom.do("t", () => "ok")));
    assert.equal((await run.info()).lastSeq, 1);
    assert.equal(good.transport, transport().transport ?? "frames");
    good.close();
    assert.throws(() => new c.Client({ url: `http://127.0.0.1:${port}` }), TypeError);
  });
});
