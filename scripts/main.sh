#!/usr/bin/env bash
# The project's main job, the most complete end-to-end run it has so far: on a
# fresh machine it installs what is missing, builds the base image without a
# registry, starts real 3-server ZooKeeper ensembles and drives the fault
# primitives against them (bounce, isolating the ZooKeeper leader), recording
# every fault in RUN_DIR/history/nemesis.jsonl and printing the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TESTCONTAINERS_RYUK_DISABLED=true
go run ./cmd/chaos bench-env --reps "${REPS:-3}" "$@"
