#!/usr/bin/env bash
# Writes bench/RESULTS.md: the summary below, then every bench/results/*.md
# in a fixed order, headings moved one level down. Run it after adding or
# changing a results file: bash bench/results/assemble.sh
set -euo pipefail
cd "$(dirname "$0")"
out=../RESULTS.md
{
  cat summary.md
  for f in engine peers crash wal frame chain ledger snapshot continuumctl; do
    [ -f "$f.md" ] || continue
    printf '\n---\n\n<!-- from bench/results/%s.md -->\n\n' "$f"
    sed -E 's/^(#+) /#\1 /' "$f.md"
  done
} > "$out"
echo "wrote bench/RESULTS.md"
