#!/usr/bin/env bash
# The project's main job, the most complete end-to-end run it has so far: on a
# fresh machine it installs what is missing, builds the base image without a
# registry, starts a real 3-server ZooKeeper ensemble and three broker
# containers (the node program), lets the nemesis pause, isolate and bounce
# the controller and brokers and isolate the ZooKeeper leader on a seeded
# schedule, heals, and checks the recorded history (controller and broker
# fencing, leader uniqueness, availability, liveness). The run directory under
# runs/ keeps the history, the schedule, logs and results.json.
#
# Client traffic joins when the node program's data plane lands (issue 4);
# until then the run is control-plane only (--no-workload).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TESTCONTAINERS_RYUK_DISABLED=true
go run ./cmd/chaos run --no-workload \
  --faults pause-controller,bounce-node,bounce-controller,isolate-controller,isolate-zk-leader \
  --time-limit "${TIME_LIMIT:-30s}" --seed "${SEED:-1}" "$@"
