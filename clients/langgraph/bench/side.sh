#!/usr/bin/env bash
# Issue 39's table, the savers side by side in alternating rounds (the
# order rotates each round), one process per measurement, JSON lines to
# stdout (each with its round):
#   part one: 1 KB messages, TURNS turns (bytes and put p50 read at each
#             100), then a new process's resume (open + latest, the full
#             history, stopped after HISTORY_CAP_S seconds); ROUNDS rounds;
#             MemorySaver in the first round only (bytes)
#   part two: 4 KB messages, TURNS4 turns, and THREADS threads at once of
#             THREAD_TURNS turns each; ROUNDS2 rounds
#   resume:   one store per saver of 1 KB messages and TURNS turns, then
#             RESUMES rounds of a new process's resume on each
# PART (one, two, both: one and two; or resume) chooses. SAVERS: the savers of the rounds
# (continuum sqlite postgres; continuum-base with BASE_SAVER for a
# before-and-after). Needs npm ci here and in bench/, the package built,
# CONTINUUMD_BIN (or go), PostgreSQL or apt-get (bench/pg.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CONTINUUMD_BIN:-}" ]; then
  bin=$(mktemp -d)
  (cd ../.. && go build -o "$bin/continuumd" ./cmd/continuumd)
  export CONTINUUMD_BIN="$bin/continuumd"
fi
PART=${PART:-both}
ROUNDS=${ROUNDS:-3}
ROUNDS2=${ROUNDS2:-2}
TURNS=${TURNS:-300}
TURNS4=${TURNS4:-100}
THREADS=${THREADS:-16}
THREAD_TURNS=${THREAD_TURNS:-25}
export HISTORY_CAP_S=${HISTORY_CAP_S:-60}
read -r -a savers <<< "${SAVERS:-continuum sqlite postgres}"
work=$(mktemp -d /tmp/lgside-XXXXXX)
trap 'rm -rf "$work"' EXIT
tag() { sed -e "s/^{/{\"round\":$1,\"at\":\"$(date -u +%H:%M:%S)\",/"; }
rotate() { # the savers, starting at index $1 mod n
  local n=${#savers[@]} i
  for ((i = 0; i < n; i++)); do echo "${savers[$(((i + $1) % n))]}"; done
}
if [ "$PART" = resume ]; then
  for saver in "${savers[@]}"; do
    mkdir -p "$work/$saver"
    node bench/chat.mjs single "$saver" "$TURNS" 1024 "$work/$saver" | tag 0
  done
  for round in $(seq 1 "${RESUMES:-7}"); do
    for saver in $(rotate $((round - 1))); do
      node bench/chat.mjs resume "$saver" "$work/$saver" | tag "$round"
    done
  done
  exit 0
fi
if [ "$PART" != two ]; then
  for round in $(seq 1 "$ROUNDS"); do
    list=$(rotate $((round - 1)))
    if [ "$round" = 1 ]; then list="$list memory"; fi
    for saver in $list; do
      d="$work/$saver-1k-$round"; mkdir -p "$d"
      node bench/chat.mjs single "$saver" "$TURNS" 1024 "$d" | tag "$round"
      if [ "$saver" != memory ]; then node bench/chat.mjs resume "$saver" "$d" | tag "$round"; fi
      rm -rf "$d"
    done
  done
fi
if [ "$PART" != one ]; then
  for round in $(seq 1 "$ROUNDS2"); do
    for saver in $(rotate $((round - 1))) memory; do
      d="$work/$saver-4k-$round"; mkdir -p "$d"
      node bench/chat.mjs single "$saver" "$TURNS4" 4096 "$d" | tag "$round"
      rm -rf "$d"
      d="$work/$saver-threads-$round"; mkdir -p "$d"
      node bench/chat.mjs threads "$saver" "$THREAD_TURNS" 1024 "$d" "$THREADS" | tag "$round"
      rm -rf "$d"
    done
  done
fi
