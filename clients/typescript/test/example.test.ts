// The example agent (examples/llm_agent.ts), an LLM tool-calling loop
// against the local stub of an OpenAI-style endpoint. It asks a human
// before booking: it waits, durably, for the approval event. It is
// SIGKILLed while it waits, started again (it waits on), resumes when the
// approval is posted, is SIGKILLed right after its booking took effect,
// then right after its mail did, and started again: it finishes with the
// answer, every effect once, the model asked once per turn (the
// interrupted turns' answers replayed from the ledger). A denied approval,
// and one that timed out while the agent was dead, end the run without
// booking.

import assert from "node:assert/strict";
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import * as path from "node:path";
import { test } from "node:test";
import * as c from "../src/index.js";
import { Stub } from "../examples/stub_llm.js";
import { Server, here, sleep } from "./harness.js";

const agentPath = path.join(here, "..", "examples", "llm_agent.js");

/** The agent as a child process, with its output gathered and a way to wait for a line. */
function agent(server: Server, stub: Stub, run: string, extra: Record<string, string> = {}) {
  const env = { ...process.env, CONTINUUMD_SOCKET: server.socket, LLM_URL: stub.url, WORLD_URL: stub.url, ...extra };
  const child = spawn(process.execPath, [agentPath, run], { env, stdio: ["pipe", "pipe", "pipe"] }) as ChildProcessWithoutNullStreams;
  const out = { stdout: "", stderr: "" };
  child.stdout.on("data", (d: Buffer) => (out.stdout += d));
  child.stderr.on("data", (d: Buffer) => (out.stderr += d));
  const exited = new Promise<[number | null, string | null]>((r) => child.once("exit", (cd, sg) => r([cd, sg])));
  const line = async (prefix: string): Promise<string> => {
    for (;;) {
      const l = out.stdout.split("\n").find((x) => x.startsWith(prefix));
      if (l) return l;
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the agent ended before ${prefix}:\n${out.stdout}\n${out.stderr}`);
      await sleep(10);
    }
  };
  return { child, out, exited, line };
}

test("the LLM agent killed while it waits resumes on the approval, and killed mid-turn resumes", async () => {
  const server = await new Server().start();
  const stub = await new Stub().start();
  const client = server.client();
  try {
    // Killed while it waits for the approval.
    let a = agent(server, stub, "trip-1");
    const waiting = await a.line("WAITING ");
    a.child.kill("SIGKILL");
    await a.exited;
    assert.equal(stub.bookingEffects.size, 0, "booked before the approval");
    // Started again, it waits on; the approval is posted; it books and is killed right after.
    a = agent(server, stub, "trip-1");
    assert.equal(await a.line("WAITING "), waiting);
    const child = a.child;
    stub.hooks.book = () => child.kill("SIGKILL");
    const event = waiting.split(" ").at(-1)!;
    const payload = JSON.stringify({ approved: true });
    assert.equal((await client.sendEvent("trip-1", event, { sender: "alice", payload })).delivered, true);
    assert.equal((await a.exited)[1], "SIGKILL", `the agent was not killed at book:\n${a.out.stdout}\n${a.out.stderr}`);
    assert.equal((await client.sendEvent("trip-1", event, { sender: "alice", payload })).duplicate, true);
    let out = "";
    for (const killAt of ["mail", undefined] as const) {
      const b = agent(server, stub, "trip-1");
      if (killAt) stub.hooks[killAt] = () => b.child.kill("SIGKILL");
      const [code, signal] = await b.exited;
      if (killAt) assert.equal(signal, "SIGKILL", `the agent was not killed at ${killAt}:\n${b.out.stdout}\n${b.out.stderr}`);
      else assert.equal(code, 0, b.out.stderr);
      out = b.out.stdout;
    }
    const answer = out.split("\n").filter((l) => l.startsWith("ANSWER "));
    assert.equal(answer.length, 1, out);
    assert.match(answer[0]!, /JL046/);
    assert.deepEqual([...stub.bookingEffects.values()], [1], "the flight was booked more than once");
    assert.deepEqual([...stub.mailEffects.values()], [1], "the confirmation was mailed more than once");
    assert.ok(answer[0]!.includes([...stub.bookings.values()][0]!.pnr));
    assert.equal(stub.completions, 4, "the model was asked again for an interrupted turn");
    const st = await (await client.run("trip-1")).state();
    assert.equal(c.text(st, "answer"), answer[0]!.slice("ANSWER ".length));
    assert.equal(c.text(st, "approval"), "approved");
    assert.deepEqual(await client.ready(), []);
    assert.equal((await client.verify({ deep: true })).ok, true);
  } finally {
    client.close();
    await stub.close();
    await server.close();
  }
});

test("the LLM agent denied, or timed out while dead, does not book", async () => {
  const server = await new Server().start();
  const stub = await new Stub().start();
  const client = server.client();
  try {
    let a = agent(server, stub, "trip-denied");
    const event = (await a.line("WAITING ")).split(" ").at(-1)!;
    await client.sendEvent("trip-denied", event, { sender: "bob", payload: JSON.stringify({ approved: false }) });
    assert.equal((await a.exited)[0], 0, a.out.stderr);
    assert.match(a.out.stdout, /ANSWER Not booked/);
    assert.match(a.out.stdout, /denied by bob/);
    a = agent(server, stub, "trip-late", { APPROVAL_TIMEOUT_MS: "300" });
    await a.line("WAITING ");
    a.child.kill("SIGKILL");
    await a.exited;
    await sleep(400);
    a = agent(server, stub, "trip-late", { APPROVAL_TIMEOUT_MS: "300" });
    assert.equal((await a.exited)[0], 0, a.out.stderr);
    assert.match(a.out.stdout, /APPROVAL timed_out/);
    assert.match(a.out.stdout, /ANSWER Not booked/);
    assert.equal(stub.bookingEffects.size, 0, "booked without an approval");
    for (const rid of ["trip-denied", "trip-late"]) assert.equal((await (await client.run(rid)).info()).status, "cancelled");
    assert.equal((await client.verify({ deep: true })).ok, true);
  } finally {
    client.close();
    await stub.close();
    await server.close();
  }
});
