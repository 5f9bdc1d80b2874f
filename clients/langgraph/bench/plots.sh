#!/usr/bin/env bash
# Issue 39's plots: one run of bench/chat.mjs single per saver, one after
# the other, each writing its PER_TURN file (each turn's put latencies and
# the saver's bytes after it) into OUT, then bench/plot.mjs draws
# OUT/bytes.svg and OUT/put-p50.svg from them. JSON lines to stdout.
#   SAVERS (continuum sqlite memory; empty: none), TURNS (300), SIZE (1024),
#   PG_TURNS (0: no PostgresSaver; else its turns: 300 take about 20 min),
#   OUT (bench/plots)
# Needs what bench/side.sh needs (npm ci here and in bench/, the package
# built, CONTINUUMD_BIN or go; bench/pg.sh for PostgresSaver).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CONTINUUMD_BIN:-}" ]; then
  bin=$(mktemp -d)
  (cd ../.. && go build -o "$bin/continuumd" ./cmd/continuumd)
  export CONTINUUMD_BIN="$bin/continuumd"
fi
TURNS=${TURNS:-300}
SIZE=${SIZE:-1024}
PG_TURNS=${PG_TURNS:-0}
OUT=${OUT:-bench/plots}
read -r -a savers <<< "${SAVERS-continuum sqlite memory}"
if [ "$PG_TURNS" != 0 ]; then savers+=(postgres); fi
mkdir -p "$OUT"
work=$(mktemp -d /tmp/lgplots-XXXXXX)
trap 'rm -rf "$work"' EXIT
files=()
for saver in "${savers[@]}"; do
  turns=$TURNS
  if [ "$saver" = postgres ]; then turns=$PG_TURNS; fi
  d="$work/$saver"; mkdir -p "$d"
  f="$OUT/$saver-${SIZE}b-${turns}t.json"
  PER_TURN="$f" node bench/chat.mjs single "$saver" "$turns" "$SIZE" "$d"
  rm -rf "$d"
  files+=("$f")
done
node bench/plot.mjs "$OUT" "${files[@]}"
