// The example ReAct agent (examples/react_agent.ts), SIGKILLed at seeded
// random crash points (before and after each effect, between steps) and
// run again until it finishes: every effect is in its downstream once.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import * as path from "node:path";
import { Server } from "./server.js";
import { runChild } from "./child.js";

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

test("the ReAct agent killed at random points: each effect once", async () => {
  const seed = Number(process.env.CONTINUUM_SEED || Date.now() % 2 ** 31);
  console.error(`seed ${seed} (CONTINUUM_SEED=${seed} repeats it)`);
  const rand = rng(seed);
  const server = await new Server().start();
  const dir = mkdtempSync("/tmp/cdlg-ex-");
  const file = path.join(dir, "effects.jsonl");
  try {
    const rounds = Number(process.env.EXAMPLE_ROUNDS || 3);
    for (let round = 0; round < rounds; round++) {
      const thread = `trip-${round}`;
      let kills = 0;
      for (let i = 0; ; i++) {
        // crash points: 4 agent steps, 2 per effect (3 effects): 10 in a run that does not die
        const crashAt = i < 8 ? 1 + Math.floor(rand() * 10) : 0;
        const r = await runChild([server.socket, thread, file], undefined, "../examples/react_agent.js", { ...process.env, CRASH_AT: String(crashAt) });
        if (r.signal === "SIGKILL") {
          kills++;
          continue;
        }
        assert.equal(r.code, 0, `round ${round} run ${i} (CRASH_AT=${crashAt}): ${r.err}`);
        assert.deepEqual(JSON.parse(r.out), { done: true, answer: "Booked, charged and emailed: have a good trip." });
        break;
      }
      console.error(`round ${round}: killed ${kills} times`);
    }
    const lines = readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as { key: string; tool: string });
    assert.equal(lines.length, 3 * rounds, `effects: ${JSON.stringify(lines.map((l) => l.tool))}`);
    for (const t of ["book_flight", "charge_card", "send_email"]) assert.equal(lines.filter((l) => l.tool === t).length, rounds, t);
    assert.equal(new Set(lines.map((l) => l.key)).size, lines.length, "each effect under a key of its own");
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
