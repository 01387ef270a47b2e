#!/usr/bin/env bash
# Installs what a fresh machine lacks to run the harness: debootstrap (the base
# image is built locally, there is no registry), iptables/iproute2/nsenter
# on the host (network faults enter the containers' namespaces from outside),
# and the independent Kafka clients of the compatibility suite (compat/):
# kcat (librdkafka) and kafka-python, both from Debian, and jq for the
# nightly scripts.
# Idempotent: installs only what is missing.
set -euo pipefail

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v iptables >/dev/null || need+=(iptables)
command -v tc >/dev/null || need+=(iproute2)
command -v nsenter >/dev/null || need+=(util-linux)
# The report's browser test (cmd/chaos TestReportInBrowser) drives headless
# Chromium; any Chrome already installed (CI runners have one) will do.
command -v chromium >/dev/null || command -v chromium-browser >/dev/null ||
  command -v google-chrome >/dev/null || need+=(chromium)
command -v kcat >/dev/null || need+=(kcat)
# scripts/nightly-shard.sh sorts a night's runs by their results.json.
command -v jq >/dev/null || need+=(jq)
/usr/bin/python3 -c 'import kafka' >/dev/null 2>&1 || need+=(python3-kafka)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
command -v go >/dev/null || { echo "setup: Go is required (go1.26+)" >&2; exit 2; }
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || {
  echo "setup: the Docker Engine is not reachable (DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock})" >&2
  exit 2
}
