#!/usr/bin/env bash
# Wires `worker serve`'s /healthz to the unit (issue #46 item 6): run every minute by
# verifier-worker-health.timer as root (deploy/install.sh installs both and this script as
# /usr/local/lib/verifier/health-check.sh). systemd restarts a worker that exits; this restarts
# one that runs but is stuck: /healthz not answering within 10 s, or answering 503
# "unhealthy" (no successful poll within 3.3 poll intervals, or a stale ledger heartbeat),
# FAILURES_BEFORE_RESTART checks in a row. "degraded" (the host fails every run) is logged and
# left alone: a restart cannot fix the host, and the alert VerifierWorkerDegraded says what
# to do. A stopped unit is left to systemd.
#
#   health-check.sh [--unit NAME] [--state-dir DIR] [--once]
#
# Reads VERIFIER_METRICS_LISTEN from the environment (the timer's service has the unit's
# EnvironmentFile=). --once checks and prints the verdict without restarting anything.
# Exit status: 0 healthy, degraded, or nothing to check; 1 unhealthy (restarted when the
# count was reached); 2 bad usage.
set -euo pipefail

unit=verifier-worker.service
state_dir=/run/verifier-health
once=""
FAILURES_BEFORE_RESTART="${FAILURES_BEFORE_RESTART:-3}"
while (($#)); do
  case "$1" in
    --unit) unit="${2:?}"; shift 2 ;;
    --state-dir) state_dir="${2:?}"; shift 2 ;;
    --once) once=1; shift ;;
    *) echo "health-check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
addr="${VERIFIER_METRICS_LISTEN:-}"
if [[ -z "$addr" ]]; then
  echo "health-check.sh: VERIFIER_METRICS_LISTEN is empty: /healthz is not served, nothing to check" >&2
  exit 0
fi
# A wildcard listen address answers on loopback too.
addr="${addr/#0.0.0.0:/127.0.0.1:}"
addr="${addr/#\[::\]:/[::1]:}"

if [[ -z "$once" ]] && ! systemctl is-active --quiet "$unit"; then
  echo "$unit is not active: nothing to check (systemd restarts it)"
  rm -f "$state_dir/failures"
  exit 0
fi

body="$(curl -sS --max-time 10 -o - -w '\n%{http_code}' "http://$addr/healthz" 2>&1)" || true
code="${body##*$'\n'}"
body="${body%$'\n'*}"
verdict=unhealthy
case "$code" in
  200) verdict=ok ;;
  503) grep -q '"status":"degraded"' <<<"$body" && verdict=degraded ;;
esac

if [[ "$verdict" != unhealthy ]]; then
  echo "$verdict: $body"
  rm -f "$state_dir/failures"
  exit 0
fi
echo "unhealthy (HTTP ${code:-none}): $body"
[[ -z "$once" ]] || exit 1
mkdir -p "$state_dir"
failures=$(($(cat "$state_dir/failures" 2>/dev/null || echo 0) + 1))
if ((failures >= FAILURES_BEFORE_RESTART)); then
  rm -f "$state_dir/failures"
  echo "restarting $unit: unhealthy in $failures checks in a row"
  systemctl restart "$unit"
else
  echo "$failures" >"$state_dir/failures"
  echo "$failures of $FAILURES_BEFORE_RESTART unhealthy checks in a row before a restart"
fi
exit 1
