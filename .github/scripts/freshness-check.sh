#!/usr/bin/env bash
# Alerts when nothing happens: a red run when the verifier has gone quiet, which no failed
# run would show (schedules paused or dropped, a signer that always skips, a keeper out of gas).
#
# Red (::error each, then exit 1) when:
# - no run of the runner workflow on main succeeded within MAX_CYCLE_AGE_MINUTES (default
#   120; the runner runs every 15 min), or none of the keeper workflow (the end of a cycle);
# - the oldest unsigned batch is older than MAX_UNSIGNED_MINUTES (default 60): a successful
#   runner run on main that no `Sign (slot …)` job has succeeded after (the signer's gate
#   skipped every cycle since, its runs failed, or it was never triggered). The sign job runs
#   for every batch the gate lets through, empty or not, so a quiet feed does not alert;
# - KEEPER_ADDRESS is set and its balance on RPC_URL is below MIN_SETTLEMENTS (default 10)
#   settlements at the caps (MAX_GAS x MAX_FEE_PER_GAS, the keeper's own pre-send check).
# A failed API or RPC call is red too (fail closed: a check that cannot look is not green).
#
# Env: GITHUB_REPOSITORY, GH_TOKEN, MAX_CYCLE_AGE_MINUTES, MAX_UNSIGNED_MINUTES, KEEPER_ADDRESS, RPC_URL (a comma-separated list),
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

# The oldest unsigned batch. The last signing = the newest of the recent successful signer
# runs with a successful `Sign (slot …)` job (a green run whose gate skipped signs nothing).
# At most 1 + 10 + 1 requests an hour.
max_unsigned=$((${MAX_UNSIGNED_MINUTES:-60} * 60))
r="/repos/${GITHUB_REPOSITORY}/actions"
if ! signer_runs="$(api_get "${r}/workflows/regression-verifier-signer.yml/runs?branch=main&status=success&per_page=10")" ||
  ! runner_runs="$(api_get "${r}/workflows/regression-verifier-runner.yml/runs?branch=main&status=success&per_page=20")"; then
  alert "could not list the signer's or the runner's runs to find the oldest unsigned batch"
else
  last_signed=""
  while read -r id created; do
    [[ "${id}" =~ ^[0-9]+$ ]] || continue
    if ! jobs="$(api_get "${r}/runs/${id}/jobs?filter=latest&per_page=100")"; then
      alert "could not list the jobs of signer run ${id}"
      break
    fi
    if jq -e '[.jobs[] | select((.name | startswith("Sign (slot")) and .conclusion == "success")] | length > 0' <<<"${jobs}" >/dev/null; then
      last_signed="${created}"
      break
    fi
  done < <(jq -r '.workflow_runs | sort_by(.created_at) | reverse | .[] | "\(.id) \(.created_at | fromdateiso8601)"' <<<"${signer_runs}")
  oldest="$(jq -r --arg after "${last_signed:-0}" '[.workflow_runs[] | select(.conclusion == "success") | .updated_at | fromdateiso8601 | select(. > ($after | tonumber))] | min // empty' <<<"${runner_runs}")"
  if [[ -z "${oldest}" ]]; then
    summary "- signer: every successful runner batch has been signed after it"
  elif ((now - oldest > max_unsigned)); then
    alert "the oldest unsigned runner batch finished $(((now - oldest) / 60)) min ago (more than ${MAX_UNSIGNED_MINUTES:-60}) and no Sign job has succeeded since; see the signer's runs"
  else
    summary "- signer: the oldest unsigned batch finished $(((now - oldest) / 60)) min ago"
  fi
fi

if [[ -n "${KEEPER_ADDRESS:-}" ]]; then
  if [[ ! "${KEEPER_ADDRESS}" =~ ^0x[0-9a-fA-F]{40}$ ]]; then
    alert "KEEPER_ADDRESS is not an address"
  else
    # RPC_URL may be a comma-separated ordered list (as the signer and keeper take it): the
    # first endpoint that answers with a balance is read, so one endpoint down is no alert.
    balance=""
    IFS=, read -ra rpc_urls <<<"${RPC_URL:-https://mainnet.base.org}"
    for url in "${rpc_urls[@]}"; do
      url="${url//[[:space:]]/}"
      [[ -n "${url}" ]] || continue
      reply="$(curl --silent --show-error --fail --max-time 30 -H 'Content-Type: application/json' \
        --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBalance\",\"params\":[\"${KEEPER_ADDRESS}\",\"latest\"]}" \
        "${url}" 2>/dev/null)" || reply=""
      balance="$(jq -r '.result // empty' <<<"${reply}" 2>/dev/null || true)"
      [[ ! "${balance}" =~ ^0x[0-9a-fA-F]+$ ]] || break
    done
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
