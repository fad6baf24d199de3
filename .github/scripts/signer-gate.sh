#!/usr/bin/env bash
# Decides whether a finished runner run may be signed. Writes `proceed=true|false` and
# `head_sha` to GITHUB_OUTPUT.
#
# Signed: a successful runner run on main (scheduled or dispatched by hand on main) from this
# repository whose head is still main's head. A run on an outdated commit is a normal race
# (main moved during the cycle): the next cycle signs, so it is a green skip with a summary,
# not a failure. Anything that looks forged (another repository, a malformed SHA) or an API
# that does not answer fails the job.
#
# Env: RUN_CONCLUSION RUN_EVENT RUN_HEAD_BRANCH RUN_HEAD_SHA RUN_HEAD_REPOSITORY (the
# triggering run's head_repository.full_name), REGRESSION_SECOND_VERIFIER (slot 2 exists only
# with an address), GITHUB_REPOSITORY, GH_TOKEN, GITHUB_OUTPUT (also `slots`).
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=.github/scripts/main-protection.sh
source "$(dirname "${BASH_SOURCE[0]}")/main-protection.sh"

# The signing slots: slot 1, and slot 2 only when it has an address (an unused slot's job
# would still deploy to, and so create, its environment). Each slot's environment must exist
# and admit main only (environment-check.sh); otherwise the gate fails and nothing is signed.
# Writes `slots` (JSON list, the sign and re-run matrices).
require_protected_signing_environments() {
  local slots=("1") envs=() slot
  [[ -n "${REGRESSION_SECOND_VERIFIER:-}" ]] && slots+=("2")
  for slot in "${slots[@]}"; do envs+=("regression-verifier-${slot}"); done
  if ! "$(dirname "${BASH_SOURCE[0]}")/environment-check.sh" "${envs[@]}"; then
    echo "::error::a signing environment is missing or not limited to main; nothing is signed"
    exit 1
  fi
  output slots "$(printf '%s\n' "${slots[@]}" | jq -Rcn '[inputs]')"
}

skip() {
  echo "::notice::not signing: $*"
  summary "Not signed: $*"
  output proceed false
  exit 0
}

[[ "${RUN_CONCLUSION}" == "success" ]] || skip "the runner run concluded ${RUN_CONCLUSION}"
case "${RUN_EVENT}" in
  schedule | workflow_dispatch) ;;
  *) skip "the runner run was triggered by ${RUN_EVENT}" ;;
esac
[[ "${RUN_HEAD_BRANCH}" == "main" ]] || skip "the runner run is on ${RUN_HEAD_BRANCH}, not main"
if [[ "${RUN_HEAD_REPOSITORY}" != "${GITHUB_REPOSITORY}" ]]; then
  echo "::error::the runner run's code comes from ${RUN_HEAD_REPOSITORY}, not ${GITHUB_REPOSITORY}"
  exit 1
fi
if [[ ! "${RUN_HEAD_SHA}" =~ ^[0-9a-f]{40}$ ]]; then
  echo "::error::the runner run's head SHA is malformed"
  exit 1
fi
main_sha="$(api_get "/repos/${GITHUB_REPOSITORY}/commits/main" | jq -r .sha)"
if [[ ! "${main_sha}" =~ ^[0-9a-f]{40}$ ]]; then
  echo "::error::could not read main's head from the API"
  exit 1
fi
if [[ "${main_sha}" != "${RUN_HEAD_SHA}" ]]; then
  skip "the runner run is for ${RUN_HEAD_SHA}, main has moved to ${main_sha}; the next cycle signs"
fi
# --- main's protection (issue 22.4) ------------------------------------------------------
# The keys sit behind "deploy from main only"; without the ruleset on main that promise is
# empty, so nothing is signed (red: a setup fault, not a race). See main-protection.sh.
require_main_protection() {
  local problems status=0
  problems="$(main_protection_problems)" || status=$?
  if ((status != 0)); then
    echo "::error::could not read main's rules from the API; not signing"
    exit 1
  fi
  if [[ -n "${problems}" ]]; then
    while IFS= read -r line; do echo "::error::main is not protected: ${line}"; done <<<"${problems}"
    summary "Not signed: main is not protected (${problems//$'\n'/; }); see docs/operations.md, First setup."
    exit 1
  fi
}
require_main_protection
# --- end of main's protection ------------------------------------------------------------

require_protected_signing_environments
summary "Signing the candidates of ${RUN_EVENT} run at ${RUN_HEAD_SHA}."
output proceed true
output head_sha "${RUN_HEAD_SHA}"
