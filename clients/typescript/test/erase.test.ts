// Erasure over the wire: a server with --keyring and --erasable serves an
// encrypted store; eraseKey leaves the run's state without the key at
// every seq, erase leaves the run gone; each refusal has its error. A
// server without --keyring refuses both.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import * as c from "../src/index.js";
import { Server, served } from "./harness.js";

const dec = (b: Uint8Array | undefined) => (b === undefined ? undefined : new TextDecoder().decode(b));

describe("erase", () => {
  const tmp = mkdtempSync("/tmp/cdkr-");
  const ring = path.join(tmp, "store.keyring");
  writeFileSync(ring, `continuum-keyring 1\ncurrent k1\nkey k1 ${randomBytes(32).toString("hex")}\n`);
  chmodSync(ring, 0o600);
  const { client } = served("--keyring", ring, "--erasable", "email", "--erasable", "contact/phone");
  after(() => rmSync(tmp, { recursive: true, force: true }));

  test("eraseKey, then erase of the run", async () => {
    const run = await client.run("ts-erase-me");
    await run.atom(async (atom) => {
      atom.delta.set("email", "ada@example.com").set("contact/phone", "+44 20 7946 0000").set("name", "Ada");
    });
    await run.atom(async (atom) => {
      atom.delta.set("email", "ada@example.org");
    });
    assert.equal(dec((await run.state()).memory.get("email")), "ada@example.org");

    const e = await client.eraseKey(run.id, "email", { reason: "GDPR request 17" });
    assert.deepEqual([e.run, e.key, e.seq, e.reason], [run.id, "email", 2, "GDPR request 17"]);
    assert.ok(e.keyNos.length > 0 && e.head.length === 64, JSON.stringify(e));
    for (const seq of [undefined, 1, 2]) {
      const mem = (await run.state(seq)).memory;
      assert.equal(mem.has("email"), false, `seq ${seq}`);
      assert.equal(dec(mem.get("name")), "Ada");
    }
    // A key with a slash travels percent-encoded.
    assert.equal((await client.eraseKey(run.id, "contact/phone")).reason, "erased by request");
    assert.equal((await run.state()).memory.has("contact/phone"), false);

    await assert.rejects(client.eraseKey(run.id, "email"), c.NothingToErase);
    await assert.rejects(client.eraseKey(run.id, "name"), c.NotErasable);
    await assert.rejects(client.eraseKey("ts-no-such-run", "email"), c.RunNotFound);
    await assert.rejects(client.erase(run.id), c.RunNotEnded);

    await client.fork(run.id, 1, "ts-erase-me-fork");
    await run.end("completed");
    await assert.rejects(client.erase(run.id), c.RunHasForks);
    await (await client.run("ts-erase-me-fork")).end("cancelled");
    assert.notEqual((await client.erase("ts-erase-me-fork")).erasure, null);

    const d = await client.erase(run.id, { reason: "GDPR request 18" });
    assert.deepEqual([d.id, d.seq, d.reason], [run.id, 4, "GDPR request 18"]); // two atoms, the end at 3
    assert.ok(d.erasure);
    assert.deepEqual([d.erasure.seq, d.erasure.head, d.erasure.reason], [d.seq, d.head, "GDPR request 18"]);
    assert.deepEqual(await client.erase(run.id), d, "a repeated erase resolves to the erasure");
    await assert.rejects(run.info(), c.RunDeleted);
    await assert.rejects(run.state(), c.RunDeleted);
    await assert.rejects(client.run(run.id), c.RunDeleted);
    await assert.rejects(client.eraseKey(run.id, "email"), c.RunDeleted);
    assert.equal((await client.runs()).some((r) => r.id === run.id), false);
  });
});

test("a server without --keyring refuses erasure", async () => {
  const server = await new Server().start();
  const client = server.client();
  try {
    const run = await client.run("ts-plain");
    await run.atom(async (atom) => {
      atom.delta.set("email", "ada@example.com");
    });
    await assert.rejects(client.eraseKey(run.id, "email"), c.NotEncrypted);
    await run.end("completed");
    await assert.rejects(client.erase(run.id), (e: unknown) => e instanceof c.NotEncrypted && e.status === 409 && e.code === "keyring");
    assert.equal(dec((await run.state()).memory.get("email")), "ada@example.com");
  } finally {
    client.close();
    await server.close();
  }
});
