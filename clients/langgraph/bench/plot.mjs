// Two SVG plots from bench/chat.mjs's PER_TURN files (one file a run, one
// saver a run), no dependencies:
//   OUT/bytes.svg    the saver's bytes after each turn against turns (the
//                    savers that keep bytes on disk: MemorySaver's are not)
//   OUT/put-p50.svg  put latency against turns: the p50 of each WINDOW-turn
//                    window's puts (four puts a turn), drawn at the
//                    window's last turn
// One line a saver; a log scale for an axis whose values span more than
// 30x (it says so on the axis).
//   node bench/plot.mjs OUT FILE...        (WINDOW=10 by default)
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import * as path from "node:path";

const [out, ...files] = process.argv.slice(2);
if (!out || files.length === 0) {
  console.error("usage: node bench/plot.mjs OUT FILE...");
  process.exit(2);
}
const WINDOW = Number(process.env.WINDOW ?? 10);
if (!(WINDOW >= 1)) throw new Error(`plot.mjs: WINDOW=${process.env.WINDOW}: not a number of turns >= 1`);

const runs = files.map((f) => {
  let r;
  try {
    r = JSON.parse(readFileSync(f, "utf8"));
  } catch (e) {
    throw new Error(`plot.mjs: ${f}: not a PER_TURN file of bench/chat.mjs: ${e.message}`);
  }
  if (!Array.isArray(r.perTurn) || typeof r.saver !== "string") throw new Error(`plot.mjs: ${f}: no saver or perTurn (run chat.mjs single with PER_TURN=FILE)`);
  return r;
});

const NAMES = { continuum: "ContinuumSaver", "continuum-base": "ContinuumSaver (base)", sqlite: "SqliteSaver", "sqlite-full": "SqliteSaver (synchronous=FULL)", postgres: "PostgresSaver", memory: "MemorySaver" };
const COLORS = { continuum: "#1b7837", "continuum-base": "#7fbf7b", sqlite: "#2166ac", "sqlite-full": "#67a9cf", postgres: "#b2182b", memory: "#7a7a7a" };
const label = (r) => `${NAMES[r.saver] ?? r.saver}, ${r.perTurn.length} turns`;

const p50 = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

function series(r, kind) {
  if (kind === "bytes") return r.perTurn.map((t) => [t.turn, t.bytes]);
  const pts = [];
  for (let i = 0; i + WINDOW <= r.perTurn.length; i += WINDOW) {
    const w = r.perTurn.slice(i, i + WINDOW);
    pts.push([w.at(-1).turn, p50(w.flatMap((t) => t.putsMs))]);
  }
  return pts;
}

const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** Ticks of a linear axis from 0 to max: about five round steps. */
function linTicks(max) {
  const raw = max / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const ticks = [];
  for (let v = 0; v <= max + step / 2; v += step) ticks.push(v);
  return ticks;
}

function plot({ title, yLabel, fmtY, lines, note }) {
  const W = 760, H = 440, L = 78, R = 220, T = 46, B = 58;
  const pw = W - L - R, ph = H - T - B;
  const all = lines.flatMap((l) => l.pts);
  const maxX = Math.max(...all.map((p) => p[0]));
  const ys = all.map((p) => p[1]).filter((y) => y > 0);
  const log = Math.max(...ys) / Math.min(...ys) > 30;
  let yTicks, ty;
  if (log) {
    const lo = Math.floor(Math.log10(Math.min(...ys))), hi = Math.ceil(Math.log10(Math.max(...ys)));
    yTicks = [];
    for (let e = lo; e <= hi; e++) yTicks.push(10 ** e);
    ty = (y) => T + ph - ((Math.log10(Math.max(y, 10 ** lo)) - lo) / (hi - lo || 1)) * ph;
  } else {
    yTicks = linTicks(Math.max(...ys));
    const top = yTicks.at(-1);
    ty = (y) => T + ph - (y / top) * ph;
  }
  const xTicks = linTicks(maxX);
  const tx = (x) => L + (x / xTicks.at(-1)) * pw;
  const o = [];
  o.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  o.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  o.push(`<text x="${W / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">${esc(title)}</text>`);
  if (note) o.push(`<text x="${W / 2}" y="36" text-anchor="middle" fill="#555">${esc(note)}</text>`);
  for (const v of yTicks) {
    const y = ty(v).toFixed(1);
    o.push(`<line x1="${L}" y1="${y}" x2="${L + pw}" y2="${y}" stroke="#e4e4e4"/>`);
    o.push(`<text x="${L - 6}" y="${y}" dy="4" text-anchor="end">${esc(fmtY(v))}</text>`);
  }
  for (const v of xTicks) {
    const x = tx(v).toFixed(1);
    o.push(`<line x1="${x}" y1="${T}" x2="${x}" y2="${T + ph}" stroke="#f0f0f0"/>`);
    o.push(`<text x="${x}" y="${T + ph + 16}" text-anchor="middle">${v}</text>`);
  }
  o.push(`<rect x="${L}" y="${T}" width="${pw}" height="${ph}" fill="none" stroke="#333"/>`);
  o.push(`<text x="${L + pw / 2}" y="${H - 18}" text-anchor="middle">turns</text>`);
  o.push(`<text transform="translate(18 ${T + ph / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel + (log ? " (log scale)" : ""))}</text>`);
  lines.forEach((l, i) => {
    const d = l.pts.map((p, j) => `${j ? "L" : "M"}${tx(p[0]).toFixed(1)} ${ty(p[1]).toFixed(1)}`).join(" ");
    o.push(`<path d="${d}" fill="none" stroke="${l.color}" stroke-width="2"/>`);
    const ly = T + 10 + i * 20;
    o.push(`<line x1="${L + pw + 12}" y1="${ly}" x2="${L + pw + 34}" y2="${ly}" stroke="${l.color}" stroke-width="3"/>`);
    o.push(`<text x="${L + pw + 40}" y="${ly + 4}">${esc(l.name)}</text>`);
  });
  o.push("</svg>");
  return o.join("\n") + "\n";
}

const fmtBytes = (b) => (b >= 1e9 ? `${+(b / 1e9).toPrecision(3)} GB` : b >= 1e6 ? `${+(b / 1e6).toPrecision(3)} MB` : b >= 1e3 ? `${+(b / 1e3).toPrecision(3)} KB` : `${b} B`);
const fmtMs = (v) => `${+v.toPrecision(3)} ms`;
const size = [...new Set(runs.map((r) => r.size))].map((s) => `${s / 1024} KB`).join(", ");
const when = runs.map((r) => r.at).filter(Boolean).sort();
const note = `${size} messages, 4 checkpoints a turn; ${when.length ? `${when[0].slice(0, 16).replace("T", " ")}-${when.at(-1).slice(11, 16)} UTC` : ""}`;

mkdirSync(out, { recursive: true });
const disk = runs.filter((r) => r.saver !== "memory");
if (disk.length) {
  writeFileSync(path.join(out, "bytes.svg"), plot({
    title: "Bytes on disk against turns, one thread",
    yLabel: "bytes after the turn",
    fmtY: fmtBytes,
    note,
    lines: disk.map((r) => ({ name: label(r), color: COLORS[r.saver] ?? "#000", pts: series(r, "bytes") })),
  }));
}
writeFileSync(path.join(out, "put-p50.svg"), plot({
  title: `Put latency against turns: p50 of each ${WINDOW} turns' puts`,
  yLabel: "put p50 (ms)",
  fmtY: fmtMs,
  note,
  lines: runs.map((r) => ({ name: label(r), color: COLORS[r.saver] ?? "#000", pts: series(r, "put") })),
}));
for (const r of runs) {
  const b = series(r, "bytes"), p = series(r, "put");
  console.log(`${r.saver}: ${r.perTurn.length} turns, bytes at the end ${fmtBytes(b.at(-1)[1])}, put p50 first window ${p.length ? fmtMs(p[0][1]) : "-"}, last ${p.length ? fmtMs(p.at(-1)[1]) : "-"}`);
}
