#!/usr/bin/env bash
# The checks are eval'd strings so a case reads as one line; they expand when they run.
# shellcheck disable=SC2016,SC2034
# Tests of the setup an operator meets (issue 22): preflight.sh and the signer gate's refusal
# without main's protection, against the local GitHub API stand-in; key rotation end to end
# with the real worker and signer (old key only → both → new key only); and the reference
# compatibility mode's artifacts checked against what the reference relay reads.
#
#   .github/scripts/tests/setup.sh [directory holding the built worker, signer and examples]
#
# Prints one line per case and closes with "N passed, N failed".
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=.github/scripts/tests/harness.sh
source "${here}/harness.sh"
bin_dir="${1:-${repo}/target/debug}"
worker_bin="${WORKER_BIN:-${bin_dir}/worker}"
signer_bin="${bin_dir}/signer"
bench_feed="${bin_dir}/examples/bench_feed"
images="${repo}/.work/images.json"

main_sha=1111111111111111111111111111111111111111
r=/repos/acme/verifier

# --- a repository set up as docs/operations.md "First setup" says ------------------------
good_rules='[{"type": "deletion"}, {"type": "non_fast_forward"},
  {"type": "pull_request", "parameters": {"required_approving_review_count": 1, "require_code_owner_review": true}},
  {"type": "required_status_checks", "parameters": {"required_status_checks": [{"context": ".ci/run"}]}}]'
good_env='{"name": "e", "can_admins_bypass": false,
  "deployment_branch_policy": {"protected_branches": false, "custom_branch_policies": true},
  "protection_rules": [{"type": "branch_policy"}]}'
main_only='{"branch_policies": [{"name": "main", "type": "branch"}]}'
# routes EDIT: the good repository's routes with a jq edit applied (". " for none).
set_routes() {
  jq -n --argjson rules "${good_rules}" --argjson env "${good_env}" --argjson main "${main_only}" \
    --arg r "${r}" --arg sha "${main_sha}" '
    {("\($r)/commits/main"): {sha: $sha},
     ("\($r)/rules/branches/main"): $rules,
     ("\($r)/actions/permissions"): {enabled: true, allowed_actions: "selected", sha_pinning_required: true},
     ("\($r)/actions/permissions/selected-actions"): {github_owned_allowed: true, verified_allowed: false, patterns_allowed: []},
     ("\($r)/actions/permissions/fork-pr-contributor-approval"): {approval_policy: "all_external_contributors"},
     ("\($r)/environments/regression-verifier-1"): $env,
     ("\($r)/environments/regression-verifier-2"): $env,
     ("\($r)/environments/regression-verifier-keeper"): $env,
     ("\($r)/environments/regression-verifier-1/deployment-branch-policies"): $main,
     ("\($r)/environments/regression-verifier-2/deployment-branch-policies"): $main,
     ("\($r)/environments/regression-verifier-keeper/deployment-branch-policies"): $main,
     # The signer gate reads the same policies page by page (environment-check.sh).
     ("\($r)/environments/regression-verifier-1/deployment-branch-policies?per_page=100"): ($main + {total_count: 1}),
     ("\($r)"): {security_and_analysis: {secret_scanning: {status: "enabled"}, secret_scanning_push_protection: {status: "enabled"}}},
     ("\($r)/codeowners/errors"): {errors: []},
     ("\($r)/actions/secrets"): {total_count: 1, secrets: [{name: "UNRELATED"}]},
     ("\($r)/actions/variables/REGRESSION_SECOND_VERIFIER"): {name: "REGRESSION_SECOND_VERIFIER", value: "0x2222222222222222222222222222222222222222"}}
    | '"$1" > "${routes}"
}

set_routes .
run_script "${scripts}/preflight.sh"
check "preflight: a repository set up as the runbook says passes every check" \
  eval '((status == 0)) && said "all checks passed" && ! said "FAIL"'

# Each gap alone fails preflight with its own line.
preflight_gaps=0
while IFS='~' read -r edit expect; do
  set_routes "${edit}"
  run_script "${scripts}/preflight.sh"
  if ((status != 1)) || ! said "FAIL  ${expect}"; then
    echo "      not caught: ${expect} (status ${status})"
    preflight_gaps=$((preflight_gaps + 1))
  fi
done <<'CASES'
.["/repos/acme/verifier/rules/branches/main"] = []~ruleset on main: no rule requires a pull request
.["/repos/acme/verifier/rules/branches/main"] |= map(select(.type != "required_status_checks"))~ruleset on main: the CI check .ci/run is not required
.["/repos/acme/verifier/rules/branches/main"] |= map(select(.type != "non_fast_forward"))~ruleset on main: force pushes to main are not blocked
.["/repos/acme/verifier/rules/branches/main"] |= map(select(.type != "deletion"))~ruleset on main: deleting main is not blocked
.["/repos/acme/verifier/rules/branches/main"] |= map(if .type == "pull_request" then .parameters.required_approving_review_count = 0 else . end)~ruleset on main: pull requests to main need no approving review
.["/repos/acme/verifier/rules/branches/main"] |= map(if .type == "pull_request" then .parameters.require_code_owner_review = false else . end)~ruleset on main: code owner review is not required
.["/repos/acme/verifier/actions/permissions"].allowed_actions = "all"~actions: all actions are allowed
.["/repos/acme/verifier/actions/permissions/selected-actions"].verified_allowed = true~actions: every Marketplace verified creator is allowed
.["/repos/acme/verifier/actions/permissions"].sha_pinning_required = false~actions: SHA pinning is not required
.["/repos/acme/verifier/actions/permissions/fork-pr-contributor-approval"].approval_policy = "first_time_contributors"~actions: approval policy for outside contributors
del(.["/repos/acme/verifier/environments/regression-verifier-2"])~environment regression-verifier-2 does not exist
.["/repos/acme/verifier/environments/regression-verifier-keeper"].can_admins_bypass = true~environment regression-verifier-keeper: administrators can bypass
.["/repos/acme/verifier/environments/regression-verifier-1"].deployment_branch_policy = null~environment regression-verifier-1: deployments are not limited
.["/repos/acme/verifier/environments/regression-verifier-1/deployment-branch-policies"].branch_policies += [{"name": "*", "type": "branch"}]~environment regression-verifier-1: deployments are not limited
.["/repos/acme/verifier/environments/regression-verifier-1"].protection_rules += [{"type": "required_reviewers", "prevent_self_review": false}]~environment regression-verifier-1: required reviewers may approve their own runs
.["/repos/acme/verifier"].security_and_analysis.secret_scanning_push_protection.status = "disabled"~secret scanning push protection is not enabled
.["/repos/acme/verifier"].security_and_analysis.secret_scanning.status = "disabled"~secret scanning is not enabled
.["/repos/acme/verifier/codeowners/errors"].errors = [{"message": "Unknown owner"}]~CODEOWNERS has errors: Unknown owner
.["/repos/acme/verifier/actions/secrets"].secrets += [{"name": "REGRESSION_VERIFIER_KEY"}]~REGRESSION_VERIFIER_KEY stored at repository level
del(.["/repos/acme/verifier/actions/permissions"])~could not read /repos/acme/verifier/actions/permissions
CASES
check "preflight: each of 20 gaps (ruleset, actions, approvals, environments, secret scanning, CODEOWNERS, a repository-level key, an unreadable setting) fails with its own line" \
  eval '((preflight_gaps == 0))'

# --- the signer gate refuses to sign without main's protection ----------------------------
gate() {
  RUN_CONCLUSION=success RUN_EVENT=schedule RUN_HEAD_BRANCH=main RUN_HEAD_SHA="${main_sha}" \
    RUN_HEAD_REPOSITORY=acme/verifier run_script "${scripts}/signer-gate.sh"
}
set_routes .
gate
check "gate: with main protected, a scheduled run at main's head is signed" \
  eval '((status == 0)) && output_is proceed true'
set_routes '.["/repos/acme/verifier/rules/branches/main"] = []'
gate
check "gate: main without a ruleset is refused red; nothing proceeds; the summary says why" \
  eval '((status == 1)) && ! output_is proceed true && said "::error::main is not protected: no rule requires a pull request" && grep -q "Not signed: main is not protected" "${summary_file}"'
set_routes '.["/repos/acme/verifier/rules/branches/main"] |= map(select(.type != "required_status_checks" and .type != "non_fast_forward"))'
gate
check "gate: a ruleset without the CI check or the force-push block is refused, naming both" \
  eval '((status == 1)) && said "the CI check .ci/run is not required" && said "force pushes to main are not blocked" && ! output_is proceed true'
set_routes 'del(.["/repos/acme/verifier/rules/branches/main"])'
gate
check "gate: main's rules unreadable fails closed" eval '((status == 1)) && said "could not read main" && ! output_is proceed true'

# --- one operator (#51 item 6) -------------------------------------------------------------
# A repository one person runs: pull requests without an approving review or code owner review
# (they cannot approve their own), one signing slot (no slot-2 environment, no variable).
one_person='.["/repos/acme/verifier/rules/branches/main"] |= map(if .type == "pull_request" then .parameters = {required_approving_review_count: 0, require_code_owner_review: false} else . end)
  | del(.["/repos/acme/verifier/environments/regression-verifier-2"]) | del(.["/repos/acme/verifier/actions/variables/REGRESSION_SECOND_VERIFIER"])'
set_routes "${one_person}"
run_script "${scripts}/preflight.sh" --profile one-person
check "preflight: the one-person profile (--profile one-person) passes a one-person, one-slot repository and says what it gives up" \
  eval '((status == 0)) && said "all checks passed" && ! said "FAIL" && said "profile one-person: no approving review" && said "regression-verifier-2: not used"'
REGRESSION_PROFILE=one-person run_script "${scripts}/preflight.sh"
check "preflight: REGRESSION_PROFILE=one-person is the same profile" eval '((status == 0)) && said "profile one-person"'
run_script "${scripts}/preflight.sh"
check "preflight: without the profile the same repository still fails on the approving review and code owner review" \
  eval '((status == 1)) && said "FAIL  ruleset on main: pull requests to main need no approving review" && said "FAIL  ruleset on main: code owner review is not required"'
one_person_gaps=0
while IFS='~' read -r edit expect; do
  set_routes "${one_person} | ${edit}"
  run_script "${scripts}/preflight.sh" --profile one-person
  if ((status != 1)) || ! said "FAIL  ${expect}"; then
    echo "      not caught in the one-person profile: ${expect} (status ${status})"
    one_person_gaps=$((one_person_gaps + 1))
  fi
done <<'CASES'
.["/repos/acme/verifier/rules/branches/main"] |= map(select(.type != "pull_request"))~ruleset on main: no rule requires a pull request
.["/repos/acme/verifier/rules/branches/main"] |= map(select(.type != "required_status_checks"))~ruleset on main: the CI check .ci/run is not required
.["/repos/acme/verifier/rules/branches/main"] |= map(select(.type != "non_fast_forward"))~ruleset on main: force pushes to main are not blocked
.["/repos/acme/verifier/environments/regression-verifier-keeper"].can_admins_bypass = true~environment regression-verifier-keeper: administrators can bypass
.["/repos/acme/verifier/environments/regression-verifier-1/deployment-branch-policies"].branch_policies += [{"name": "*", "type": "branch"}]~environment regression-verifier-1: deployments are not limited
.["/repos/acme/verifier/actions/secrets"].secrets += [{"name": "REGRESSION_KEEPER_KEY"}]~REGRESSION_KEEPER_KEY stored at repository level
.["/repos/acme/verifier/actions/variables/REGRESSION_SECOND_VERIFIER"] = {"value": "0x22"}~environment regression-verifier-2 does not exist
CASES
check "preflight: the one-person profile still fails what protects the keys (a pull request, the CI check, force pushes, admin bypass, main-only environments, a repository-level key, a configured slot 2 without its environment)" \
  eval '((one_person_gaps == 0))'
run_script "${scripts}/preflight.sh" --profile solo
check "preflight: an unknown profile is a usage error" eval '((status == 2))'
set_routes "${one_person}"
REGRESSION_PROFILE=one-person gate
check "gate: with vars.REGRESSION_PROFILE=one-person, main without an approving review is signed" \
  eval '((status == 0)) && output_is proceed true'
gate
check "gate: without the profile the same main is refused (no approving review)" \
  eval '((status == 1)) && said "pull requests to main need no approving review" && ! output_is proceed true'

# --- key rotation with the real worker and signer ----------------------------------------
# Hardhat's well-known development accounts #0 and #1 (public test keys, never funded on a
# real network) stand for the old and the new verifier key; C is nobody's.
old=0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266
old_key=0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80
new=0x70997970c51812dc3a010c7d01b50e0d17dc79c8
new_key=0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d
other=0x2222222222222222222222222222222222222222
staging="${repo}/.work/script-tests-staging"
mkdir -p "${staging}"
if [[ -x "${worker_bin}" && -x "${signer_bin}" && -x "${bench_feed}" && -s "${images}" ]]; then
  mkdir -p "${tmp}/feed"
  # Job 1: {old}; 2: {new}; 3: {old, new} (threshold 2); 4: {old, C}.
  BENCH_FEED_VERIFIER_SETS="${old};${new};${old},${new};${old},${other}" \
    "${bench_feed}" "${repo}" "$(jq -r .busybox "${images}")" 4 "${tmp}/feed" 2>/dev/null &
  feed_pid=$!
  for _ in $(seq 100); do [[ -s "${tmp}/feed/base" ]] && break; sleep 0.1; done
  feed_base="$(cat "${tmp}/feed/base" 2>/dev/null)"
  job() { jq -r ".[$(($1 - 1))].job_id" "${tmp}/feed/all-jobs.json"; }
  phase() { # out verifier...
    local out="${tmp}/$1" v
    shift
    local args=(feed --api "${feed_base}" --archive-base "${feed_base}" --network base-mainnet
      --out "${out}" --staging-root "${staging}" --work-dir "${tmp}" --json)
    for v in "$@"; do args+=(--verifier "${v}"); done
    rm -rf "${out}"; mkdir -p "${out}"
    "${worker_bin}" "${args[@]}" > "${tmp}/$(basename "${out}").report.json" 2>/dev/null
  }
  candidates_of() { jq -r '[.candidates[].job_id] | sort | join(" ")' "${tmp}/$1/manifest.json" 2>/dev/null; }
  ids() { local n out=(); for n in "$@"; do out+=("$(job "${n}")"); done; printf '%s\n' "${out[@]}" | sort | paste -sd' '; }
  skipped_other() { jq -r '[.jobs[] | select(.reason_code == "other_verifier_set") | .job_id] | sort | join(" ")' "${tmp}/$1.report.json"; }

  phase before "${old}"; before_status=$?
  phase during "${old}" "${new}"; during_status=$?
  phase after "${new}"; after_status=$?
  check "rotation: old key only runs the old key's bounty; {old,new} and {old,C} are another quorum's (exit ${before_status})" \
    eval '((before_status == 0)) && [[ "$(candidates_of before)" == "$(ids 1)" && "$(skipped_other before)" == "$(ids 3 4)" ]]'
  check "rotation: both keys run the threshold-1 bounties of each key and the threshold-2 bounty of both; {old,C} is skipped (exit ${during_status})" \
    eval '((during_status == 0)) && [[ "$(candidates_of during)" == "$(ids 1 2 3)" && "$(skipped_other during)" == "$(ids 4)" ]]'
  check "rotation: new key only runs the new key's bounty; {old,new} needs the retired key (exit ${after_status})" \
    eval '((after_status == 0)) && [[ "$(candidates_of after)" == "$(ids 2)" && "$(skipped_other after)" == "$(ids 3)" ]]'

  # Each slot signs only what commits to its own key: the real signer over the "during" batch.
  # The RPC is a closed port, so every candidate that is its own ends unavailable (nothing is
  # signed here; sign_chain.rs signs against the real chain) and every other one is "not ours"
  # before any request.
  slot() { # name address key
    rm -rf "${tmp}/att-$1" "${tmp}/history-$1"
    "${signer_bin}" history init --history "${tmp}/history-$1" 2>/dev/null
    SLOT_KEY="$3" "${signer_bin}" sign --candidates "${tmp}/during" --api "${feed_base}" \
      --rpc http://127.0.0.1:9 --signer "$2" --key-env SLOT_KEY --out "${tmp}/att-$1" \
      --history "${tmp}/history-$1" --network base-mainnet --json > "${tmp}/slot-$1.json" 2>/dev/null
    echo $?
  }
  by_status() { jq -r --arg s "$2" '[.candidates[] | select(.status == $s) | .job_id] | sort | join(" ")' "${tmp}/slot-$1.json"; }
  one_status="$(slot one "${old}" "${old_key}")"
  two_status="$(slot two "${new}" "${new_key}")"
  check "rotation: slot 1 (old key) leaves the new key's bounty as not ours and attempts {old} and {old,new} (exit ${one_status})" \
    eval '[[ "$(by_status one not_ours)" == "$(ids 2)" && "$(by_status one unavailable)" == "$(ids 1 3)" ]]'
  check "rotation: slot 2 (new key) leaves the old key's bounty as not ours and attempts {new} and {old,new} (exit ${two_status})" \
    eval '[[ "$(by_status two not_ours)" == "$(ids 1)" && "$(by_status two unavailable)" == "$(ids 2 3)" ]]'

  # --- compatibility mode: what a reference relay reads, from our real outputs -------------
  run_script "${scripts}/reference-compat.sh" candidates "${tmp}/during"
  check "compat: the runner's candidates directory is what the reference relay reads (manifest.json, candidate-v1 files)" \
    eval '((status == 0)) && said "reference-compatible candidates: 3"'
  run_script "${scripts}/reference-compat.sh" attestations "${tmp}/att-one" "${old}"
  one_ok=${status}
  run_script "${scripts}/reference-compat.sh" attestations "${tmp}/att-two" "${new}"
  check "compat: each slot's directory has the manifest.json the reference relay reads, naming its signer" \
    eval '((one_ok == 0 && status == 0)) && [[ "$(jq -r .signer "${tmp}/att-one/manifest.json")" == "${old}" ]]'
  run_script "${scripts}/reference-compat.sh" attestations "${tmp}/att-one" "${new}"
  check "compat: a slot directory checked against the other slot's address is refused" \
    eval '((status == 1)) && said "does not name signer ${new}"'
  mkdir -p "${tmp}/bare" && cp "${tmp}/during"/candidate-*.json "${tmp}/bare/"
  run_script "${scripts}/reference-compat.sh" candidates "${tmp}/bare"
  check "compat: a directory without manifest.json is refused" eval '((status == 1)) && said "has no manifest.json"'
  jq '.candidates[0].file = "../x.json"' "${tmp}/during/manifest.json" > "${tmp}/bare/manifest.json"
  run_script "${scripts}/reference-compat.sh" candidates "${tmp}/bare"
  check "compat: a manifest entry naming a path outside the directory is refused" eval '((status == 1)) && said "not a file in the directory"'
  kill "${feed_pid}" 2>/dev/null; wait "${feed_pid}" 2>/dev/null; feed_pid=""
else
  echo "FAIL  rotation: needs ${worker_bin}, ${signer_bin}, ${bench_feed} and ${images}"
  failed=$((failed + 1))
fi

# The reference's artifact names, published in compatibility mode (docs/operations.md table).
workflows="$(dirname "${scripts}")/workflows"
check "compat: the runner publishes regression-candidates-<run id> and the signer regression-attestations-one/-two, only with REGRESSION_REFERENCE_COMPAT" \
  eval 'grep -qF "name: regression-candidates-\${{ github.run_id }}" "${workflows}/regression-verifier-runner.yml" && grep -qF "regression-attestations-\${{ matrix.slot == '"'"'1'"'"' && '"'"'one'"'"' || '"'"'two'"'"' }}" "${workflows}/regression-verifier-signer.yml" && [[ "$(grep -c "vars.REGRESSION_REFERENCE_COMPAT == '"'"'true'"'"'" "${workflows}/regression-verifier-runner.yml")" -ge 1 && "$(grep -c "vars.REGRESSION_REFERENCE_COMPAT == '"'"'true'"'"'" "${workflows}/regression-verifier-signer.yml")" -ge 2 ]]'

check_summary
