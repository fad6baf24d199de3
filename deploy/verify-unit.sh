#!/usr/bin/env bash
# Checks deploy/worker.service with `systemd-analyze verify` (Debian's systemd package),
# against a stand-in for the worker binary and the `verifier` user, in a scratch root so the
# host's own units are not involved. Used by .ci/run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "installing systemd (Debian package) for systemd-analyze" >&2
  apt-get install -y -qq systemd >/dev/null || { apt-get update -qq && apt-get install -y -qq systemd >/dev/null; }
fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# verify resolves ExecStart= on the host; a unit naming a missing binary fails.
bin=/usr/local/bin/worker
placed=""
if [[ ! -e "$bin" ]]; then
  printf '#!/bin/sh\nexit 0\n' >"$bin"
  chmod 0755 "$bin"
  placed=1
fi
cp worker.service "$scratch/verifier-worker.service"
status=0
output="$(SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no "$scratch/verifier-worker.service" 2>&1)" || status=$?
[[ -n "$placed" ]] && rm -f "$bin"
# Lines about units other than ours (the host's own, absent in a container) are not ours to fix.
ours="$(grep -F 'verifier-worker.service' <<<"$output" || true)"
if [[ $status -ne 0 || -n "$ours" ]]; then
  printf '%s\n' "$output" >&2
  echo "deploy/worker.service: systemd-analyze verify failed" >&2
  exit 1
fi
echo "deploy/worker.service: systemd-analyze verify ok"
