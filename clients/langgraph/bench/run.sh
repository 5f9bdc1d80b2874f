#!/usr/bin/env bash
# Issue 39's chat workload, CONTINUUM's saver beside SqliteSaver and
# MemorySaver, one process per measurement, the savers alternating in each
# round: 300 turns (bytes and put p50 read at 100 and 300) with 1 KB and
# 4 KB messages, a new process's resume (open + latest, full history) at
# 300 turns, and 16 threads at once. ROUNDS (default 1) rounds; JSON lines
# to stdout. Needs `npm ci` here and in bench/ (better-sqlite3 builds with
# node-gyp), the package built (npx tsc -p .), and CONTINUUMD_BIN or go.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CONTINUUMD_BIN:-}" ]; then
  bin=$(mktemp -d)
  (cd ../.. && go build -o "$bin/continuumd" ./cmd/continuumd)
  export CONTINUUMD_BIN="$bin/continuumd"
fi
ROUNDS=${ROUNDS:-1}
TURNS=${TURNS:-300}
THREAD_TURNS=${THREAD_TURNS:-25}
work=$(mktemp -d /tmp/lgbench-XXXXXX)
trap 'rm -rf "$work"' EXIT
for round in $(seq 1 "$ROUNDS"); do
  for size in 1024 4096; do
    for saver in continuum sqlite memory; do
      d="$work/$saver-$size-$round"; mkdir -p "$d"
      node bench/chat.mjs single "$saver" "$TURNS" "$size" "$d"
      if [ "$saver" != memory ]; then node bench/chat.mjs resume "$saver" "$d"; fi
      rm -rf "$d"
    done
  done
  for saver in continuum sqlite memory; do
    d="$work/$saver-threads-$round"; mkdir -p "$d"
    node bench/chat.mjs threads "$saver" "$THREAD_TURNS" 1024 "$d" 16
    rm -rf "$d"
  done
done
