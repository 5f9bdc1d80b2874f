// The transport's CPU per request in this process, frames against HTTP,
// without continuumd: a child Node process answers every request at once
// (a fixed small JSON answer) on a Unix socket, in continuum-frames/1 or
// HTTP/1.1 as the connection's first byte says; this process sends POSTs
// with a body of the size of an atom's commit, one at a time or CONC at
// once, and measures its own CPU (process.cpuUsage) per request. The
// transports alternate, ROUNDS rounds each; medians are printed. With
// POOL > 1 the requests go round-robin to POOL transports (connections) of
// their own: a pool, against one pipelined connection. Run it after a
// build (tsc -p .):
//
//     node scripts/transport-cpu.mjs [REQUESTS] [ROUNDS] [CONC] [POOL]
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Transport, endpoint } from "../dist/src/transport.js";

const n = Number(process.argv[2] ?? 20000);
const rounds = Number(process.argv[3] ?? 5);
const conc = Number(process.argv[4] ?? 1);
const poolSize = Number(process.argv[5] ?? 1);

const server = `
const net = require("node:net");
const PREFACE = Buffer.from("\\x00continuum-frames/1\\n", "latin1");
const body = Buffer.from('{"call":0,"status":"done","result":"ok"}\\n');
const head = Buffer.from("200\\nContent-Type: application/json\\n");
const http = Buffer.concat([Buffer.from("HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: " + body.length + "\\r\\n\\r\\n"), body]);
net.createServer((s) => {
  let buf = Buffer.alloc(0), kind = "";
  s.on("error", () => {});
  s.on("data", (d) => {
    buf = buf.length ? Buffer.concat([buf, d]) : d;
    if (!kind) {
      if (buf[0] === 0) { if (buf.length < 20) return; kind = "f"; buf = buf.subarray(20); s.write(PREFACE); } else kind = "h";
    }
    const out = [];
    if (kind === "f") {
      while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
        const f = Buffer.alloc(12); f.writeUInt32BE(8 + head.length + body.length, 0); f.writeUInt32BE(buf.readUInt32BE(4), 4); f.writeUInt32BE(head.length, 8);
        out.push(f, head, body); buf = buf.subarray(4 + buf.readUInt32BE(0));
      }
    } else {
      for (;;) {
        const i = buf.indexOf("\\r\\n\\r\\n"); if (i < 0) break;
        const m = /content-length: *(\\d+)/i.exec(buf.toString("latin1", 0, i)); const len = m ? Number(m[1]) : 0;
        if (buf.length < i + 4 + len) break;
        buf = buf.subarray(i + 4 + len); out.push(http);
      }
    }
    if (out.length) s.write(Buffer.concat(out));
  });
}).listen(process.argv[1], () => console.log("READY"));
`;
const dir = mkdtempSync(join(tmpdir(), "transport-cpu-"));
const sock = join(dir, "s.sock");
const child = spawn(process.execPath, ["-e", server, sock], { stdio: ["ignore", "pipe", "inherit"] });
await new Promise((res) => child.stdout.once("data", res));

const body = Buffer.from(JSON.stringify({ result: '{"status":"ok","deployment":"d-1234","replicas":3}', commit: { delta: [{ op: "set", key: "step", value: "1" }, { op: "append_message", role: "assistant", content: "deployed checkout to eu-west-1, 3 replicas; next: verify health checks" }] } }));
const path = "/v1/runs/t1/attempts/att_0406594e6c03ddb23197ee4084b19a21/calls/0/outcome";
const results = { frames: [], http: [] };
for (let r = 0; r < rounds; r++) {
  for (const transport of ["frames", "http"]) {
    const pool = Array.from({ length: poolSize }, () => new Transport(endpoint({ socket: sock, transport })));
    let next = 0;
    const t = poolSize === 1 ? pool[0] : { request: (...a) => pool[next++ % poolSize].request(...a), close: () => pool.forEach((p) => p.close()) };
    for (let i = 0; i < 1000; i++) await t.request("POST", path, body); // warm
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await Promise.all(Array.from({ length: conc }, async () => {
      for (let i = 0; i < n / conc; i++) await t.request("POST", path, body);
    }));
    const c = process.cpuUsage(c0);
    const wall = performance.now() - t0;
    t.close();
    results[transport].push((c.user + c.system) / n);
    console.log(`round ${r} ${transport}: ${((c.user + c.system) / n).toFixed(1)} µs CPU per request (user ${(c.user / n).toFixed(1)}), ${((wall * 1000) / n).toFixed(1)} µs wall`);
  }
}
const med = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];
console.log(`medians of ${rounds}, ${n} requests, ${conc} at once on ${poolSize} transport(s) (node ${process.version}): frames ${med(results.frames).toFixed(1)} µs, http ${med(results.http).toFixed(1)} µs of CPU per request`);
child.kill();
rmSync(dir, { recursive: true, force: true });
