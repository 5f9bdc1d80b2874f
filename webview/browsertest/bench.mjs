// Time to first render of the web view's pages in the system's Chromium,
// and the view's memory while it serves them, against the CLI that prints
// the same data (the baseline), in alternating rounds; medians.
//
//   CTL=continuumctl RUNS_STORE=DIR LONG_STORE=DIR [ROUNDS=7] node bench.mjs
//
// RUNS_STORE: a store of 10,000 runs (demostore --runs 10000 --atoms 3);
// LONG_STORE: one run "long" of 100,000 atoms (demostore --long 100000).
import { chromium } from "playwright-core";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";

const { CTL, RUNS_STORE, LONG_STORE } = process.env;
const ROUNDS = Number(process.env.ROUNDS || 7);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const procKB = (pid, field) => Number(readFileSync(`/proc/${pid}/status`, "utf8").match(new RegExp(`${field}:\\s+(\\d+)`))[1]);

function startView(dir) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const p = spawn(CTL, ["view", dir, "--listen", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout.on("data", (b) => {
      out += b;
      const m = out.match(/(http:\/\/127\.0\.0\.1:\d+\/)\?token=\S+/);
      if (m) resolve({ p, login: m[0], base: m[1], startMs: ms(t0) });
    });
    p.on("exit", (c) => reject(new Error(`view exited ${c}: ${out}`)));
  });
}

const browser = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "continuum-bench-")), {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const page = browser.pages()[0] || await browser.newPage();

async function bench(name, dir, path, baseline) {
  const v = await startView(dir);
  await page.goto(v.login);
  const cookie = (await browser.cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
  const rows = { fcp: [], load: [], html: [], cli: [], rss: [], bytes: [] };
  for (let i = 0; i < ROUNDS; i++) {
    // the page in the browser: navigation start to the page rendered
    const target = v.base + (typeof path === "function" ? path(i) : path);
    await page.goto(target, { waitUntil: "load" });
    const t = await page.evaluate(() => {
      const nav = performance.getEntriesByType("navigation")[0];
      // first render: the HTML parsed and the page's script run (headless
      // Chromium does not always report paint entries)
      return { fcp: nav.domContentLoadedEventEnd, load: nav.loadEventEnd, bytes: nav.transferSize };
    });
    rows.fcp.push(t.fcp); rows.load.push(t.load); rows.bytes.push(t.bytes);
    // the same page's HTML alone, from the server
    let t0 = process.hrtime.bigint();
    const r = await fetch(target, { headers: { cookie } });
    await r.text();
    rows.html.push(ms(t0));
    rows.rss.push(procKB(v.p.pid, "VmRSS") / 1024);
    // the baseline: the CLI printing the same data, a process of its own
    t0 = process.hrtime.bigint();
    execFileSync(CTL, baseline(dir), { stdio: ["ignore", "ignore", "inherit"], maxBuffer: 1 << 30 });
    rows.cli.push(ms(t0));
  }
  const hwm = procKB(v.p.pid, "VmHWM") / 1024;
  v.p.kill("SIGTERM");
  const f = (x) => x.toFixed(1);
  if (typeof path === "function") { // the first round is the cold one: report it apart
    console.log(`| ${name}: first (cold) | ${f(v.startMs)} | ${f(rows.fcp[0])} | ${f(rows.load[0])} | ${f(rows.html[0])} | ${f(rows.cli[0])} | ${f(rows.rss[0])} | ${Math.round(rows.bytes[0] / 1024)} |`);
    for (const k of Object.keys(rows)) rows[k] = rows[k].slice(1);
    name += ": the next steps";
  }
  console.log(`| ${name} | ${f(v.startMs)} | ${f(median(rows.fcp))} (${f(Math.min(...rows.fcp))}-${f(Math.max(...rows.fcp))}) | ${f(median(rows.load))} | ${f(median(rows.html))} | ${f(median(rows.cli))} (${f(Math.min(...rows.cli))}-${f(Math.max(...rows.cli))}) | ${f(median(rows.rss))} / ${f(hwm)} | ${Math.round(median(rows.bytes) / 1024)} |`);
}

console.log(`rounds ${ROUNDS}, ${new Date().toISOString()}`);
console.log("| page | view start (ms, one Inspect pass) | first render (DOMContentLoaded) ms median (min-max) | load event ms | HTML from the server ms | baseline: CLI ms median (min-max) | view RSS MiB median / peak | page KiB |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
await bench("runs page, 10,000 runs (first 100)", RUNS_STORE, "", (d) => ["inspect", d, "--json"]);
await bench("runs page, 10,000 runs, filtered `q=run-0099`", RUNS_STORE, "?q=run-0099&status=active", (d) => ["inspect", d, "--json"]);
await bench("timeline, 100,000-atom run (last 50 atoms)", LONG_STORE, "run?id=long", (d) => ["export", d, "--run", "long", "--from", "99951"]);
await bench("ledger, 100,000-atom run (last 100 atoms)", LONG_STORE, "ledger?id=long", (d) => ["export", d, "--run", "long", "--from", "99901"]);
await bench("frame, slider from seq 100,000 back one step a round", LONG_STORE, (i) => `frame?id=long&seq=${100000 - i}`, (d) => ["inspect", d, "long"]);
await browser.close();
