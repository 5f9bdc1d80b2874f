// ContinuumSaver beyond LangGraph's suite: a thread whose history is a tree
// (puts on seeded random parents fork its runs), read back by id, as the
// latest, by list (which replays a run from its deltas) and by a new saver
// (a new process's view); an appended message is one key of its atom's
// delta; a checkpoint's writes outlive its stretch of the run and leave
// the working memory; deleteThread leaves other threads alone.
import { after, before, test } from "node:test";
import * as assert from "node:assert/strict";
import type { Checkpoint } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import { uuid6 } from "@langchain/langgraph-checkpoint";
import { ContinuumSaver } from "../src/index.js";
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import * as path from "node:path";
import { Server, repo } from "./server.js";

let server: Server;
before(async () => {
  server = await new Server().start();
});
after(async () => {
  await server.close();
});

function rng(s: number): () => number {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Made {
  id: string;
  parent: string | undefined;
  values: Record<string, unknown>;
}

test("a tree of 60 checkpoints: by id, latest, list, a new saver", async () => {
  const seed = Number(process.env.CONTINUUM_SEED || Date.now() % 2 ** 31);
  console.error(`seed ${seed} (CONTINUUM_SEED=${seed} repeats it)`);
  const rand = rng(seed);
  const client = server.client();
  const saver = new ContinuumSaver({ client, prefix: "tree" });
  const made: Made[] = [];
  const writes = new Map<string, [string, string, unknown][]>();
  for (let i = 0; i < 60; i++) {
    const parent = i === 0 ? undefined : rand() < 0.75 ? made[i - 1]! : made[Math.floor(rand() * i)]!;
    const msgs = [...((parent?.values.messages as unknown[]) ?? []), { role: i % 2 ? "ai" : "human", content: `message ${i} ${"x".repeat(Math.floor(rand() * 300))}` }];
    const values: Record<string, unknown> = { messages: msgs, step: i };
    if (rand() < 0.3) values.scratch = { note: `n${i}` };
    const cp: Checkpoint = {
      v: 4, id: uuid6(-3), ts: new Date().toISOString(), channel_values: values,
      channel_versions: Object.fromEntries(Object.keys(values).map((k) => [k, i + 1])), versions_seen: { agent: { step: i } },
    };
    const cfg = await saver.put({ configurable: { thread_id: "t1", checkpoint_ns: "", checkpoint_id: parent?.id } }, cp, { source: "loop", step: i, parents: {} }, cp.channel_versions);
    made.push({ id: cp.id, parent: parent?.id, values });
    if (rand() < 0.5) {
      const w: [string, string, unknown][] = [["task-" + i, "messages", { role: "ai", content: `pending ${i}` }]];
      await saver.putWrites(cfg, w.map(([, c, v]) => [c, v]), "task-" + i);
      writes.set(cp.id, w);
    }
  }
  const check = async (s: ContinuumSaver) => {
    const listed = new Map<string, unknown>();
    for await (const t of s.list({ configurable: { thread_id: "t1" } })) listed.set(t.checkpoint.id, t);
    assert.equal(listed.size, made.length);
    for (const m of made) {
      const t = await s.getTuple({ configurable: { thread_id: "t1", checkpoint_ns: "", checkpoint_id: m.id } });
      assert.ok(t, m.id);
      assert.deepEqual(t!.checkpoint.channel_values, m.values, `channel values of ${m.id}`);
      assert.equal(t!.parentConfig?.configurable?.checkpoint_id, m.parent);
      assert.deepEqual(t!.pendingWrites, writes.get(m.id) ?? []);
      assert.deepEqual(listed.get(m.id), t, `list and getTuple agree on ${m.id}`);
    }
    const latest = await s.getTuple({ configurable: { thread_id: "t1" } });
    assert.equal(latest!.checkpoint.id, made.map((m) => m.id).sort().at(-1));
  };
  await check(saver);
  const fresh = new ContinuumSaver({ client, prefix: "tree" });
  await check(fresh);
  // the history is a tree of runs: more than one run when a put forked
  const runs = (await client.runs()).filter((r) => r.id.startsWith("tree/"));
  const forks = made.filter((m, i) => i > 0 && m.parent !== made[i - 1]!.id).length;
  assert.ok(runs.length >= 1 + (forks > 0 ? 1 : 0), `runs ${runs.length}, forks ${forks}`);
  client.close();
});

test("an appended message is one key of the atom's delta", async () => {
  const client = server.client();
  const saver = new ContinuumSaver({ client, prefix: "delta" });
  let cfg: RunnableConfig = { configurable: { thread_id: "d", checkpoint_ns: "" } };
  const msgs: unknown[] = [];
  for (let i = 0; i < 5; i++) {
    msgs.push({ content: "m".repeat(1000) + i });
    const cp: Checkpoint = { v: 4, id: uuid6(-3), ts: new Date().toISOString(), channel_values: { messages: [...msgs], other: "same" }, channel_versions: { messages: i + 1, other: 1 }, versions_seen: {} };
    cfg = await saver.put(cfg, cp, { source: "loop", step: i, parents: {} }, i === 0 ? { messages: 1, other: 1 } : { messages: i + 1 });
  }
  const run = (await client.runs()).find((r) => r.id.startsWith("delta/"))!;
  const r = await client.run(run.id);
  const last = await r.atomAt(run.lastSeq);
  const keys = last.delta.filter((o) => o.op === "set").map((o) => String(o.key)).sort();
  assert.deepEqual(keys.filter((k) => !k.startsWith("i/") && k !== "top"), ["a/messages/4", "cp", "n/messages"]);
  const size = JSON.stringify(last.delta).length;
  assert.ok(size < 2500, `the fifth checkpoint's delta is ${size} bytes: one message, not five`);
  client.close();
});

test("a put on the newest checkpoint of a run is one request (a begin carrying its commit), and so is a putWrites", async () => {
  const client = server.client();
  const saver = new ContinuumSaver({ client, prefix: "trips" });
  // the server's count of requests, without the stats request itself
  const requests = async () => Number(((await client.stats()).server as Record<string, unknown>).requests) - 1;
  let cfg: RunnableConfig = { configurable: { thread_id: "n", checkpoint_ns: "" } };
  for (let i = 0; i < 4; i++) {
    const before = await requests();
    const cp: Checkpoint = { v: 4, id: uuid6(-3), ts: new Date().toISOString(), channel_values: { messages: [`m${i}`] }, channel_versions: { messages: i + 1 }, versions_seen: {} };
    cfg = await saver.put(cfg, cp, { source: "loop", step: i, parents: {} }, { messages: i + 1 });
    const put = (await requests()) - before - 1;
    await saver.putWrites(cfg, [["messages", `w${i}`]], "task");
    const writes = (await requests()) - before - 2 - put;
    if (i > 0) assert.deepEqual([put, writes], [1, 1], `checkpoint ${i}: put ${put} requests, putWrites ${writes}`);
  }
  // a new saver (a new process) reads the latest checkpoint, its writes included, in one request
  const before = await requests();
  const fresh = new ContinuumSaver({ client, prefix: "trips" });
  const got = await fresh.getTuple({ configurable: { thread_id: "n", checkpoint_ns: "" } });
  assert.equal((await requests()) - before - 1, 1, "the latest checkpoint in a new saver: one request");
  assert.deepEqual(got!.checkpoint.channel_values.messages, ["m3"]);
  assert.deepEqual(got!.pendingWrites, [["task", "messages", "w3"]]);
  assert.deepEqual(got!.metadata, { source: "loop", step: 3, parents: {} });
  assert.equal(got!.parentConfig?.configurable?.checkpoint_id, (await saver.getTuple({ configurable: { thread_id: "n", checkpoint_ns: "", checkpoint_id: got!.parentConfig?.configurable?.checkpoint_id } }))!.config.configurable!.checkpoint_id);
  client.close();
});

test("a put after another saver wrote the thread finds the run moved and puts where its parent is", async () => {
  const client = server.client();
  const a = new ContinuumSaver({ client, prefix: "moved" });
  const b = new ContinuumSaver({ client, prefix: "moved" });
  const mk = (id: string, m: string[], v: number): Checkpoint => ({ v: 4, id, ts: new Date().toISOString(), channel_values: { m }, channel_versions: { m: v }, versions_seen: {} });
  const root = { configurable: { thread_id: "t", checkpoint_ns: "" } };
  const [id1, id2, id3] = [uuid6(-3), uuid6(-3), uuid6(-3)];
  const c1 = await a.put(root, mk(id1, ["x"], 1), { source: "loop", step: 1, parents: {} }, { m: 1 });
  // b (another process) extends checkpoint 1; a still takes 1 for its run's newest
  assert.ok(await b.getTuple(c1));
  await b.put(c1, mk(id2, ["x", "b"], 2), { source: "loop", step: 2, parents: {} }, { m: 2 });
  await a.put(c1, mk(id3, ["x", "a"], 2), { source: "loop", step: 2, parents: {} }, { m: 2 });
  const fresh = new ContinuumSaver({ client, prefix: "moved" });
  const t2 = await fresh.getTuple({ configurable: { ...root.configurable, checkpoint_id: id2 } });
  const t3 = await fresh.getTuple({ configurable: { ...root.configurable, checkpoint_id: id3 } });
  assert.deepEqual(t2!.checkpoint.channel_values.m, ["x", "b"]);
  assert.deepEqual(t3!.checkpoint.channel_values.m, ["x", "a"]);
  assert.equal(t2!.parentConfig?.configurable?.checkpoint_id, id1);
  assert.equal(t3!.parentConfig?.configurable?.checkpoint_id, id1);
  const latest = await fresh.getTuple(root);
  assert.equal(latest!.config.configurable!.checkpoint_id, id3 > id2 ? id3 : id2);
  const ids: string[] = [];
  for await (const t of fresh.list(root)) ids.push(t.config.configurable!.checkpoint_id as string);
  assert.deepEqual(ids, [id1, id2, id3].sort().reverse());
  client.close();
});

test("a put re-encodes an array item that is a new value at its index, and only it", async () => {
  const client = server.client();
  const saver = new ContinuumSaver({ client, prefix: "reenc" });
  const a = { content: "a" };
  const b = { content: "b" };
  const steps: unknown[][] = [[a, b], [a, b, { content: "c" }], [a, { content: "B" }, { content: "c" }], [a, { content: "B" }, { content: "c" }]];
  let cfg: RunnableConfig = { configurable: { thread_id: "r", checkpoint_ns: "" } };
  const sets: string[][] = [];
  for (let i = 0; i < steps.length; i++) {
    const cp: Checkpoint = { v: 4, id: uuid6(-3), ts: new Date().toISOString(), channel_values: { m: steps[i] }, channel_versions: { m: i + 1 }, versions_seen: {} };
    cfg = await saver.put(cfg, cp, { source: "loop", step: i, parents: {} }, { m: i + 1 });
    const run = (await client.runs()).find((r) => r.id.startsWith("reenc/"))!;
    const at = await (await client.run(run.id)).atomAt(run.lastSeq);
    sets.push(at.delta.filter((o) => o.op === "set" && String(o.key).startsWith("a/")).map((o) => String(o.key)).sort());
  }
  // equal content in new objects (the last step) is re-encoded to the same text: no key changes
  assert.deepEqual(sets, [["a/m/0", "a/m/1"], ["a/m/2"], ["a/m/1"], []]);
  const got = await new ContinuumSaver({ client, prefix: "reenc" }).getTuple({ configurable: { thread_id: "r", checkpoint_ns: "" } });
  assert.deepEqual(got!.checkpoint.channel_values.m, [{ content: "a" }, { content: "B" }, { content: "c" }]);
  client.close();
});

test("a checkpoint's writes are read back after its run moved on, late writes too, and leave the working memory", async () => {
  const client = server.client();
  const saver = new ContinuumSaver({ client, prefix: "wr" });
  const ids: string[] = [];
  let cfg: RunnableConfig = { configurable: { thread_id: "w", checkpoint_ns: "" } };
  const want = new Map<string, [string, string, unknown][]>();
  // 20 checkpoints (list replays the run), each with writes of two tasks before the next
  for (let i = 0; i < 20; i++) {
    const cp: Checkpoint = { v: 4, id: uuid6(-3), ts: new Date().toISOString(), channel_values: { n: i }, channel_versions: { n: i + 1 }, versions_seen: {} };
    cfg = await saver.put(cfg, cp, { source: "loop", step: i, parents: {} }, { n: i + 1 });
    ids.push(cp.id);
    const ws: [string, string, unknown][] = [];
    for (const task of ["t1", "t2"]) {
      await saver.putWrites(cfg, [["ch", `${task}@${i}`], ["other", i]], task);
      ws.push([task, "ch", `${task}@${i}`], [task, "other", i]);
    }
    // the same writes again change nothing
    await saver.putWrites(cfg, [["ch", `t1@${i}`], ["other", i]], "t1");
    want.set(cp.id, ws);
  }
  // a late write to an old checkpoint, by a saver of another process
  const late = new ContinuumSaver({ client, prefix: "wr" });
  await late.putWrites({ configurable: { thread_id: "w", checkpoint_ns: "", checkpoint_id: ids[3] } }, [["ch", "late"]], "t3");
  want.get(ids[3])!.push(["t3", "ch", "late"]);
  const sorted = (ws: [string, string, unknown][]) => [...ws].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  const fresh = new ContinuumSaver({ client, prefix: "wr" });
  for (const id of ids) {
    const tup = await fresh.getTuple({ configurable: { thread_id: "w", checkpoint_ns: "", checkpoint_id: id } });
    assert.deepEqual(sorted(tup!.pendingWrites as [string, string, unknown][]), sorted(want.get(id)!), `writes of ${id}`);
  }
  const listed = [];
  for await (const tup of new ContinuumSaver({ client, prefix: "wr" }).list({ configurable: { thread_id: "w" } })) listed.push(tup);
  assert.equal(listed.length, 20);
  for (const tup of listed) {
    const id = tup.config.configurable!.checkpoint_id as string;
    assert.deepEqual(sorted(tup.pendingWrites as [string, string, unknown][]), sorted(want.get(id)!), `listed writes of ${id}`);
    assert.equal(tup.checkpoint.channel_values.n, ids.indexOf(id));
  }
  const latest = await fresh.getTuple({ configurable: { thread_id: "w", checkpoint_ns: "" } });
  assert.equal(latest!.checkpoint.id, ids[19]);
  // the run's working memory holds the newest checkpoint's writes and the late one, no other
  const run = (await client.runs()).find((r) => r.id.startsWith("wr/"))!;
  const state = (await client.request({ kind: "request", method: "GET", path: `/v1/runs/${encodeURIComponent(run.id)}/state` })) as { memory: Record<string, string> };
  const writeKeys = Object.keys(state.memory).filter((k) => k.startsWith("w/") || k.startsWith("lw/"));
  assert.deepEqual(writeKeys.map((k) => decodeURIComponent(k.split("/")[1])).sort(), [ids[3], ...Array(4).fill(ids[19])].sort());
  client.close();
});

test("deleteThread removes the thread in every namespace, and only it", async () => {
  const client = server.client();
  const saver = new ContinuumSaver({ client, prefix: "del" });
  const cp = (): Checkpoint => ({ v: 4, id: uuid6(-3), ts: new Date().toISOString(), channel_values: { a: 1 }, channel_versions: { a: 1 }, versions_seen: {} });
  for (const [t, ns] of [["x", ""], ["x", "sub"], ["y", ""]]) await saver.put({ configurable: { thread_id: t, checkpoint_ns: ns } }, cp(), { source: "input", step: -1, parents: {} }, { a: 1 });
  await saver.deleteThread("x");
  const fresh = new ContinuumSaver({ client, prefix: "del" });
  assert.equal(await fresh.getTuple({ configurable: { thread_id: "x", checkpoint_ns: "" } }), undefined);
  assert.equal(await fresh.getTuple({ configurable: { thread_id: "x", checkpoint_ns: "sub" } }), undefined);
  assert.ok(await fresh.getTuple({ configurable: { thread_id: "y", checkpoint_ns: "" } }));
  client.close();
});

test("continuumctl verify passes on the store the saver wrote", async () => {
  let ctl = process.env.CONTINUUMCTL_BIN;
  if (!ctl) {
    ctl = path.join(mkdtempSync("/tmp/continuumctl-bin-"), "continuumctl");
    execFileSync("go", ["build", "-o", ctl, "./cmd/continuumctl"], { cwd: repo, stdio: "inherit" });
  }
  await server.stop();
  const out = execFileSync(ctl, ["verify", server.store], { encoding: "utf8" });
  assert.match(out, /tree\//, "verify's report names the thread's runs");
  await server.start();
});

test("a saver given the options of a Client makes its own, and reads what one given a Client wrote", async () => {
  const client = server.client();
  const writer = new ContinuumSaver({ client, prefix: "opts" });
  const cfg: RunnableConfig = { configurable: { thread_id: "o", checkpoint_ns: "" } };
  const cp: Checkpoint = { v: 4, id: uuid6(-3), ts: new Date().toISOString(), channel_values: { x: 1 }, channel_versions: { x: 1 }, versions_seen: {} };
  await writer.put(cfg, cp, { source: "input", step: 0, parents: {} }, { x: 1 });
  const reader = new ContinuumSaver({ client: { socket: server.socket }, prefix: "opts" });
  const got = await reader.getTuple(cfg);
  assert.equal(got?.checkpoint.id, cp.id);
  assert.deepEqual(got?.checkpoint.channel_values, { x: 1 });
  reader.client.close();
  client.close();
});
