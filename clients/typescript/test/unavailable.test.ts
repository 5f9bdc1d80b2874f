// Nothing serving the socket: Unavailable says which path was tried,
// resolved from the working directory, and how continuumd names it.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import * as path from "node:path";
import { Client, Unavailable } from "../src/index.js";

test("no server on the socket: Unavailable names the resolved path", async () => {
  const dir = mkdtempSync("/tmp/cdts-none-");
  const sock = path.join(dir, "store.sock");
  const c = new Client({ socket: path.relative(process.cwd(), sock), retryForMs: 200 });
  try {
    await assert.rejects(c.runs(), (e: unknown) => {
      assert.ok(e instanceof Unavailable, String(e));
      assert.match(e.message, /is continuumd running, serving /);
      assert.ok(e.message.includes(sock), e.message);
      return true;
    });
  } finally {
    c.close();
  }
});
