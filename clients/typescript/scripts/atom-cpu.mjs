// The client's own CPU per atom, without a server or a socket: the atom of
// bench/continuumd (one action executed here, then the commit riding on its
// outcome: 2 requests) against a Transport whose requests are answered at
// once from in-memory answers of the sizes continuumd gives. What is left is
// the client's work per atom: JSON, promises, the flows' generators, the
// atom's context (AsyncLocalStorage), buffers. Run it after a build (tsc -p .):
//
//     node scripts/atom-cpu.mjs [ATOMS] [ROUNDS]     # prints µs of CPU per atom, each round and their median
//     node --cpu-prof scripts/atom-cpu.mjs 200000 1  # a profile of it
import { Client } from "../dist/src/index.js";
import { Transport } from "../dist/src/transport.js";

const atoms = Number(process.argv[2] ?? 20000);
const rounds = Number(process.argv[3] ?? 5);

let seq = 0;
const hex = "fdb164a0d11522e63a7fc727497bd9edd06a0ad44d9e11f47a46aaf919361bd5";
Transport.prototype.request = function (method, path, body) {
  let a;
  if (method === "PUT") a = { id: "r1", created: "2026-12-06T16:02:36.679156012Z", last_seq: 0, head: hex, snapshot_seq: 0, checkpoint_seq: 0, running: 0, interrupted: 0, lease: null, status: "active", ended: null, parent: "", forked_at: 0 };
  else if (path.endsWith("/attempts")) {
    seq++;
    a = { attempt: "att_0406594e6c03ddb23197ee4084b19a21", run: "r1", seq, lease_ms: 30000, lease_expires: "2026-12-06T16:03:06.714895555Z", interrupted: null,
      call: { call: 0, status: "execute", tool: "deploy", key: `ck1-2:r1:${seq}:0`, index: 0, fingerprint: hex } };
  } else if (path.endsWith("/outcome")) {
    const b = JSON.parse(body.toString());
    a = { call: 0, status: "done", tool: "deploy", key: `ck1-2:r1:${seq}:0`, index: 0, fingerprint: hex, result: b.result, commit: { run: "r1", seq, head: hex } };
  } else throw new Error(`unexpected ${method} ${path}`);
  return Promise.resolve({ status: method === "PUT" ? 200 : path.endsWith("/attempts") ? 201 : 200, data: Buffer.from(JSON.stringify(a) + "\n") });
};

const ARGS = { region: "eu-west-1", service: "checkout", replicas: 3 };
const RESULT = '{"status":"ok","deployment":"d-1234","replicas":3}';
const MESSAGE = "deployed checkout to eu-west-1, 3 replicas; next: verify health checks";
const client = new Client({ socket: "/nonexistent" });
const run = await client.run("r1");
const per = [];
for (let r = 0; r < rounds; r++) {
  const c0 = process.cpuUsage();
  for (let i = 0; i < atoms; i++) {
    await run.atom(async (atom) => {
      await atom.do("deploy", () => RESULT, { args: ARGS });
      atom.delta.set("step", String(atom.seq)).appendMessage("assistant", MESSAGE);
    });
  }
  const c = process.cpuUsage(c0);
  per.push((c.user + c.system) / atoms);
  console.log(`round ${r}: ${per.at(-1).toFixed(1)} µs of CPU per atom`);
}
per.sort((a, b) => a - b);
console.log(`median of ${rounds}: ${per[Math.floor(rounds / 2)].toFixed(1)} µs of CPU per atom (${atoms} atoms per round, node ${process.version})`);
