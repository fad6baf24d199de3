#!/usr/bin/env bash
# Checks that each named deployment environment exists and admits deployments from the branch
# `main` only, through the API. Fails closed: a job that names a missing environment gets it
# created on the spot with no protection (and no secrets bound to main), and an environment
# without a main-only deployment branch policy lets a workflow on any branch read its secrets.
#
# Accepted: `deployment_branch_policy` with custom branch policies, every one of them the
# branch `main` (type `branch`, name exactly `main`). Refused: the environment missing (404),
# no deployment branch policy (all branches), "protected branches" (every protected branch,
# not only main, may deploy), or a custom policy naming anything else (`*`, `release/*`, a
# tag). Required reviewers or a wait timer are not required (and reviewers cannot meet the
# attestations' 15-minute deadline unattended; docs/operations.md "First setup").
#
#   environment-check.sh <environment>...
#
# Env: GITHUB_REPOSITORY, GH_TOKEN (GITHUB_TOKEN with `actions: read` reads environments).
# Exits 0 when every environment is protected; 1 with an ::error per environment otherwise.
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bad=0
unprotected() {
  echo "::error::environment $1: $2; refusing to deploy to it (docs/operations.md \"First setup\")"
  summary "Environment $1 refused: $2."
  bad=$((bad + 1))
}
for env in "$@"; do
  [[ "${env}" =~ ^[A-Za-z0-9._-]+$ ]] || { unprotected "${env}" "malformed name"; continue; }
  if ! body="$(api_get "/repos/${GITHUB_REPOSITORY}/environments/${env}")"; then
    unprotected "${env}" "it does not exist or cannot be read (a job naming it would create it unprotected)"
    continue
  fi
  policy="$(jq -c '.deployment_branch_policy // null' <<<"${body}")"
  if [[ "${policy}" == null ]]; then
    unprotected "${env}" "no deployment branch policy (every branch may deploy and read its secrets)"
    continue
  fi
  if [[ "$(jq -r '.custom_branch_policies == true' <<<"${policy}")" != true ]]; then
    unprotected "${env}" "its deployment branch policy is not \"selected branches\" = main (protected branches admits every protected branch)"
    continue
  fi
  if ! policies="$(api_get_all "/repos/${GITHUB_REPOSITORY}/environments/${env}/deployment-branch-policies" branch_policies)"; then
    unprotected "${env}" "its deployment branch policies cannot be read"
    continue
  fi
  others="$(jq -r '[.branch_policies[] | select(.name != "main" or (.type // "branch") != "branch") | "\(.type // "branch") \(.name)"] | join(", ")' <<<"${policies}")"
  if [[ -n "${others}" ]]; then
    unprotected "${env}" "its deployment branch policy admits ${others}, not only main"
    continue
  fi
  if [[ "$(jq '.branch_policies | length' <<<"${policies}")" == 0 ]]; then
    unprotected "${env}" "its deployment branch policy lists no branch"
    continue
  fi
  echo "environment ${env}: deployments from main only"
done
((bad == 0))
