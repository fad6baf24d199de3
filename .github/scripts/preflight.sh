#!/usr/bin/env bash
# Checks, through the REST API, the repository settings docs/operations.md "First setup" asks
# for, before any key is stored and after any settings change:
#
#   GH_TOKEN=$(gh auth token) GITHUB_REPOSITORY=owner/repo .github/scripts/preflight.sh [--profile one-person]
#
# Profiles (docs/operations.md "One operator"): `team` (the default) as First setup says;
# `one-person` (or REGRESSION_PROFILE=one-person) for a deployment run by one person, who cannot
# approve their own pull requests: the ruleset's approving review and code owner review are
# not required. Everything else still is, and the profile is printed with what it gives up.
# The signer gate reads the same repository variable REGRESSION_PROFILE.
#
# Slot 2's environment is checked only when the repository variable REGRESSION_SECOND_VERIFIER
# is set (a one-slot setup never deploys to it, so it need not exist).
#
# Run it with a token of a repository administrator (most of these endpoints answer only to
# admins; the default workflow token cannot read them). Read-only: nothing is changed. Prints
# one line per check (`ok` or `FAIL` with what to fix) and exits 1 when any check fails or
# could not be read, 0 when all hold. What the API cannot show is listed at the end as manual.
#
# Env: GITHUB_REPOSITORY, GH_TOKEN, GITHUB_API_URL (default https://api.github.com),
# ENVIRONMENTS (default "regression-verifier-1 regression-verifier-keeper", and
# regression-verifier-2 when slot 2 has an address), REGRESSION_PROFILE.
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=.github/scripts/main-protection.sh
source "$(dirname "${BASH_SOURCE[0]}")/main-protection.sh"

[[ "${GITHUB_REPOSITORY:-}" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] ||
  { echo "error: GITHUB_REPOSITORY must be owner/repo" >&2; exit 2; }
repo="/repos/${GITHUB_REPOSITORY}"
while (($#)); do
  case "$1" in
    --profile) REGRESSION_PROFILE="${2:-}"; shift 2 ;;
    *) echo "usage: preflight.sh [--profile team|one-person]" >&2; exit 2 ;;
  esac
done
export REGRESSION_PROFILE="${REGRESSION_PROFILE:-team}"
case "${REGRESSION_PROFILE}" in
  team | one-person) ;;
  *) echo "error: the profile is team or one-person, not '${REGRESSION_PROFILE}'" >&2; exit 2 ;;
esac

failures=0
ok() { echo "ok    $*"; }
bad() {
  echo "FAIL  $*"
  summary "- FAIL $*"
  failures=$((failures + 1))
}
# holds JSON FILTER GOOD BAD: ok GOOD when the jq FILTER is true of JSON, else bad BAD.
holds() {
  if jq -e "$2" <<<"$1" >/dev/null; then ok "$3"; else bad "$4"; fi
}
# get PATH: the JSON body into `body`, or a FAIL line naming what could not be read (not in a
# subshell, so the failure is counted).
get() {
  body="$(api_get "$1" 2>/dev/null)" && return 0
  bad "could not read $1 (not found, or the token is not an administrator's)"
  return 1
}

if [[ "${REGRESSION_PROFILE}" == one-person ]]; then
  echo "profile one-person: no approving review and no code owner review on main; whoever holds"
  echo "  this account (or a token of it) can merge to main, and so reach every key, with only the"
  echo "  CI check in the way. Still required: pull requests, the CI check, no force push or"
  echo "  deletion, main-only environments without admin bypass, keys only in environments."
fi
if [[ -n "${ENVIRONMENTS:-}" ]]; then
  environments="${ENVIRONMENTS}"
elif api_get "${repo}/actions/variables/REGRESSION_SECOND_VERIFIER" >/dev/null 2>&1; then
  environments="regression-verifier-1 regression-verifier-2 regression-verifier-keeper"
else
  environments="regression-verifier-1 regression-verifier-keeper"
  ok "environment regression-verifier-2: not used (no REGRESSION_SECOND_VERIFIER variable: one slot)"
fi
# 1. main's ruleset (also enforced by signer-gate.sh).
status=0
problems="$(main_protection_problems)" || status=$?
if ((status != 0)); then
  bad "could not read main's rules (${repo}/rules/branches/main)"
elif [[ -n "${problems}" ]]; then
  while IFS= read -r line; do bad "ruleset on main: ${line}"; done <<<"${problems}"
else
  ok "ruleset on main: reviewed pull requests, ${REQUIRED_CHECK} required, no force push, no deletion"
fi

# 2. Actions: GitHub-owned (or an allow-list of) actions only, full-SHA pinning required.
if get "${repo}/actions/permissions"; then
  perms="${body}"
  allowed="$(jq -r '.allowed_actions // "all"' <<<"${perms}")"
  case "${allowed}" in
    local_only) ok "actions: only this repository's own actions are allowed" ;;
    selected)
      if get "${repo}/actions/permissions/selected-actions"; then
        selected="${body}"
        if jq -e '.verified_allowed != true' <<<"${selected}" >/dev/null; then
          ok "actions: only selected actions are allowed ($(jq -r '[if .github_owned_allowed then "GitHub-owned" else empty end] + (.patterns_allowed // []) | join(", ")' <<<"${selected}"))"
        else
          bad "actions: every Marketplace verified creator is allowed; allow GitHub-owned actions and an explicit list only"
        fi
      fi
      ;;
    *) bad "actions: all actions are allowed (${allowed}); set 'Allow select actions' with GitHub-owned actions only" ;;
  esac
  holds "${perms}" '.sha_pinning_required == true' \
    "actions: full-length commit SHA pinning is required" \
    "actions: SHA pinning is not required (Settings → Actions → General → Require actions to be pinned to a full-length commit SHA)"
fi

# 3. Workflows from outside contributors need approval.
if get "${repo}/actions/permissions/fork-pr-contributor-approval"; then
  fork="${body}"
  policy="$(jq -r '.approval_policy // ""' <<<"${fork}")"
  if [[ "${policy}" == all_external_contributors ]]; then
    ok "actions: every outside contributor's workflow run needs approval"
  else
    bad "actions: approval policy for outside contributors is '${policy}'; require approval for all external contributors"
  fi
fi

# 4. Environments: present (a missing one is created unprotected on first use), main only, no
# admin bypass, and no self-approval where reviewers are required.
for env in ${environments}; do
  body="$(api_get "${repo}/environments/${env}" 2>/dev/null)" ||
    { bad "environment ${env} does not exist (the first deployment would create it without protection)"; continue; }
  holds "${body}" '.can_admins_bypass == false' \
    "environment ${env}: administrators cannot bypass its rules" \
    "environment ${env}: administrators can bypass its protection rules; turn 'Allow administrators to bypass' off"
  if jq -e '.deployment_branch_policy.custom_branch_policies == true' <<<"${body}" >/dev/null &&
    branches="$(api_get "${repo}/environments/${env}/deployment-branch-policies" 2>/dev/null)" &&
    [[ "$(jq -c '[.branch_policies[] | {name, type: (.type // "branch")}]' <<<"${branches}")" == '[{"name":"main","type":"branch"}]' ]]; then
    ok "environment ${env}: deployments from main only"
  else
    bad "environment ${env}: deployments are not limited to the branch main (Selected branches and tags → main, nothing else)"
  fi
  holds "${body}" '[.protection_rules[]? | select(.type == "required_reviewers") | select(.prevent_self_review != true)] | length == 0' \
    "environment ${env}: nobody approves their own deployment" \
    "environment ${env}: required reviewers may approve their own runs; turn 'Prevent self-review' on"
done

# 5. Secret scanning with push protection.
if get "${repo}"; then
  info="${body}"
  holds "${info}" '.security_and_analysis.secret_scanning.status == "enabled"' \
    "secret scanning is enabled" \
    "secret scanning is not enabled (Settings → Code security)"
  holds "${info}" '.security_and_analysis.secret_scanning_push_protection.status == "enabled"' \
    "secret scanning push protection is enabled" \
    "secret scanning push protection is not enabled"
fi

# 6. CODEOWNERS parses (its owners must review .github/, deploy/ and the key-holding crates;
# the ruleset's "require review from code owners" makes that binding).
if get "${repo}/codeowners/errors"; then
  errors="${body}"
  if jq -e '.errors | length == 0' <<<"${errors}" >/dev/null; then
    ok "CODEOWNERS has no errors"
  else
    bad "CODEOWNERS has errors: $(jq -r '[.errors[].message] | join("; ")' <<<"${errors}" | head -c 300)"
  fi
fi
if [[ "${REGRESSION_PROFILE}" == one-person ]]; then
  ok "ruleset on main: code owner review not required (profile one-person: the one owner cannot review their own changes)"
elif rules="$(api_get "${repo}/rules/branches/main" 2>/dev/null)" &&
  jq -e 'any(.[]; .type == "pull_request" and .parameters.require_code_owner_review == true)' <<<"${rules}" >/dev/null; then
  ok "ruleset on main: code owners must review their paths"
else
  bad "ruleset on main: code owner review is not required"
fi

# 7. No key at repository level: a repository secret reaches every workflow, not only the
# protected environment's job.
if get "${repo}/actions/secrets"; then
  secrets="${body}"
  leaked="$(jq -r '[.secrets[].name | select(test("^REGRESSION_(VERIFIER|KEEPER)_KEY$"))] | join(", ")' <<<"${secrets}")"
  if [[ -z "${leaked}" ]]; then
    ok "no key is stored as a repository secret"
  else
    bad "${leaked} stored at repository level; delete it there and keep it only in its environment"
  fi
fi

echo
echo "manual (not visible through the API): the ruleset has no bypass actors you did not mean;"
echo "each environment holds only its own secrets; the keys are distinct."
if ((failures > 0)); then
  echo "${failures} check(s) failed"
  exit 1
fi
echo "all checks passed"
