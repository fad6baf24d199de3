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
# - PLATFORM_API and VERIFIERS (a comma-separated list) are set and a job the feed lists for
#   one of them has a verification window ending within WINDOW_MARGIN_MINUTES (default 60)
#   while its bounty is still Submitted on chain (RPC_URL: status() = 3): no candidate, no
#   attestation or no relay has settled it yet, and once the window closes nobody can;
# - KEEPER_ADDRESS is set and its balance on RPC_URL is below MIN_SETTLEMENTS (default 10)
#   settlements at the caps (MAX_GAS x MAX_FEE_PER_GAS, the keeper's own pre-send check).
# A failed API or RPC call is red too (fail closed: a check that cannot look is not green).
#
# Env: GITHUB_REPOSITORY, GH_TOKEN, MAX_CYCLE_AGE_MINUTES, MAX_UNSIGNED_MINUTES, KEEPER_ADDRESS, RPC_URL (a comma-separated list),
# PLATFORM_API, VERIFIERS, NETWORK (default base-mainnet), WINDOW_MARGIN_MINUTES,
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

# The first endpoint of RPC_URL that answers `eth_call` of `data` on `to` with a result.
rpc_call() { # to data
  local url reply result
  local -a rpc_urls=()
  rpc_endpoints rpc_urls "${RPC_URL:-}"
  for url in "${rpc_urls[@]}"; do
    reply="$(curl --silent --show-error --fail --max-time 30 -H 'Content-Type: application/json' \
      --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_call\",\"params\":[{\"to\":\"$1\",\"data\":\"$2\"},\"latest\"]}" \
      "${url}" 2>/dev/null)" || reply=""
    result="$(jq -r '.result // empty' <<<"${reply}" 2>/dev/null || true)"
    if [[ "${result}" =~ ^0x[0-9a-fA-F]{64}$ ]]; then
      echo "${result}"
      return 0
    fi
  done
  return 1
}

# Jobs whose window is about to close unsettled (#43): the feed the runner reads, the status
# the keeper's settlement changes. A job settled on chain that the feed still lists is no alert.
if [[ -n "${PLATFORM_API:-}" && -n "${VERIFIERS:-}" ]]; then
  margin=$((${WINDOW_MARGIN_MINUTES:-60} * 60))
  near=0
  IFS=, read -ra verifiers <<<"${VERIFIERS}"
  for verifier in "${verifiers[@]}"; do
    verifier="${verifier//[[:space:]]/}"
    [[ -n "${verifier}" ]] || continue
    if [[ ! "${verifier}" =~ ^0x[0-9a-fA-F]{40}$ ]]; then
      alert "VERIFIERS names ${verifier}, not an address"
      continue
    fi
    if ! jobs="$(curl --silent --show-error --fail --max-time 30 \
      "${PLATFORM_API%/}/v1/base/autonomous-bounties/verification-jobs?network=${NETWORK:-base-mainnet}&verifier=${verifier}" 2>/dev/null)" ||
      ! jq -e 'type == "array"' <<<"${jobs}" >/dev/null 2>&1; then
      alert "could not list the jobs of ${verifier} from the platform feed"
      continue
    fi
    while IFS=$'\t' read -r job bounty expires; do
      [[ "${expires}" =~ ^[0-9]+$ ]] || continue
      left=$((expires - now))
      ((left > 0 && left <= margin)) || continue
      near=$((near + 1))
      if [[ ! "${bounty}" =~ ^0x[0-9a-fA-F]{40}$ ]] || ! status="$(rpc_call "${bounty}" 0x200d2ed2)"; then
        alert "could not read the status of ${job} (bounty ${bounty}) to see whether it settled; its window ends in $((left / 60)) min"
      elif (($((16#${status: -2})) == 3)); then
        alert "the verification window of ${job} ends in $((left / 60)) min (margin ${WINDOW_MARGIN_MINUTES:-60}) and it is not settled (bounty ${bounty} still Submitted: no candidate, attestation or settlement yet); see the runner's, signer's and keeper's last runs"
      fi
    done < <(jq -r '.[] | [(.job_id // "?" | tostring), (.bounty_contract // "" | tostring), (.verification_expires_at // "" | tostring)] | @tsv' <<<"${jobs}")
  done
  summary "- jobs: ${near} listed job(s) with a window ending within ${WINDOW_MARGIN_MINUTES:-60} min"
fi

if [[ -n "${KEEPER_ADDRESS:-}" ]]; then
  if [[ ! "${KEEPER_ADDRESS}" =~ ^0x[0-9a-fA-F]{40}$ ]]; then
    alert "KEEPER_ADDRESS is not an address"
  else
    # RPC_URL may be a comma-separated ordered list (as the signer and keeper take it): the
    # first endpoint that answers with a balance is read, so one endpoint down is no alert.
    balance=""
    rpc_urls=()
    rpc_endpoints rpc_urls "${RPC_URL:-}"
    for url in "${rpc_urls[@]}"; do
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
