#!/usr/bin/env bash
# Finds the run whose ARTIFACT a workflow restores from its own previous runs (the keeper's
# settlement state, the runner's result cache), and writes its id to GITHUB_OUTPUT as
# `run_id` (empty: start from nothing).
#
# Only completed runs of WORKFLOW itself, on main, in this repository count: an artifact of
# the same name uploaded by any other workflow, branch or fork run is never read. Expired
# artifacts are skipped (downloading one fails the job). The search goes back up to
# MAX_PAGES pages of 100 runs, so a long streak of runs that failed before uploading (each
# leaves no artifact) does not hide the last one that did.
#
# With OPTIONAL=true (the runner's result cache) the lookup is optional and bounded: two
# requests (the newest 100 completed runs of WORKFLOW, the newest 100 artifacts of that name
# in the repository, matched by run id, so one of another workflow or a fork is still never
# read), never a walk back through every earlier run, and an API that does not answer is a
# warning and no cache, never a failed step (docs/operations.md "REST budget").
#
# Losing the runner's cache is safe (the worker revalidates every entry on load). Losing the
# keeper's state is not silent-safe: a record `planned` or `sent` is the only pointer to a
# transaction that may be stuck and blocking every later nonce. With REQUIRED=true (the keeper)
# finding no state although earlier runs ran fails the step red, unless ALLOW_EMPTY=true
# (the repository variable REGRESSION_KEEPER_ALLOW_EMPTY_STATE, for one run after the operator
# checked, docs/operations.md). Earlier runs that were all skipped, or none at all, are a
# first deployment: start empty.
#
# Env: WORKFLOW (file name, default regression-verifier-keeper.yml), ARTIFACT (default
# regression-keeper-state), REQUIRED, OPTIONAL, ALLOW_EMPTY, MAX_PAGES (default 10), GITHUB_REPOSITORY,
# GITHUB_RUN_ID (this run, skipped), GH_TOKEN, GITHUB_OUTPUT.
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

workflow="${WORKFLOW:-regression-verifier-keeper.yml}"
artifact="${ARTIFACT:-regression-keeper-state}"
required="${REQUIRED:-false}"
allow_empty="${ALLOW_EMPTY:-false}"
max_pages="${MAX_PAGES:-10}"
[[ "${artifact}" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "::error::bad artifact name"; exit 1; }
[[ "${max_pages}" =~ ^[1-9][0-9]?$ ]] || { echo "::error::bad MAX_PAGES"; exit 1; }

if [[ "${OPTIONAL:-false}" == true ]]; then
  [[ "${required}" != true ]] || { echo "::error::REQUIRED and OPTIONAL together"; exit 1; }
  none() {
    echo "::warning::no ${artifact} restored: $*; starting without one"
    summary "No earlier ${artifact} restored ($*)."
    output run_id ""
    exit 0
  }
  runs="$(api_get "/repos/${GITHUB_REPOSITORY}/actions/workflows/${workflow}/runs?branch=main&status=completed&per_page=100")" ||
    none "the runs of ${workflow} could not be listed"
  found="$(api_get "/repos/${GITHUB_REPOSITORY}/actions/artifacts?name=${artifact}&per_page=100")" ||
    none "the ${artifact} artifacts could not be listed"
  run_id="$(jq -r --arg repo "${GITHUB_REPOSITORY}" --arg self "${GITHUB_RUN_ID:-}" --arg name "${artifact}" --argjson artifacts "${found}" '
    [.workflow_runs[]
     | select(.head_branch == "main" and .event != "pull_request" and .head_repository.full_name == $repo
              and .repository.full_name == $repo and (.id | tostring) != $self)
     | .id] as $ours
    | [$artifacts.artifacts[]
       | select(.name == $name and .expired == false and ((.workflow_run.id // -1) as $id | $ours | index($id)))]
    | sort_by(.created_at) | reverse | first | .workflow_run.id // empty' <<<"${runs}" 2>/dev/null)" ||
    none "the API's answer was not readable"
  [[ -z "${run_id}" || "${run_id}" =~ ^[0-9]+$ ]] || none "the API's answer was not readable"
  if [[ -z "${run_id}" ]]; then
    echo "no earlier ${artifact} among the last 100 runs of ${workflow}; starting from none"
    summary "No earlier ${artifact}; starting from none."
    output run_id ""
    exit 0
  fi
  echo "restoring ${artifact} of ${workflow} run ${run_id}"
  summary "Restored ${artifact} from run ${run_id}."
  output run_id "${run_id}"
  exit 0
fi

ran=0
checked=0
for ((page = 1; page <= max_pages; page++)); do
  runs="$(api_get "/repos/${GITHUB_REPOSITORY}/actions/workflows/${workflow}/runs?branch=main&status=completed&per_page=100&page=${page}")"
  # id <TAB> conclusion, newest first.
  candidates="$(jq -r --arg repo "${GITHUB_REPOSITORY}" --arg self "${GITHUB_RUN_ID:-}" '
    .workflow_runs
    | sort_by(.created_at) | reverse
    | .[]
    | select(.head_branch == "main" and .event != "pull_request" and .head_repository.full_name == $repo
             and .repository.full_name == $repo and (.id | tostring) != $self)
    | [(.id | tostring), (.conclusion // "none")] | @tsv' <<<"${runs}")"
  while IFS=$'\t' read -r run_id conclusion; do
    [[ "${run_id}" =~ ^[0-9]+$ ]] || continue
    checked=$((checked + 1))
    [[ "${conclusion}" == skipped ]] || ran=$((ran + 1))
    artifacts="$(api_get "/repos/${GITHUB_REPOSITORY}/actions/runs/${run_id}/artifacts?name=${artifact}")"
    if jq -e --arg name "${artifact}" '[.artifacts[] | select(.name == $name and .expired == false)] | length > 0' \
      <<<"${artifacts}" >/dev/null; then
      echo "restoring ${artifact} of ${workflow} run ${run_id}"
      summary "Restored ${artifact} from run ${run_id}."
      output run_id "${run_id}"
      exit 0
    fi
  done <<<"${candidates}"
  (("$(jq '.workflow_runs | length' <<<"${runs}")" == 100)) || break
done

if [[ "${required}" == true && "${ran}" -gt 0 ]]; then
  if [[ "${allow_empty}" == true ]]; then
    echo "::warning::no unexpired ${artifact} in ${checked} earlier run(s); starting empty because ALLOW_EMPTY is set (unset it again)"
    summary "**Warning**: no earlier ${artifact} in ${checked} run(s); started empty (ALLOW_EMPTY)."
    output run_id ""
    exit 0
  fi
  echo "::error::no unexpired ${artifact} in the ${checked} earlier run(s) of ${workflow} searched, though ${ran} of them ran; starting empty could hide a planned or sent settlement whose transaction blocks every later nonce. Restore the state (keeper status --state-dir lists its open records), or set ALLOW_EMPTY for one run after checking the keeper account's nonce (docs/operations.md)"
  summary "**State not found** in ${checked} earlier run(s); nothing relayed (see docs/operations.md, 'Lost keeper state')."
  exit 1
fi
echo "no earlier ${artifact}; starting from none"
summary "No earlier ${artifact}; starting from none."
output run_id ""
