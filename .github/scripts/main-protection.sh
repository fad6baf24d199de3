# shellcheck shell=bash
# The branch protection every secret relies on, read through the API: each environment is
# limited to main, so whoever can change main can read the keys. Sourced by signer-gate.sh
# (which refuses to sign without it) and preflight.sh. Needs lib.sh.
#
# main must be covered by an active ruleset with: pull requests required with at least one
# approving review, the CI job `.ci/run` as a required status check, no force pushes
# (non_fast_forward) and no deletion. `GET /repos/{repo}/rules/branches/main` returns the
# active rules of every ruleset that applies to main and is readable with the default token.
#
# The one-person profile (REGRESSION_PROFILE=one-person, docs/operations.md "One operator")
# drops only the approving review, which one person cannot give their own pull request; the
# pull request itself, the CI check, and the force-push and deletion blocks stay required.

# The status check the ruleset must require: ci.yml's job name.
REQUIRED_CHECK="${REQUIRED_CHECK:-.ci/run}"

# main_protection_problems: prints one line per missing protection (nothing when all hold);
# returns 2 when the rules could not be read.
main_protection_problems() {
  local rules
  rules="$(api_get "/repos/${GITHUB_REPOSITORY}/rules/branches/main")" || return 2
  jq -e 'type == "array"' <<<"${rules}" >/dev/null 2>&1 || return 2
  local profile="${REGRESSION_PROFILE:-}"
  case "${profile}" in '' | team | one-person) ;; *) echo "REGRESSION_PROFILE '${profile}' is neither team nor one-person"; return 0 ;; esac
  jq -r --arg check "${REQUIRED_CHECK}" --arg profile "${profile}" '
    def has(t): any(.[]; .type == t);
    (if has("pull_request") then empty else "no rule requires a pull request to change main" end),
    (if $profile == "one-person"
        or any(.[]; .type == "pull_request" and ((.parameters.required_approving_review_count // 0) >= 1))
       then empty else "pull requests to main need no approving review" end),
    (if any(.[]; .type == "required_status_checks"
                 and any(.parameters.required_status_checks[]?; .context == $check))
       then empty else "the CI check \($check) is not required on main" end),
    (if has("non_fast_forward") then empty else "force pushes to main are not blocked" end),
    (if has("deletion") then empty else "deleting main is not blocked" end)
  ' <<<"${rules}"
}
