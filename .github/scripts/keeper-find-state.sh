#!/usr/bin/env bash
# Finds the run whose `regression-keeper-state` artifact the keeper restores, and writes its
# id to GITHUB_OUTPUT as `run_id` (empty: start from no state).
#
# Only completed runs of the keeper workflow itself, on main, in this repository count: an
# artifact of the same name uploaded by any other workflow, branch or fork run is never read.
# Expired artifacts are skipped (downloading one fails the job). Losing the state is safe: the
# keeper re-reads the chain before reporting any bounty done, paid or rejected.
#
# Env: GITHUB_REPOSITORY, GITHUB_RUN_ID (this run, skipped), GH_TOKEN, GITHUB_OUTPUT,
# KEEPER_WORKFLOW (default regression-verifier-keeper.yml).
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

workflow="${KEEPER_WORKFLOW:-regression-verifier-keeper.yml}"
runs="$(api_get "/repos/${GITHUB_REPOSITORY}/actions/workflows/${workflow}/runs?branch=main&status=completed&per_page=30")"
candidates="$(jq -r --arg repo "${GITHUB_REPOSITORY}" --arg self "${GITHUB_RUN_ID:-}" '
  .workflow_runs
  | sort_by(.created_at) | reverse
  | .[]
  | select(.head_branch == "main" and .head_repository.full_name == $repo
           and .repository.full_name == $repo and (.id | tostring) != $self)
  | .id' <<<"${runs}")"
for run_id in ${candidates}; do
  [[ "${run_id}" =~ ^[0-9]+$ ]] || continue
  artifacts="$(api_get "/repos/${GITHUB_REPOSITORY}/actions/runs/${run_id}/artifacts?name=regression-keeper-state")"
  if jq -e '[.artifacts[] | select(.name == "regression-keeper-state" and .expired == false)] | length > 0' \
    <<<"${artifacts}" >/dev/null; then
    echo "restoring the settlement state of keeper run ${run_id}"
    summary "Settlement state restored from keeper run ${run_id}."
    output run_id "${run_id}"
    exit 0
  fi
done
echo "no earlier settlement state; starting from none"
summary "No earlier settlement state (the keeper re-reads every bounty from the chain)."
output run_id ""
