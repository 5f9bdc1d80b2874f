// One TypeScript client of bench/continuumd's throughput measurement: the
// atom of the Go and Python sides (one action executed here, commit of the
// same delta) through clients/typescript as its prepare script builds it
// (dist/src), ATOMS times on its own run.
//
//     node tsclient.mjs CLIENTDIR SOCKET RUN ATOMS   # prints READY, waits for a line, runs, prints DONE and each atom's µs
//
// CLIENTDIR is the package's directory (clients/typescript, built).
// CONTINUUM_BENCH_TRANSPORT=frames|http forces the client's transport (unset:
// the client's default, frames with fallback to HTTP); a client that did not
// end on the transport forced (or on frames by default) exits with an error
// (a client from before the option, -node-before, is HTTP and not checked). With
// CONTINUUM_BENCH_CLIENT_CPU=1 each client writes to stderr, after DONE, a
// line "tsclient RUN TRANSPORT cpu US us/atom (user U, system S)": its own
// CPU time (process.cpuUsage) from GO to DONE per atom.
import { createInterface } from "node:readline";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [dir, socket, runId, n] = process.argv.slice(2);
const { Client } = await import(pathToFileURL(join(dir, "dist", "src", "index.js")).href);

const ARGS = { region: "eu-west-1", service: "checkout", replicas: 3 };
const RESULT = '{"status":"ok","deployment":"d-1234","replicas":3}';
const MESSAGE = "deployed checkout to eu-west-1, 3 replicas; next: verify health checks";

const transport = process.env.CONTINUUM_BENCH_TRANSPORT || undefined;
if (transport !== undefined && transport !== "frames" && transport !== "http") {
  throw new Error(`CONTINUUM_BENCH_TRANSPORT=${transport}: want frames or http`);
}
const client = new Client({ socket, ...(transport ? { transport } : {}) });
const run = await client.run(runId);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
process.stdout.write("READY\n");
await lines.next();
const cpu0 = process.cpuUsage();
const times = [];
for (let i = 0; i < Number(n); i++) {
  const t0 = process.hrtime.bigint();
  await run.atom(async (atom) => {
    await atom.do("deploy", () => RESULT, { args: ARGS });
    atom.delta.set("step", String(atom.seq)).appendMessage("assistant", MESSAGE);
  });
  times.push((Number(process.hrtime.bigint() - t0) / 1e3).toFixed(1));
}
const cpu = process.cpuUsage(cpu0);
if (client.transport !== undefined && client.transport !== (transport ?? "frames")) throw new Error(`the client ended on ${client.transport}, not ${transport ?? "frames"}`);
process.stdout.write("DONE " + times.join(" ") + "\n");
if (process.env.CONTINUUM_BENCH_CLIENT_CPU === "1") {
  const per = (us) => (us / Number(n)).toFixed(1);
  process.stderr.write(`tsclient ${runId} ${client.transport} cpu ${per(cpu.user + cpu.system)} us/atom (user ${per(cpu.user)}, system ${per(cpu.system)})\n`);
}
client.close();
process.stdin.destroy();
