// Medians of bench/side.sh's JSON lines (stdin), per saver, as Markdown
// tables: each cell is the median of the rounds, with the rounds' values
// in brackets.
//   node bench/summary.mjs < side.jsonl
import { readFileSync } from "node:fs";

const rows = readFileSync(0, "utf8").split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
const med = (xs) => {
  const s = xs.filter((x) => typeof x === "number" && !Number.isNaN(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const f = (x, d = 1) => (Number.isNaN(x) ? "-" : x.toFixed(d));
const cell = (xs, d = 1) => (xs.length === 0 ? "-" : `${f(med(xs), d)} (${xs.map((x) => (x === null ? "-" : f(x, d))).join(", ")})`);
const by = (pred) => {
  const m = new Map();
  for (const r of rows.filter(pred)) {
    if (!m.has(r.saver)) m.set(r.saver, []);
    m.get(r.saver).push(r);
  }
  return m;
};
const mark = (r, t) => r.marks.find((m) => m.turns === t);
const MB = (b) => b / 1e6;

for (const size of [1024, 4096]) {
  const single = by((r) => r.mode === "single" && r.size === size);
  if (single.size === 0) continue;
  const turns = [...new Set([...single.values()].flat().flatMap((r) => r.marks.map((m) => m.turns)))].sort((a, b) => a - b);
  console.log(`\n### ${size / 1024} KB messages: bytes (MB) and put latency (ms), medians (rounds)\n`);
  console.log(`| saver | rounds | ${turns.map((t) => `MB at ${t}`).join(" | ")} | put p50 turns 1-${turns.at(-1)} | ${turns.map((t) => `put p50 turns ${t - 99}-${t}`).join(" | ")} | seconds |`);
  console.log(`|---|---|${turns.map(() => "---|").join("")}---|${turns.map(() => "---|").join("")}---|`);
  for (const [saver, rs] of single) {
    const last = turns.at(-1);
    console.log(
      `| ${saver} | ${rs.length} | ${turns.map((t) => cell(rs.filter((r) => mark(r, t)).map((r) => MB(mark(r, t).bytes)), 2)).join(" | ")} | ` +
        `${cell(rs.filter((r) => mark(r, last)).map((r) => mark(r, last).putP50ms))} | ` +
        `${turns.map((t) => cell(rs.filter((r) => mark(r, t)).map((r) => mark(r, t).putP50LastMs))).join(" | ")} | ` +
        `${cell(rs.filter((r) => mark(r, last)).map((r) => mark(r, last).seconds), 0)} |`,
    );
  }
}

const resume = by((r) => r.mode === "resume");
if (resume.size > 0) {
  console.log(`\n### Resume in a new process (ms), medians (rounds)\n`);
  console.log("| saver | rounds | open | latest | open + latest | full history | checkpoints listed |");
  console.log("|---|---|---|---|---|---|---|");
  for (const [saver, rs] of resume) {
    const hist = rs.map((r) => r.historyMs);
    const stopped = rs.filter((r) => r.historyMs === null && r.historyStoppedAfterMs !== undefined);
    const unread = rs.filter((r) => r.historyMs === null && r.historyStoppedAfterMs === undefined).length;
    const h = unread === rs.length ? "not read" : stopped.length
      ? `stopped after ${stopped.map((r) => f(r.historyStoppedAfterMs / 1000, 0) + " s").join(", ")} (${stopped.map((r) => r.checkpoints).join(", ")} listed)` + (stopped.length < rs.length ? `; ${cell(hist.filter((x) => x !== null), 0)}` : "")
      : cell(hist.filter((x) => x !== null), 0);
    console.log(`| ${saver} | ${rs.length} | ${cell(rs.map((r) => r.openMs))} | ${cell(rs.map((r) => r.latestMs), 0)} | ${cell(rs.map((r) => r.openMs + r.latestMs), 0)} | ${h} | ${[...new Set(rs.map((r) => r.checkpoints))].join(", ")} |`);
  }
}

const threads = by((r) => r.mode === "threads");
if (threads.size > 0) {
  console.log(`\n### Threads at once, turns/s, medians (rounds)\n`);
  console.log("| saver | rounds | threads x turns | turns/s | seconds |");
  console.log("|---|---|---|---|---|");
  for (const [saver, rs] of threads) console.log(`| ${saver} | ${rs.length} | ${rs[0].threads} x ${rs[0].turns} | ${cell(rs.map((r) => r.turnsPerSec))} | ${cell(rs.map((r) => r.seconds))} |`);
}
