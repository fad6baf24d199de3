#!/usr/bin/env bash
# Alerts when nothing happens: a red run when the verifier has gone quiet, which no failed
# run would show (schedules paused or dropped, a signer that always skips, a keeper out of gas).
#
# Red (::error each, then exit 1) when:
# - no run of the runner workflow on main succeeded within MAX_CYCLE_AGE_MINUTES (default
#   120; the runner runs every 15 min), or none of the keeper workflow (the end of a cycle);
# - KEEPER_ADDRESS is set and its balance on RPC_URL is below MIN_SETTLEMENTS (default 10)
#   settlements at the caps (MAX_GAS x MAX_FEE_PER_GAS, the keeper's own pre-send check).
# A failed API or RPC call is red too (fail closed: a check that cannot look is not green).
#
# Env: GITHUB_REPOSITORY, GH_TOKEN, MAX_CYCLE_AGE_MINUTES, KEEPER_ADDRESS, RPC_URL,
# MIN_SETTLEMENTS, MAX_GAS (default 1500000), MAX_FEE_PER_GAS (wei, default 2000000000),
# NOW (Unix time, for tests; default the clock).
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

now="${NOW:-$(date +%s)}"
max_age=$((${MAX_CYCLE_AGE_MINUTES:-120} * 60))
alerts=0
alert() {
  echo "::error::$*"
  summary "- **alert**: $*"
  alerts=$((alerts + 1))
}
summary "### Freshness"
summary ""
for workflow in regression-verifier-runner.yml regression-verifier-keeper.yml; do
  if ! runs="$(api_get "/repos/${GITHUB_REPOSITORY}/actions/workflows/${workflow}/runs?branch=main&status=success&per_page=1")"; then
    alert "could not list the successful runs of ${workflow}"
    continue
  fi
  last="$(jq -r '[.workflow_runs[] | select(.conclusion == "success") | .updated_at | fromdateiso8601] | max // empty' <<<"${runs}")"
  if [[ -z "${last}" ]]; then
    alert "${workflow} has no successful run on main"
  elif ((now - last > max_age)); then
    alert "${workflow} last succeeded $(((now - last) / 60)) min ago (more than ${MAX_CYCLE_AGE_MINUTES:-120}); schedules paused, runs failing or skipped"
  else
    summary "- ${workflow}: last success $(((now - last) / 60)) min ago"
  fi
done

if [[ -n "${KEEPER_ADDRESS:-}" ]]; then
  if [[ ! "${KEEPER_ADDRESS}" =~ ^0x[0-9a-fA-F]{40}$ ]]; then
    alert "KEEPER_ADDRESS is not an address"
  else
    reply="$(curl --silent --show-error --fail --max-time 30 -H 'Content-Type: application/json' \
      --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBalance\",\"params\":[\"${KEEPER_ADDRESS}\",\"latest\"]}" \
      "${RPC_URL:-https://mainnet.base.org}" 2>/dev/null)" || reply=""
    balance="$(jq -r '.result // empty' <<<"${reply}" 2>/dev/null || true)"
    if [[ ! "${balance}" =~ ^0x[0-9a-fA-F]+$ ]]; then
      alert "could not read the keeper's balance from the RPC"
    else
      n="${MIN_SETTLEMENTS:-10}"
      verdict="$(python3 -c 'import sys; b, n, g, f = int(sys.argv[1], 16), *map(int, sys.argv[2:]); need = n * g * f; print("ok" if b >= need else "low", b // (g * f), need)' \
        "${balance}" "${n}" "${MAX_GAS:-1500000}" "${MAX_FEE_PER_GAS:-2000000000}")"
      read -r state covers need <<<"${verdict}"
      if [[ "${state}" != ok ]]; then
        alert "the keeper ${KEEPER_ADDRESS} can pay ${covers} settlement(s) at the caps, fewer than ${n} (needs ${need} wei); fund it"
      else
        summary "- keeper: balance covers ${covers} settlement(s) at the caps"
      fi
    fi
  fi
fi
((alerts == 0)) || exit 1
echo "fresh"
