// The chat workload of issue 39, one saver per process: a LangGraph.js
// agent (MessagesAnnotation; agent -> tools -> agent, a scripted model)
// whose each turn adds a user message, an assistant message with a tool
// call and a tool result (SIZE bytes each): four checkpoints per turn
// (input, start, agent, tools).
//
//   node bench/chat.mjs single SAVER TURNS SIZE DIR     one thread: put latencies, bytes at each 100 turns
//   node bench/chat.mjs resume SAVER DIR                a new process: open + latest, then the full history
//                                                       (HISTORY_CAP_S: stop the history after so many
//                                                       seconds and say how far it got; HISTORY=0: no history)
//   node bench/chat.mjs threads SAVER TURNS SIZE DIR N  N threads at once: turns/s
//
// SAVER: continuum (continuumd on DIR/store, the binary CONTINUUMD_BIN),
// continuum-base (the same with another build of the saver, the module
// BASE_SAVER: a before-and-after of a change),
// sqlite (SqliteSaver on DIR/cp.sqlite, as it opens it: WAL with
// better-sqlite3's synchronous=NORMAL, no fsync at a commit), sqlite-full
// (the same with synchronous=FULL: the WAL fsynced at each commit, as
// continuumd and PostgreSQL do), postgres (PostgresSaver on a
// throwaway cluster in DIR/pg, started and stopped by bench/pg.sh: its
// bytes are its tables' with their indexes and TOAST, not the cluster's
// WAL), memory (MemorySaver: its bytes are the serialized checkpoints and
// writes it holds, not a disk's). Prints one line of JSON.
//
// PER_TURN=FILE (single): also writes FILE, one JSON object: the line
// above with the date, Node's version, the load average at the end, and
// perTurn, each turn's put latencies (ms, in order) and the saver's bytes
// read after the turn (outside the timed puts; bench/plot.mjs draws them).

import { spawn, execFileSync } from "node:child_process";
import { readdirSync, statSync, openSync, existsSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import * as http from "node:http";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { MemorySaver } from "@langchain/langgraph-checkpoint";
import { Client } from "@continuumdb/client";
import { ContinuumSaver } from "../dist/src/index.js";

const [mode, saverName, ...rest] = process.argv.slice(2);

function du(p) {
  if (!existsSync(p)) return 0;
  const st = statSync(p);
  if (!st.isDirectory()) return st.size;
  let n = 0;
  for (const e of readdirSync(p)) if (!e.endsWith(".sock")) n += du(path.join(p, e));
  return n;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startServer(dir) {
  const sock = path.join(dir, "s.sock");
  const log = openSync(path.join(dir, "server.log"), "a");
  const proc = spawn(process.env.CONTINUUMD_BIN, ["--store", path.join(dir, "store"), "--socket", sock, "--log-level", "warn"], { stdio: ["ignore", log, log], detached: false });
  for (;;) {
    const ok = await new Promise((res) => {
      const r = http.request({ socketPath: sock, path: "/v1/health" }, (x) => { x.resume(); res(x.statusCode === 200); });
      r.on("error", () => res(false));
      r.end();
    });
    if (ok) return { proc, sock };
    if (proc.exitCode !== null) throw new Error("continuumd exited");
    await sleep(5);
  }
}

const pgScript = fileURLToPath(new URL("./pg.sh", import.meta.url));
function startPostgres(dir) {
  return execFileSync(pgScript, ["start", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim();
}
function stopPostgres(dir) {
  execFileSync(pgScript, ["stop", dir], { stdio: ["ignore", "inherit", "inherit"] });
}

async function stopServer(s) {
  await new Promise((r) => { s.proc.once("exit", r); s.proc.kill("SIGTERM"); });
}

/** A baseline saver's module (loaded before resume's clock starts, as the saver's own is). */
function baseline(name) {
  if (name === "sqlite" || name === "sqlite-full") return import("@langchain/langgraph-checkpoint-sqlite");
  if (name === "postgres") return import("@langchain/langgraph-checkpoint-postgres");
  if (name === "continuum-base") return import(path.resolve(process.env.BASE_SAVER));
  return Promise.resolve({});
}

/** The saver, and how to measure its bytes and close it. */
async function open(name, dir, { server } = {}) {
  if (name === "continuum" || name === "continuum-base") {
    const s = server ?? (await startServer(dir));
    const client = new Client({ socket: s.sock });
    const Saver = name === "continuum" ? ContinuumSaver : (await baseline(name)).ContinuumSaver;
    return { saver: new Saver({ client }), bytes: () => du(path.join(dir, "store")), close: async () => { client.close(); if (!server) await stopServer(s); }, server: s };
  }
  if (name === "sqlite" || name === "sqlite-full") {
    const { SqliteSaver } = await baseline(name);
    const file = path.join(dir, "cp.sqlite");
    const saver = SqliteSaver.fromConnString(file);
    if (name === "sqlite-full") saver.db.pragma("synchronous = FULL"); // the WAL fsynced at each commit
    return { saver, bytes: () => du(file) + du(file + "-wal") + du(file + "-shm"), close: async () => saver.db.close() };
  }
  if (name === "postgres") {
    const { PostgresSaver } = await baseline(name);
    const conn = server ?? startPostgres(dir);
    const saver = PostgresSaver.fromConnString(conn);
    if (!server) await saver.setup();
    const bytes = async () =>
      Number((await saver.pool.query("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) AS n FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = 'public' AND c.relkind = 'r'")).rows[0].n);
    return { saver, bytes, close: async () => { await saver.end(); if (!server) stopPostgres(dir); } };
  }
  if (name === "memory") {
    const saver = new MemorySaver();
    const bytes = () => {
      let n = 0;
      for (const t of Object.values(saver.storage)) for (const ns of Object.values(t)) for (const [c, m] of Object.values(ns)) n += c.length + m.length;
      for (const w of Object.values(saver.writes)) for (const [, , v] of Object.values(w)) n += v.length;
      return n;
    };
    return { saver, bytes, close: async () => {} };
  }
  throw new Error(`unknown saver ${name}`);
}

function pad(n, seed) {
  const base = `${seed} lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. `;
  return base.repeat(Math.ceil(n / base.length)).slice(0, n);
}

function graph(saver, size) {
  return new StateGraph(MessagesAnnotation)
    .addNode("agent", async (s) => {
      const turn = s.messages.filter((m) => m.getType() === "human").length;
      return { messages: [new AIMessage({ content: pad(size - 120, `t${turn}`), tool_calls: [{ id: `call_${turn}`, name: "search", args: { q: `turn ${turn}` }, type: "tool_call" }] })] };
    })
    .addNode("tools", async (s) => {
      const call = s.messages.at(-1).tool_calls[0];
      return { messages: [new ToolMessage({ content: pad(size, `r${call.id}`), tool_call_id: call.id, name: call.name })] };
    })
    .addEdge(START, "agent")
    .addEdge("agent", "tools")
    .addEdge("tools", END)
    .compile({ checkpointer: saver });
}

/** Wraps saver.put to record each put's latency. */
function timePuts(saver) {
  const lat = [];
  const put = saver.put.bind(saver);
  saver.put = async (...a) => {
    const t = performance.now();
    const r = await put(...a);
    lat.push(performance.now() - t);
    return r;
  };
  return lat;
}

const p50 = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.floor(s.length / 2)] : NaN; };

async function turn(g, thread, i) {
  await g.invoke({ messages: [new HumanMessage(`question ${i}`)] }, { configurable: { thread_id: thread }, durability: "sync" });
}

if (mode === "single") {
  const [turns, size, dir] = [Number(rest[0]), Number(rest[1]), rest[2]];
  const s = await open(saverName, dir);
  const lat = timePuts(s.saver);
  const g = graph(s.saver, size);
  const marks = [];
  const perTurn = []; // PER_TURN: each turn's puts (ms) and the saver's bytes after it
  const t0 = performance.now();
  for (let i = 1; i <= turns; i++) {
    const before = lat.length;
    await turn(g, "chat", i);
    if (process.env.PER_TURN) perTurn.push({ turn: i, putsMs: lat.slice(before), bytes: await s.bytes() });
    if (i % 100 === 0) marks.push({ turns: i, bytes: await s.bytes(), putP50ms: p50(lat.slice(0, lat.length)), putP50LastMs: p50(lat.slice(-400)), seconds: (performance.now() - t0) / 1000 });
  }
  const bytesBeforeClose = await s.bytes();
  await s.close();
  const bytesAfterClose = saverName === "postgres" ? bytesBeforeClose : await s.bytes();
  const result = { mode, saver: saverName, turns, size, puts: lat.length, marks, bytesAfterClose };
  if (process.env.PER_TURN) writeFileSync(process.env.PER_TURN, JSON.stringify({ ...result, at: new Date().toISOString(), node: process.version, loadavg: loadavg(), perTurn }) + "\n");
  console.log(JSON.stringify(result));
} else if (mode === "resume") {
  const dir = rest[0];
  let server;
  if (saverName.startsWith("continuum")) server = await startServer(dir); // the server is up: the client's connect is what a new process pays
  if (saverName === "postgres") server = startPostgres(dir);
  await baseline(saverName);
  const t0 = performance.now();
  const s = await open(saverName, dir, { server });
  const cfg = { configurable: { thread_id: "chat" } };
  const t1 = performance.now();
  const latest = await s.saver.getTuple(cfg);
  const t2 = performance.now();
  let n = 0;
  const cap = Number(process.env.HISTORY_CAP_S ?? 0) * 1000;
  let capped = false;
  if (process.env.HISTORY !== "0") for await (const _ of s.saver.list(cfg)) {
    n++;
    if (cap > 0 && performance.now() - t2 > cap) {
      capped = true;
      break;
    }
  }
  const t3 = performance.now();
  await s.close();
  if (saverName.startsWith("continuum")) await stopServer(server);
  if (saverName === "postgres") stopPostgres(dir);
  console.log(JSON.stringify({ mode, saver: saverName, openMs: t1 - t0, latestMs: t2 - t1, messages: latest.checkpoint.channel_values.messages.length, historyMs: capped || process.env.HISTORY === "0" ? null : t3 - t2, checkpoints: n, ...(capped ? { historyStoppedAfterMs: t3 - t2 } : {}) }));
} else if (mode === "threads") {
  const [turns, size, dir, n] = [Number(rest[0]), Number(rest[1]), rest[2], Number(rest[3])];
  const s = await open(saverName, dir);
  const g = graph(s.saver, size);
  const t0 = performance.now();
  await Promise.all(Array.from({ length: n }, async (_, k) => {
    for (let i = 1; i <= turns; i++) await turn(g, `chat-${k}`, i);
  }));
  const secs = (performance.now() - t0) / 1000;
  await s.close();
  console.log(JSON.stringify({ mode, saver: saverName, threads: n, turns, size, seconds: secs, turnsPerSec: (n * turns) / secs }));
} else {
  console.error("usage: see the file's comment");
  process.exit(2);
}

