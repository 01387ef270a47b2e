#!/usr/bin/env bash
# The nightly workflow (.github/workflows/nightly.yml) on this one machine:
# the same shard command for each shard in turn, then the same merge.
#
#   scripts/nightly-local.sh [SHARDS] [SEEDS_PER_SHARD] [chaos run flags...]
#
# defaults: 2 shards of 2 seeds, --time-limit 10s. SEED (env) is the first
# seed, default 1; OUT (env) the output folder, default runs/nightly-local.
# It ends with OUT/merged/runs/index.html and OUT/merged/junit.xml and fails
# unless the index lists every run of every shard.
#
# Containers need the Docker Engine (DOCKER_HOST for a remote one) and root
# for nsenter/iptables. On a shared machine take the Docker lock:
#   flock /tmp/zkchaos-docker.lock scripts/nightly-local.sh
set -uo pipefail
cd "$(dirname "$0")/.."
shards=${1:-2} per=${2:-2}
shift $(($# < 2 ? $# : 2))
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--time-limit 10s)
seed=${SEED:-1}
out=${OUT:-runs/nightly-local}
seeds=$((shards * per))
bash scripts/setup.sh || exit 2
export TESTCONTAINERS_RYUK_DISABLED=true
export CHAOS=${CHAOS:-bin/chaos}
go build -o "$CHAOS" ./cmd/chaos || exit 2
rm -rf "$out"
mkdir -p "$out"

worst=0
for i in $(seq 1 "$shards"); do
  echo "== shard $i/$shards"
  bash scripts/nightly-shard.sh "$i" "$shards" "$seed" "$seeds" "$out/shards/nightly-shard-$i" "${flags[@]}"
  st=$?
  echo "== shard $i/$shards exit $st"
  [ "$st" -gt "$worst" ] && worst=$st
done

echo "== merge"
bash scripts/nightly-merge.sh "$out/shards" "$out/merged" "$seeds" || exit 2
listed=$(grep -c 'report.html">' "$out/merged/runs/index.html")
echo "nightly-local: $listed of $seeds runs listed in $out/merged/runs/index.html (worst shard exit $worst)"
[ "$listed" -eq "$seeds" ] || exit 2
exit "$worst"
