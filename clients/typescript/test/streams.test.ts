// Streams out of runs over the wire: an atom's chunks are read before it
// commits, a follower at the tail gets each once, a reader that resumes
// from its offset after a SIGKILL of the server sees no gap and no repeat,
// and the statuses say which attempt committed.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as c from "../src/index.js";
import { Transport, TransportError } from "../src/transport.js";
import { rng, seed, served } from "./harness.js";

const text = (b: Uint8Array) => Buffer.from(b).toString("latin1");

describe("streams", () => {
  const { server, client } = served();

  test("follow the tail, statuses, refusals", async () => {
    const run = await client.run("ts-stream-1");
    const followed: c.StreamChunk[] = [];
    const follower = (async () => {
      for await (const ch of (await client.run("ts-stream-1")).follow("tok", { pollMs: 5000 })) followed.push(ch);
    })();
    let atom = await run.begin();
    assert.equal(await atom.append("tok", "a"), 0);
    assert.equal(await atom.append("tok", ["b", new Uint8Array([0xff])], { flush: true }), 1);
    const before = await run.readStream("tok");
    assert.deepEqual(before.chunks.map((x) => text(x.data)), ["a", "b", "\xff"]);
    assert.deepEqual(before.chunks.map((x) => x.status), ["open", "open", "open"]);
    await atom.fail("retry");
    atom = await run.begin();
    await atom.append("tok", "c");
    atom.delta.set("k", "v");
    await atom.commit();
    await run.end("completed");
    await follower;
    assert.deepEqual(followed.map((x) => x.offset), [0, 1, 2, 3]);
    const all = await run.readStream("tok");
    assert.deepEqual(all.chunks.map((x) => [x.offset, text(x.data), x.attempt, x.status]),
      [[0, "a", 1, "failed"], [1, "b", 1, "failed"], [2, "\xff", 1, "failed"], [3, "c", 2, "committed"]]);
    assert.equal(all.ended, true);
    assert.deepEqual(await run.streams(), [{ name: "tok", chunks: 4 }]);
    await assert.rejects(run.readStream("a/b"), c.BadRequest);
  });

  test("a reader resumes after a SIGKILL of the server", async () => {
    const s = seed();
    const rand = rng(s);
    const run = await client.run("ts-stream-2");
    let atom = await run.begin();
    const read: c.StreamChunk[] = [];
    let next = 0;
    const catchUp = async () => {
      const b = await run.readStream("tok", { from: next });
      for (const ch of b.chunks) {
        assert.equal(ch.offset, next, `seed ${s}`);
        read.push(ch);
        next++;
      }
    };
    const killAt = 1 + Math.floor(rand() * 39);
    for (let i = 0; i < 40; i++) {
      await atom.append("tok", `a${i}`);
      if (rand() < 0.3) await catchUp();
      if (i === killAt) {
        await server.kill();
        await server.start();
        break;
      }
    }
    await catchUp();
    atom.stop();
    atom = await run.begin({ takeover: true });
    await atom.append("tok", "retry", { flush: true });
    atom.delta.set("k", "v");
    await atom.commit();
    await catchUp();
    assert.equal(text(read[read.length - 1]!.data), "retry", `seed ${s}`);
    const again = (await run.readStream("tok")).chunks;
    assert.deepEqual(again.map((x) => text(x.data)), read.map((x) => text(x.data)), `seed ${s}`);
    for (const ch of again) assert.equal(ch.status, text(ch.data) === "retry" ? "committed" : "abandoned", `seed ${s}`);
  });

  test("an append whose answer is lost is sent again, and appended once", async () => {
    const run = await client.run("ts-stream-retry");
    const atom = await run.begin();
    const real = Transport.prototype.request;
    let lose = 3;
    Transport.prototype.request = async function (this: Transport, method: string, path: string, body?: Uint8Array) {
      const a = await real.call(this, method, path, body);
      if (method === "POST" && path.includes("/streams/") && lose > 0) {
        lose--;
        throw new TransportError("the answer was lost");
      }
      return a;
    };
    try {
      // Two made at once: sent one after the other, each once.
      const [first, second] = await Promise.all([atom.append("tok", ["a", "b"]), atom.append("tok", "c")]);
      assert.equal(first, 0);
      assert.equal(second, 2);
      assert.equal(await atom.append("other", "x"), 0);
      assert.equal(await atom.append("tok", "d", { flush: true }), 3);
    } finally {
      Transport.prototype.request = real;
    }
    assert.equal(lose, 0);
    atom.delta.set("k", "v");
    await atom.commit();
    assert.deepEqual((await run.readStream("tok")).chunks.map((x) => text(x.data)), ["a", "b", "c", "d"]);
    assert.deepEqual((await run.readStream("other")).chunks.map((x) => text(x.data)), ["x"]);
  });
});
