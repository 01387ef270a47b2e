#!/usr/bin/env bash
# The nightly job's merge step, the same on CI and on this machine:
#
#   scripts/nightly-merge.sh IN OUT [EXPECTED_RUNS]
#
# IN holds the shards' staged outputs (scripts/nightly-shard.sh), one folder
# per shard or all merged into one: every runs/RUN_ID/ under IN is gathered
# into OUT/runs/, then `chaos report --index` writes OUT/runs/index.html and
# one JUnit file, OUT/junit.xml, over every run of every shard. With
# EXPECTED_RUNS the merge fails (exit 2) when fewer runs arrived, so a shard
# that died without output does not pass as a quiet night.
#
# Exit status: 0 merged, 2 bad input or missing runs.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: $0 IN OUT [EXPECTED_RUNS]" >&2
  exit 2
fi
in=$1 out=$2 expected=${3:-}
chaos=${CHAOS:-bin/chaos}
[ -x "$chaos" ] || go build -o "$chaos" ./cmd/chaos || exit 2

mkdir -p "$out/runs"
found=0
while IFS= read -r -d '' runs; do
  for dir in "$runs"/*/; do
    [ -d "$dir" ] || continue
    id=$(basename "$dir")
    if [ -e "$out/runs/$id" ]; then
      echo "nightly-merge: run $id appears in two shards" >&2
      exit 2
    fi
    cp -r "$dir" "$out/runs/$id"
    found=$((found + 1))
  done
done < <(find "$in" -type d -name runs -not -path "$out/*" -print0)

"$chaos" report --index "$out/runs" --junit "$out/junit.xml" || exit 2
echo "nightly-merge: $found runs merged into $out/runs/index.html and $out/junit.xml"
if [ -n "$expected" ] && [ "$found" -lt "$expected" ]; then
  echo "nightly-merge: expected $expected runs, found $found (a shard left no output)" >&2
  exit 2
fi
