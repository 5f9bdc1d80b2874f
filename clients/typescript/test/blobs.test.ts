// Blobs over the wire: a large value streamed up in chunks, referenced by
// a commit, read back from the state's reference value, streamed down
// checked; the same bytes stored once; an unknown blob is NotFound; a
// damaged blob never reads back whole.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { openSync, readSync, writeSync, closeSync, fstatSync, readdirSync } from "node:fs";
import * as path from "node:path";
import { describe, test } from "node:test";
import * as c from "../src/index.js";
import { served } from "./harness.js";

function* pieces(n: number, seed: number): Generator<Uint8Array> {
  let h = createHash("sha256").update(String(seed)).digest();
  let total = 0;
  while (total < n) {
    h = createHash("sha256").update(h).digest();
    const b = Buffer.from((h.toString("hex") + " <td>cell</td>\n").repeat(200));
    const p = b.subarray(0, Math.min(b.length, n - total));
    total += p.length;
    yield p;
  }
}

async function readAll(r: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const ch of r) chunks.push(ch as Buffer);
  return Buffer.concat(chunks);
}

describe("blobs", () => {
  const { server, client } = served();

  test("upload, reference, download, damage", async () => {
    const run = await client.run("ts-blobs");
    const whole = Buffer.concat([...pieces(5 << 20, 1)]);
    let ref: c.BlobRef | undefined;
    await run.atom(async (atom) => {
      ref = await c.putBlob(atom, pieces(5 << 20, 1), { mediaType: "text/html" });
      const again = await c.putBlob(atom, whole, { mediaType: "text/html" });
      assert.equal(again.value, ref.value);
      assert.equal(ref.size, whole.length);
      atom.delta.set("page", ref.value);
    });
    const got = c.parseRef((await run.state()).memory.get("page"));
    assert.ok(got);
    assert.equal(got.value, ref!.value);
    const names = readdirSync(path.join(server.store, "blobs"));
    assert.equal(names.length, 1, String(names));
    assert.ok((await readAll(await c.openBlob(client, run.id, got))).equals(whole));

    await assert.rejects(c.openBlob(client, run.id, new c.BlobRef("00".repeat(32), 5)), c.NotFound);
    assert.equal(c.parseRef("plain text"), null);
    assert.equal(c.parseRef("\u0000continuum-blob:" + "0".repeat(64) + "/01"), null);

    // A chunk damaged on disk: the transfer starts, and the stream errs.
    const fd = openSync(path.join(server.store, "blobs", names[0]!), "r+");
    const at = Math.floor(fstatSync(fd).size / 2);
    const one = Buffer.alloc(1);
    readSync(fd, one, 0, 1, at);
    one[0] = one[0]! ^ 1;
    writeSync(fd, one, 0, 1, at);
    closeSync(fd);
    await assert.rejects(async () => readAll(await c.openBlob(client, run.id, got)));
  });
});
