#!/usr/bin/env bash
# Any Kafka client on a `chaos up` cluster, through a controller failover:
# a kcat idempotent producer (partition 1) and kafka-python (partition 0)
# each produce 10,000 acks=all
# records while `chaos fault pause-controller` holds the controller past its
# ZooKeeper session (a controller failover), then every acknowledged record
# is read back with kcat and counted. Prints one line per client and the
# verdict of `chaos check` on the run directory. Needs Docker, kcat and
# python3-kafka (scripts/setup.sh); run it under the shared Docker lock:
#   flock /tmp/zkchaos-docker.lock bash scripts/bench-up.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill $up_pid 2>/dev/null || true; wait $up_pid 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/chaos" ./cmd/chaos
dir="$work/run"
"$work/chaos" up --brokers 3 --zk 3 --partitions 2 --dir "$dir" >"$work/up.out" 2>"$work/up.err" &
up_pid=$!
for _ in $(seq 1 900); do
  grep -q '^bootstrap ' "$work/up.out" && break
  kill -0 $up_pid 2>/dev/null || { cat "$work/up.err"; exit 2; }
  sleep 1
done
boot=$(sed -n 's/^bootstrap //p' "$work/up.out")
echo "bootstrap $boot"
n=10000

failover() { # pause the controller 1 s in, for 5 s (session timeout 3 s), then heal
  sleep 1
  "$work/chaos" fault --dir "$dir" pause-controller
  sleep 5
  "$work/chaos" fault --dir "$dir" heal
}

readback() { # partition prefix -> "records distinct-present duplicates"
  kcat -b "$boot" -C -t chaos -p "$1" -o beginning -e -q |
    awk -v p="$2-" -v n=$n 'index($0,p)==1 {c[$0]++; r++} END {d=0; for (k in c) if (c[k]>1) d++; print r+0, length(c), d}'
}

# kcat, idempotent: 200 records every 100 ms (2,000/s).
failover & f=$!
start=$(date +%s.%N)
for i in $(seq 0 200 $((n-1))); do seq $i $((i+199)) | sed 's/^/kcat-/'; sleep 0.1; done |
  kcat -b "$boot" -P -t chaos -p 1 -X enable.idempotence=true -X linger.ms=5
end=$(date +%s.%N)
wait $f
rs=$(date +%s.%N); read -r recs distinct dups < <(readback 1 kcat); re=$(date +%s.%N)
printf 'kcat idempotent: %d/%d acknowledged in %.1f s (%.0f records/s); read back %d records, %d distinct of %d acknowledged, %d values duplicated, in %.2f s\n' \
  $n $n "$(echo "$end-$start" | bc)" "$(echo "$n/($end-$start)" | bc -l)" "$recs" "$distinct" $n "$dups" "$(echo "$re-$rs" | bc)"

# kafka-python (no idempotence in 2.0.2), acks=all.
failover & f=$!
start=$(date +%s.%N)
/usr/bin/python3 compat/testdata/client.py produce bootstrap="$boot" topic=chaos acks=all count=$n prefix=py linger=5 gap=0.0005 >"$work/py.json"
end=$(date +%s.%N)
wait $f
acked=$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["acked"]))' "$work/py.json")
failed=$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["failed"]))' "$work/py.json")
rs=$(date +%s.%N); read -r recs distinct dups < <(readback 0 py); re=$(date +%s.%N)
printf 'kafka-python acks=all: %d/%d acknowledged (%d failed) in %.1f s (%.0f records/s); read back %d records, %d distinct, %d values duplicated, in %.2f s\n' \
  "$acked" $n "$failed" "$(echo "$end-$start" | bc)" "$(echo "$acked/($end-$start)" | bc -l)" "$recs" "$distinct" "$dups" "$(echo "$re-$rs" | bc)"

kill -INT $up_pid; wait $up_pid || true
grep -h '"fault_start"' "$dir"/history/nemesis.jsonl | head -4
set +e
"$work/chaos" check "$dir" >"$work/check.out"
code=$?
tail -15 "$work/check.out"
echo "chaos check exit status $code"
