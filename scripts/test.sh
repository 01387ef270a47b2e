#!/usr/bin/env bash
# The project's test command: set-up, then every test, container tests
# included. Packages run one at a time: each container test runs a JVM
# ensemble, and two of them side by side on a 2-core machine starve
# ZooKeeper's sub-second ticks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TESTCONTAINERS_RYUK_DISABLED=true
# go.mod and go.sum must say exactly what the code imports: a module used
# directly and marked "// indirect", or a stale sum, fails here.
if ! go mod tidy -diff; then
	echo "go.mod/go.sum are not tidy: run go mod tidy and commit the result" >&2
	exit 1
fi
go vet ./...
go test -count=1 -p 1 -timeout 80m "$@" ./...
