// The web view in a real browser: the system's Chromium (never a downloaded
// one) driven by playwright-core. It serves a demo store with continuumctl
// view and with continuumd, loads each page, checks what it shows against
// the store's own API (continuumctl inspect/export/verify --json), keeps a
// screenshot of each page in $ARTIFACTS, renders the XSS corpus as text,
// and watches a run commit beside a live agent: the page updates in place,
// no error, no lock taken.
//
// Environment: CTL (continuumctl), CONTINUUMD, DEMOSTORE (binaries), STORE
// (the demo store, built with an in-doubt run "payments"), ARTIFACTS (a
// directory), CHROMIUM (default /usr/bin/chromium).
import { chromium } from "playwright-core";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, mkdirSync, cpSync, chmodSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import assert from "node:assert/strict";

const env = process.env;
const CTL = env.CTL, STORE = env.STORE, ARTIFACTS = env.ARTIFACTS;
const CONTINUUMD = env.CONTINUUMD, DEMOSTORE = env.DEMOSTORE;
for (const [k, v] of Object.entries({ CTL, STORE, ARTIFACTS, CONTINUUMD, DEMOSTORE })) {
  if (!v) throw new Error(`${k} is not set`);
}
mkdirSync(ARTIFACTS, { recursive: true });

const procs = [];
function cleanup() { for (const p of procs) { try { p.kill("SIGTERM"); } catch {} } }
process.on("exit", cleanup);

const ctlJSON = (...args) => JSON.parse(execFileSync(CTL, args, { encoding: "utf8", maxBuffer: 64 << 20 }));

// start runs a command and resolves with the first line of its output
// that matches re (its stdout or stderr).
function start(cmd, args, re, name) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    procs.push(p);
    let out = "";
    const timer = setTimeout(() => reject(new Error(`${name}: no ${re} in: ${out}`)), 30000);
    const on = (b) => {
      out += b.toString();
      process.stderr.write(`[${name}] ${b}`);
      const m = out.match(re);
      if (m) { clearTimeout(timer); resolve({ proc: p, match: m }); }
    };
    p.stdout.on("data", on);
    p.stderr.on("data", on);
    p.on("exit", (code) => { if (code !== null && code !== 0) reject(new Error(`${name} exited ${code}: ${out}`)); });
  });
}

const userDataDir = mkdtempSync(join(tmpdir(), "continuum-chromium-"));
const browser = await chromium.launchPersistentContext(userDataDir, {
  executablePath: env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 1280, height: 900 },
});
const page = browser.pages()[0] || await browser.newPage();
const problems = [];
page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`); });
page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
page.on("dialog", (d) => { problems.push(`dialog: ${d.message()}`); d.dismiss(); });
// Nothing may leave loopback: no CDN, no font, no telemetry.
await browser.route("**/*", (route) => {
  const u = new URL(route.request().url());
  if (u.hostname !== "127.0.0.1") { problems.push(`external request: ${u}`); return route.abort(); }
  return route.continue();
});

let shot = 0;
async function snap(name) {
  const file = join(ARTIFACTS, `${String(++shot).padStart(2, "0")}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`screenshot ${file}`);
}
async function noXSS(where) {
  const x = await page.evaluate(() => window.__xss);
  assert.equal(x, undefined, `${where}: the XSS corpus ran script (window.__xss = ${x})`);
  const injected = await page.evaluate(() => document.querySelectorAll("main script, main iframe, main img, main svg[onload], [onerror], [onload], [onmouseover]").length);
  assert.equal(injected, 0, `${where}: the corpus made elements`);
}
const text = (sel) => page.locator(sel).innerText();
// poll waits for fn (run in Node) to be true: page.waitForFunction evaluates
// a string in the page, which the view's CSP (no unsafe-eval) forbids.
async function poll(fn, what, ms = 30000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try { if (await fn()) return; } catch {}
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
}

let passed = 0;
async function check(name, fn) {
  const before = problems.length;
  await fn();
  assert.deepEqual(problems.slice(before), [], `${name}: browser problems`);
  passed++;
  console.log(`ok ${name}`);
}

// --- continuumctl view of the demo store ---------------------------------
const ctl = await start(CTL, ["view", STORE, "--listen", "127.0.0.1:0"], /(http:\/\/127\.0\.0\.1:\d+\/)\?token=\S+/, "view");
const base = ctl.match[1];
const inspected = ctlJSON("inspect", STORE, "--json");

await check("login: the one-time token becomes a session cookie", async () => {
  const resp = await page.goto(ctl.match[0]);
  assert.equal(resp.status(), 200);
  assert.equal(new URL(page.url()).search, "", "the token left the address bar");
  const again = await fetch(ctl.match[0], { redirect: "manual" });
  assert.equal(again.status, 401, "the token works once");
  const none = await fetch(base, { redirect: "manual" });
  assert.equal(none.status, 401, "no session, no page");
  const csp = (await page.goto(base)).headers()["content-security-policy"];
  assert.match(csp, /script-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline/);
});

await check("runs page against inspect --json", async () => {
  await page.goto(base);
  assert.equal(Number(await text("#runs-total")), inspected.runs.length);
  for (const r of inspected.runs) {
    const rows = page.locator("#runs tbody tr").filter({ has: page.locator(`td.id a`, { hasText: r.id, exact: true }) });
    assert.ok(await rows.count() >= 1, `run ${r.id} listed`);
    const first = rows.first();
    const last = r.atoms === 0 && r.parent ? r.forked_at : r.last_seq;
    assert.equal(Number(await first.locator("td.lastseq").innerText()), last, `${r.id} last seq`);
    assert.equal(await first.locator(".status").innerText(), r.status, `${r.id} status`);
    assert.equal(Number(await first.locator("td.indoubt").innerText()), r.in_doubt.length, `${r.id} in doubt`);
  }
  await snap("runs");
  await page.selectOption("#filter-status", "in-doubt");
  await page.waitForURL(/status=in-doubt/);
  const ids = await page.locator("#runs tbody td.id a").allInnerTexts();
  assert.deepEqual(ids, inspected.runs.filter((r) => r.in_doubt.length > 0).map((r) => r.id));
  await snap("runs-in-doubt");
  await noXSS("runs");
});

await check("timeline of agent-1 against export", async () => {
  const lines = execFileSync(CTL, ["export", STORE, "--run", "agent-1"], { encoding: "utf8" }).trim().split("\n").map((l) => JSON.parse(l));
  await page.goto(`${base}run?id=agent-1`);
  assert.equal(await page.locator("li.atom").count(), lines.length);
  for (const a of lines) {
    const li = page.locator(`#atom-${a.seq}`);
    for (const act of a.actions) {
      const tools = await li.locator(".action .tool").allInnerTexts();
      assert.ok(tools.includes(act.tool), `atom ${a.seq} shows ${act.tool}`);
      assert.ok((await li.innerText()).includes(act.status), `atom ${a.seq} shows status ${act.status}`);
    }
    assert.equal(await li.locator(".op").count(), a.delta.length, `atom ${a.seq} ops`);
  }
  const body = await page.locator("main").innerText();
  assert.ok(!body.includes("sk-live-DO-NOT-SHOW"), "a redacted argument is not shown");
  assert.ok(body.includes("lint: 3 warnings treated as errors"), "a tool's error");
  assert.ok(body.includes("notifier"), "a message sent");
  assert.ok(await page.locator(".msg.is-error").count() >= 1, "a tool result with IsError");
  assert.ok(await page.locator(".toolcall").count() >= 2, "an assistant's tool calls");
  await snap("timeline");
});

await check("frame with slider and diff against inspect --seq --json", async () => {
  const want = ctlJSON("inspect", STORE, "agent-1", "--seq", "2", "--json");
  await page.goto(`${base}frame?id=agent-1&seq=2`);
  assert.equal(await text("#frame-seq"), "2");
  assert.equal(await page.locator("#chat .msg").count(), want.frame.messages.length);
  const keys = await page.locator("#memory td.k").allInnerTexts();
  assert.deepEqual(keys.sort(), Object.keys(want.frame.memory).sort());
  // the slider: step to 3 without typing a URL
  await page.locator("#seq-slider").fill("3");
  await page.waitForURL(/seq=3/);
  assert.equal(await text("#frame-seq"), "3");
  await page.click("#step-prev");
  await page.waitForURL(/seq=2/);
  // a diff: 1 -> 3 says what changed
  await page.goto(`${base}frame?id=agent-1&seq=3&against=1`);
  const diff = await page.locator("#diff").innerText();
  assert.match(diff, /subgoal build/);
  assert.match(diff, /memory image/);
  assert.match(diff, /pending call_3/);
  assert.ok(await page.locator("#diff .chat.added .msg").count() === want.frame.messages.length + 1 - 2);
  await snap("frame-diff");
  // across a fork
  await page.goto(`${base}frame?id=agent-1-retry&seq=3&against=3&with=agent-1`);
  assert.match(await page.locator("#diff").innerText(), /memory plan/);
  await snap("frame-fork-diff");
});

await check("ledger: in doubt, compensated", async () => {
  await page.goto(`${base}ledger?id=deploy-rb`);
  const l = await page.locator("main").innerText();
  assert.match(l, /compensated by the rollback at seq/);
  assert.match(l, /hotel\.cancel/);
  assert.match(l, /not undone/); // email.send has no compensation
  await snap("ledger-rollback");
  await page.goto(`${base}ledger?id=payments`);
  const pay = inspected.runs.find((r) => r.id === "payments");
  assert.equal(pay.in_doubt.length, 1);
  assert.equal(Number(await text("#run-indoubt")), 1);
  assert.match(await page.locator(".indoubt").innerText(), /payments\.charge/);
  await snap("ledger-in-doubt");
});

await check("waits and streams of a run against inspect --json and export --stream", async () => {
  const want = ctlJSON("inspect", STORE, "approval", "--json");
  await page.goto(`${base}waits?id=approval`);
  const rows = page.locator("table.waits tbody tr");
  assert.equal(await rows.count(), want.run.waits.length);
  for (const w of want.run.waits) {
    const row = page.locator(`table.waits tr[data-seq="${w.seq}"]`);
    assert.equal(await row.locator(".outcome").innerText(), w.outcome, `wait after seq ${w.seq}`);
    if (w.event) assert.equal(await row.locator(".sender").innerText(), w.event.sender);
  }
  const pend = await page.locator("#pending li").allInnerTexts();
  assert.deepEqual(pend.map((t) => t.includes(want.run.pending_events[0].sender)), [true]);
  for (const s of want.streams) {
    assert.equal(Number(await page.locator(`tr[data-stream="${s.name}"] td.num`).innerText()), s.chunks, `stream ${s.name}`);
  }
  assert.equal(await page.locator("#run-waitsfor").innerText(), want.run.waits.at(-1).name);
  await snap("waits");
  await noXSS("waits");
  await page.locator('tr[data-stream="tokens"] a').click();
  await page.waitForURL(/stream\?/);
  const chunks = execFileSync(CTL, ["export", STORE, "--run", "approval", "--stream", "tokens"], { encoding: "utf8" }).trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(await page.locator("li.chunk").count(), chunks.length);
  for (const c of chunks) {
    const li = page.locator(`li.chunk[data-offset="${c.offset}"]`);
    assert.equal(await li.locator(".status").innerText(), c.status, `chunk ${c.offset}`);
    assert.equal(await li.locator("code.val").innerText(), c.data, `chunk ${c.offset}`);
  }
  await snap("stream");
  await noXSS("stream");
});

await check("lineage tree and branch DAG", async () => {
  await page.goto(`${base}lineage`);
  const tree = page.locator("#tree");
  assert.equal(await tree.locator('li[data-run="agent-1"] > ul > li[data-run="agent-1-retry"] > ul > li[data-run="agent-1-retry-2"]').count(), 1);
  await snap("lineage");
  await page.goto(`${base}dag?id=planner`);
  assert.ok(await page.locator("#dag circle.bnode").count() >= 2, "branch atoms drawn");
  assert.ok(await page.locator("#dag line").count() >= 3, "edges drawn");
  await snap("dag");
});

await check("verify against continuumctl verify --json", async () => {
  let want;
  try { want = ctlJSON("verify", STORE, "--json"); } catch (e) { want = JSON.parse(e.stdout); }
  await page.goto(`${base}verify`);
  assert.equal(await text("#verify-ok"), want.ok ? "intact" : "damaged");
  assert.equal(await page.locator("#verify-runs tbody tr").count(), want.runs.length);
  await snap("verify");
});

await check("XSS corpus in messages, tool names and run ids renders as text", async () => {
  const id = inspected.runs.find((r) => r.id.startsWith("xss-")).id;
  await page.goto(`${base}`);
  await page.locator("#runs td.id a", { hasText: id }).click();
  assert.equal(await text("#run-id"), id);
  await noXSS("timeline");
  const body = await page.locator("main").innerText();
  for (const s of ["<script>window.__xss=1</script>", `"><img src=x onerror="window.__xss=2">`, "'><svg onload=window.__xss=3>"]) {
    assert.ok(body.includes(s), `shows ${s} as text`);
  }
  await snap("xss-timeline");
  await page.click("#tab-frame");
  await noXSS("frame");
  assert.ok((await page.locator("#chat").innerText()).includes("<script>window.__xss=1</script>"));
  await snap("xss-frame");
  for (const tab of ["#tab-ledger", "#tab-dag", "#tab-lineage"]) {
    await page.click(tab);
    await noXSS(tab);
  }
  await page.goto(`${base}?q=${encodeURIComponent("<script>")}`);
  await noXSS("filter");
});

// --- an encrypted store: the keyring, erased values ------------------------
if (env.ENC_STORE) {
  await check("encrypted store: without the keyring the view says so; with it erased values are never shown", async () => {
    const noKey = await start(CTL, ["view", env.ENC_STORE, "--listen", "127.0.0.1:0"], /(http:\/\/127\.0\.0\.1:\d+\/)\?token=\S+/, "view-nokey");
    await page.goto(noKey.match[0]);
    assert.match(await page.locator("#error").innerText(), /keyring/);
    // the page's own status, 403, is what the browser logs: expected here
    for (let i = problems.length - 1; i >= 0; i--) if (/status of 403/.test(problems[i])) problems.splice(i, 1);
    await snap("encrypted-no-keyring");
    noKey.proc.kill("SIGTERM");
    const withKey = await start(CTL, ["view", env.ENC_STORE, "--listen", "127.0.0.1:0", "--keyring", env.ENC_STORE + ".keyring"], /(http:\/\/127\.0\.0\.1:\d+\/)\?token=\S+/, "view-key");
    await page.goto(withKey.match[0]);
    await page.goto(`${withKey.match[1]}frame?id=pii`);
    const f = await page.locator("main").innerText();
    assert.match(f, /email\s*erased/);
    assert.ok(!f.includes("ERASED-EMAIL"), "an erased value is not shown");
    await page.goto(`${withKey.match[1]}run?id=pii`);
    assert.ok(!(await page.locator("main").innerText()).includes("ERASED-EMAIL"));
    await snap("encrypted-erased");
    withKey.proc.kill("SIGTERM");
  });
}

// --- beside a live agent -----------------------------------------------------
await check("beside a live committing agent: updates in place, no error, no lock", async () => {
  const dir = mkdtempSync(join(tmpdir(), "continuum-live-"));
  const live = join(dir, "store");
  cpSync(STORE, live, { recursive: true });
  // the view first, then the agent: the agent's Open would fail if the view held the lock
  const view = await start(CTL, ["view", live, "--listen", "127.0.0.1:0"], /(http:\/\/127\.0\.0\.1:\d+\/)\?token=\S+/, "view-live");
  await page.goto(view.match[0]);
  const agent = await start(DEMOSTORE, ["--dir", live, "--live", "live-agent", "--every", "300ms"], /^live$/m, "agent");
  await poll(async () => (await page.locator("#runs td.id a").allInnerTexts()).includes("live-agent"), "live-agent listed in place");
  await page.goto(`${view.match[1]}run?id=live-agent`);
  await page.evaluate(() => { window.__noReload = true; });
  const first = Number(await text("#run-lastseq"));
  await poll(async () => Number(await text("#run-lastseq")) >= first + 3, "the run's last seq to grow in place");
  assert.equal(await page.evaluate(() => window.__noReload), true, "the page updated in place, not reloaded");
  assert.match(await text("#live-status"), /live/);
  assert.ok((await page.locator("li.atom").count()) >= 4);
  await snap("live-timeline");
  // inspect --json agrees with the page it just showed (it may be ahead)
  const now = ctlJSON("inspect", live, "--json").runs.find((r) => r.id === "live-agent");
  assert.ok(now.last_seq >= Number(await text("#run-lastseq")));
  assert.equal(agent.proc.exitCode, null, "the agent still runs");
  agent.proc.kill("SIGTERM");
  await new Promise((r) => agent.proc.on("exit", r));
  assert.equal(agent.proc.exitCode, 0, "the agent stopped cleanly");
  view.proc.kill("SIGTERM");
});

// --- continuumd: the view beside the API, same listener, same token ---------
await check("continuumd serves the view beside its API with its token", async () => {
  const dir = mkdtempSync(join(tmpdir(), "continuum-d-"));
  const store = join(dir, "store");
  cpSync(STORE, store, { recursive: true });
  const tokFile = join(dir, "token");
  const tok = "t" + Math.random().toString(16).slice(2) + Math.random().toString(16).slice(2) + "0123456789";
  writeFileSync(tokFile, tok, { mode: 0o600 });
  chmodSync(tokFile, 0o600);
  const d = await start(CONTINUUMD, ["--store", store, "--no-socket", "--listen", "127.0.0.1:0", "--token-file", tokFile], /url="?(http:\/\/127\.0\.0\.1:\d+)\/view\/\?token=[0-9a-f]+/, "continuumd");
  const origin = d.match[1];
  const health = await fetch(`${origin}/v1/health`, { headers: { Authorization: `Bearer ${tok}` } });
  assert.equal(health.status, 200, "the API on the same listener");
  assert.equal((await fetch(`${origin}/view/`, { redirect: "manual" })).status, 401, "the view needs the token");
  await page.goto(`${origin}/view/?token=${tok}`);
  assert.equal(new URL(page.url()).search, "");
  const runs = await (await fetch(`${origin}/v1/runs`, { headers: { Authorization: `Bearer ${tok}` } })).json();
  void runs;
  assert.equal(Number(await text("#runs-total")), inspected.runs.length);
  await page.click("#runs td.id a >> text=agent-1");
  await page.waitForURL(/\/view\/run\?id=agent-1/);
  await snap("continuumd-timeline");
  d.proc.kill("SIGTERM");
});

await browser.close();
console.log(`webview browser test: ${passed} checks passed; screenshots in ${ARTIFACTS}`);
cleanup();
process.exit(0);
