#!/usr/bin/env bash
# One shard of the nightly job, the same on a CI runner and on this machine:
#
#   scripts/nightly-shard.sh I N SEED SEEDS OUT [chaos run flags...]
#
# runs shard I of N of the seed list SEED..SEED+SEEDS-1 (`chaos run --shard`)
# and stages OUT for upload as one artifact:
#   OUT/junit-shard-I.xml   JUnit of this shard's runs
#   OUT/runs/RUN_ID/        every run: run.json, results.json, schedule.json,
#                           report.html; a run that is not valid (or never
#                           got checked) is copied whole: history, logs, data
# so the merge job can index every run while only failing runs cost space.
#
# Exit status is `chaos run`'s: 0 all valid, 1 some invalid, 2 error,
# 3 some unknown. OUT is staged whatever the status.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 5 ]; then
  echo "usage: $0 I N SEED SEEDS OUT [chaos run flags...]" >&2
  exit 2
fi
i=$1 n=$2 seed=$3 seeds=$4 out=$5
shift 5
command -v jq >/dev/null || { echo "nightly-shard: jq is required to sort failing runs" >&2; exit 2; }
chaos=${CHAOS:-bin/chaos}
[ -x "$chaos" ] || go build -o "$chaos" ./cmd/chaos || exit 2

work=$(mktemp -d)
mkdir -p "$out/runs"
"$chaos" run --seed "$seed" --seeds "$seeds" --shard "$i/$n" \
  --runs "$work" --junit "$out/junit-shard-$i.xml" "$@"
status=$?

for dir in "$work"/*/; do
  [ -d "$dir" ] || continue
  id=$(basename "$dir")
  verdict=$(jq -r '.verdict // "not checked"' "$dir/results.json" 2>/dev/null || echo "not checked")
  if [ "$verdict" = valid ]; then
    mkdir -p "$out/runs/$id"
    for f in run.json results.json schedule.json report.html; do
      [ -f "$dir/$f" ] && cp "$dir/$f" "$out/runs/$id/"
    done
  else
    cp -r "$dir" "$out/runs/$id"
  fi
  echo "nightly-shard $i/$n: run $id $verdict"
done
rm -rf "$work"
exit "$status"
