#!/usr/bin/env bash
# The project's main job, the most complete end-to-end run it has so far: on a
# fresh machine it installs what is missing, builds the base image without a
# registry, and reproduces KAFKA-532 on a real 3-server ZooKeeper ensemble and
# three broker containers (the node program) while acks=all producers and
# readers run through a real Kafka client: the controller is frozen with
# SIGSTOP at its failpoint until another broker takes over, then resumes as a
# zombie and the brokers obey its stale controller epoch. It prints the
# checker's explanation and the path of the HTML report, then runs the same
# scenario with every fix on, which must pass.
#
# Exit status 0 when the bug is reproduced with its switch on and not with the
# fix; anything else fails. Run directories go to runs/.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 2
export TESTCONTAINERS_RYUK_DISABLED=true
go build -o bin/chaos ./cmd/chaos || exit 2

bin/chaos repro KAFKA-532 "$@"
bug=$?
bin/chaos repro KAFKA-532 --fixed "$@"
fixed=$?
if [ "$bug" -eq 1 ] && [ "$fixed" -eq 0 ]; then
  echo "main job: KAFKA-532 reproduced with the bug switch on, and passes with the fix"
  exit 0
fi
echo "main job: expected exit 1 (reproduced) then 0 (fixed), got $bug then $fixed" >&2
exit 1
