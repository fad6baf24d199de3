#!/usr/bin/env bash
# Finds the run whose ARTIFACT a workflow restores from its own previous runs (the keeper's
# settlement state, the runner's result cache), and writes its id to GITHUB_OUTPUT as
# `run_id` (empty: start from nothing).
#
# Only completed runs of WORKFLOW itself, on main, in this repository count: an artifact of
# the same name uploaded by any other workflow, branch or fork run is never read. Expired
# artifacts are skipped (downloading one fails the job). Losing either is safe: the keeper
# re-reads the chain before reporting any bounty done, paid or rejected, and the worker
# revalidates every cache entry on load.
#
# Env: WORKFLOW (file name, default regression-verifier-keeper.yml), ARTIFACT (default
# regression-keeper-state), GITHUB_REPOSITORY, GITHUB_RUN_ID (this run, skipped), GH_TOKEN,
# GITHUB_OUTPUT.
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

workflow="${WORKFLOW:-regression-verifier-keeper.yml}"
artifact="${ARTIFACT:-regression-keeper-state}"
[[ "${artifact}" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "::error::bad artifact name"; exit 1; }
runs="$(api_get "/repos/${GITHUB_REPOSITORY}/actions/workflows/${workflow}/runs?branch=main&status=completed&per_page=30")"
candidates="$(jq -r --arg repo "${GITHUB_REPOSITORY}" --arg self "${GITHUB_RUN_ID:-}" '
  .workflow_runs
  | sort_by(.created_at) | reverse
  | .[]
  | select(.head_branch == "main" and .event != "pull_request" and .head_repository.full_name == $repo
           and .repository.full_name == $repo and (.id | tostring) != $self)
  | .id' <<<"${runs}")"
for run_id in ${candidates}; do
  [[ "${run_id}" =~ ^[0-9]+$ ]] || continue
  artifacts="$(api_get "/repos/${GITHUB_REPOSITORY}/actions/runs/${run_id}/artifacts?name=${artifact}")"
  if jq -e --arg name "${artifact}" '[.artifacts[] | select(.name == $name and .expired == false)] | length > 0' \
    <<<"${artifacts}" >/dev/null; then
    echo "restoring ${artifact} of ${workflow} run ${run_id}"
    summary "Restored ${artifact} from run ${run_id}."
    output run_id "${run_id}"
    exit 0
  fi
done
echo "no earlier ${artifact}; starting from none"
summary "No earlier ${artifact}; starting from none."
output run_id ""
