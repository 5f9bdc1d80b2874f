// The example agent (examples/llm_agent.ts), an LLM tool-calling loop
// against the local stub of an OpenAI-style endpoint, SIGKILLed right after
// its booking took effect, then right after its mail did, and started
// again: it finishes with the answer, every effect once, the model asked
// once per turn (the interrupted turns' answers replayed from the ledger).

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as path from "node:path";
import { test } from "node:test";
import * as c from "../src/index.js";
import { Stub } from "../examples/stub_llm.js";
import { Server, here } from "./harness.js";

test("the LLM agent killed mid-turn resumes", async () => {
  const server = await new Server().start();
  const stub = await new Stub().start();
  const env = { ...process.env, CONTINUUMD_SOCKET: server.socket, LLM_URL: stub.url, WORLD_URL: stub.url };
  const agent = path.join(here, "..", "examples", "llm_agent.js");
  try {
    let out = "";
    for (const killAt of ["book", "mail", undefined] as const) {
      const child = spawn(process.execPath, [agent, "trip-1"], { env, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d));
      child.stderr.on("data", (d: Buffer) => (stderr += d));
      if (killAt) stub.hooks[killAt] = () => child.kill("SIGKILL");
      const [code, signal] = await new Promise<[number | null, string | null]>((r) => child.once("exit", (cd, sg) => r([cd, sg])));
      if (killAt) assert.equal(signal, "SIGKILL", `the agent was not killed at ${killAt}:\n${stdout}\n${stderr}`);
      else assert.equal(code, 0, stderr);
      out = stdout;
    }
    const answer = out.split("\n").filter((l) => l.startsWith("ANSWER "));
    assert.equal(answer.length, 1, out);
    assert.match(answer[0]!, /JL046/);
    assert.deepEqual([...stub.bookingEffects.values()], [1], "the flight was booked more than once");
    assert.deepEqual([...stub.mailEffects.values()], [1], "the confirmation was mailed more than once");
    assert.ok(answer[0]!.includes([...stub.bookings.values()][0]!.pnr));
    assert.equal(stub.completions, 4, "the model was asked again for an interrupted turn");
    const client = server.client();
    assert.equal(c.text(await (await client.run("trip-1")).state(), "answer"), answer[0]!.slice("ANSWER ".length));
    assert.equal((await client.verify({ deep: true })).ok, true);
    client.close();
  } finally {
    await stub.close();
    await server.close();
  }
});
