#!/usr/bin/env bash
# The checks are eval'd strings so a case reads as one line; they expand when they run.
# shellcheck disable=SC2016,SC2034
# Tests of the workflow scripts in .github/scripts, run by .ci/run: each script in the
# argument shapes the workflows use, against a local stand-in for the GitHub REST API and real
# GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files, with the real keeper binary where one runs.
#
#   .github/scripts/tests/run.sh [directory holding the built keeper, signer and worker]
#
# Prints one line per case and closes with "N passed, N failed".
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=.github/scripts/tests/harness.sh
source "${here}/harness.sh"
bin_dir="${1:-${repo}/target/debug}"
keeper_bin="${bin_dir}/keeper"
worker_bin="${bin_dir}/worker"

main_sha=1111111111111111111111111111111111111111
old_sha=2222222222222222222222222222222222222222

# --- signer gate ------------------------------------------------------------------------
gate() {
  RUN_CONCLUSION="${1}" RUN_EVENT="${2}" RUN_HEAD_BRANCH=main RUN_HEAD_SHA="${3}" \
    RUN_HEAD_REPOSITORY="${4:-acme/verifier}" REGRESSION_VERIFIER=0x1111111111111111111111111111111111111111 \
    REGRESSION_SECOND_VERIFIER="${SECOND_VERIFIER:-}" run_script "${scripts}/signer-gate.sh"
}
# main's rules as a ruleset that protects it (see main-protection.sh; setup.sh tests each gap).
protected_rules='[{"type": "deletion"}, {"type": "non_fast_forward"}, {"type": "pull_request", "parameters": {"required_approving_review_count": 1}}, {"type": "required_status_checks", "parameters": {"required_status_checks": [{"context": ".ci/run"}]}}]'
# A signing environment as the API reports it: deployments limited to the branch `main`.
env_routes() { # slot policy-json [branch-policies-json]
  printf '"/repos/acme/verifier/environments/regression-verifier-%s": {"name": "regression-verifier-%s", "protection_rules": [{"type": "branch_policy"}], "deployment_branch_policy": %s},
 "/repos/acme/verifier/environments/regression-verifier-%s/deployment-branch-policies?per_page=100": {"total_count": 1, "branch_policies": %s},' \
    "$1" "$1" "$2" "$1" "${3:-${main_branch_policy}}"
}
main_only='{"protected_branches": false, "custom_branch_policies": true}'
main_branch_policy='[{"name": "main", "type": "branch"}]'
gate_routes() { # extra routes
  printf '{%s "/repos/acme/verifier/rules/branches/main": %s, "/repos/acme/verifier/commits/main": {"sha": "%s"}}' \
    "${1:-$(env_routes 1 "${main_only}")}" "${protected_rules}" "${main_sha}" > "${routes}"
}
gate_routes

gate success schedule "${main_sha}"
check "gate: a scheduled run at main's head is signed" \
  eval '((status == 0)) && output_is proceed true && output_is head_sha '"${main_sha}"

gate success workflow_dispatch "${main_sha}"
check "gate: a dispatched run on main is signed too" eval '((status == 0)) && output_is proceed true'

gate success schedule "${old_sha}"
check "gate: main moved during the cycle is a green skip with a summary" \
  eval '((status == 0)) && output_is proceed false && grep -q "main has moved" "${summary_file}"'

gate failure schedule "${main_sha}"
check "gate: a failed runner run is not signed, without asking the API" \
  eval '((status == 0)) && output_is proceed false && [[ ! -s "${tmp}/requests.log" ]]'

gate success schedule "${main_sha}" evil/fork
check "gate: a run whose head repository is a fork fails the job" \
  eval '((status != 0)) && said "comes from evil/fork"'

echo '{}' > "${routes}"
gate success schedule "${main_sha}"
check "gate: an API that does not answer fails the job (no silent skip)" \
  eval '((status != 0)) && ! output_is proceed true'

# 22.8: environments fail closed. A job naming a missing environment gets it created on the
# spot, unprotected; one without a main-only deployment policy lets any branch read the key.
gate_routes " "
gate success schedule "${main_sha}"
check "gate: a signing environment that does not exist (GitHub would create it unprotected) refuses to sign" \
  eval '((status != 0)) && ! output_is proceed true && said "::error::environment regression-verifier-1"'

gate_routes "$(env_routes 1 null)"
gate success schedule "${main_sha}"
check "gate: a signing environment without a deployment branch policy refuses to sign" \
  eval '((status != 0)) && ! output_is proceed true && said "no deployment branch policy"'

gate_routes "$(env_routes 1 "${main_only}" '[{"name": "main", "type": "branch"}, {"name": "*", "type": "branch"}]')"
gate success schedule "${main_sha}"
check "gate: a deployment policy admitting another branch (\"*\") refuses to sign" \
  eval '((status != 0)) && ! output_is proceed true && said "admits"'

gate_routes "$(env_routes 1 '{"protected_branches": true, "custom_branch_policies": false}')"
gate success schedule "${main_sha}"
check "gate: \"protected branches\" (any protected branch may deploy) refuses to sign" \
  eval '((status != 0)) && ! output_is proceed true'

gate_routes
gate success schedule "${main_sha}"
check "gate: slot 2 with no address is not a slot: its environment is neither checked nor deployed (slots [\"1\"])" \
  eval '((status == 0)) && output_is proceed true && output_is slots "[\"1\"]" && ! grep -q "regression-verifier-2" "${tmp}/requests.log"'

gate_routes "$(env_routes 1 "${main_only}") $(env_routes 2 "${main_only}")"
SECOND_VERIFIER=0x2222222222222222222222222222222222222222 gate success schedule "${main_sha}"
check "gate: two configured slots, both environments main-only: signed by both (slots [\"1\",\"2\"])" \
  eval '((status == 0)) && output_is proceed true && output_is slots "[\"1\",\"2\"]"'

gate_routes
SECOND_VERIFIER=0x2222222222222222222222222222222222222222 gate success schedule "${main_sha}"
check "gate: slot 2 configured but its environment missing refuses to sign" \
  eval '((status != 0)) && said "::error::environment regression-verifier-2"'

# --- REST budget: backoff on 429 / 403 rate limit / 5xx, bounded ------------------------
seq_route() { # responses... (JSON each)
  local IFS=,
  printf '{%s "/repos/acme/verifier/rules/branches/main": %s, "/repos/acme/verifier/commits/main": {"@sequence": [%s]}}' \
    "$(env_routes 1 "${main_only}")" "${protected_rules}" "$*" > "${routes}"
}
main_ok="{\"sha\": \"${main_sha}\"}"
requests_made() { grep -c "commits/main" "${tmp}/requests.log"; }

seq_route '{"@status": 429, "@headers": {"Retry-After": "1"}}' "${main_ok}"
gate success schedule "${main_sha}"
check "api: a 429 with Retry-After is retried after the wait and then answered (2 requests)" \
  eval '((status == 0)) && output_is proceed true && [[ "$(requests_made)" == 2 ]] && said "429"'

seq_route '{"@status": 403, "@headers": {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "@now+1"}, "@body": {"message": "API rate limit exceeded"}}' "${main_ok}"
gate success schedule "${main_sha}"
check "api: a 403 rate limit (x-ratelimit-remaining 0) waits for x-ratelimit-reset and is retried" \
  eval '((status == 0)) && output_is proceed true && [[ "$(requests_made)" == 2 ]]'

seq_route '{"@status": 403, "@headers": {"Retry-After": "1"}, "@body": {"message": "You have exceeded a secondary rate limit"}}' "${main_ok}"
gate success schedule "${main_sha}"
check "api: a 403 secondary rate limit with Retry-After is retried" \
  eval '((status == 0)) && output_is proceed true && [[ "$(requests_made)" == 2 ]]'

seq_route '{"@status": 502}' '{"@status": 503}' "${main_ok}"
API_RETRY_BASE_SECONDS=0 gate success schedule "${main_sha}"
check "api: 502 then 503 then 200 is answered (5xx retried with backoff)" \
  eval '((status == 0)) && output_is proceed true && [[ "$(requests_made)" == 3 ]]'

seq_route '{"@status": 500}'
API_RETRY_BASE_SECONDS=0 gate success schedule "${main_sha}"
check "api: a 5xx that never ends fails the job after a bounded number of attempts (4)" \
  eval '((status != 0)) && ! output_is proceed true && [[ "$(requests_made)" == 4 ]]'

seq_route '{"@status": 403, "@body": {"message": "Resource not accessible by integration"}}' "${main_ok}"
gate success schedule "${main_sha}"
check "api: a 403 that is not a rate limit (permissions) is not retried" \
  eval '((status != 0)) && [[ "$(requests_made)" == 1 ]]'

seq_route '{"@status": 403, "@headers": {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "@now+3600"}}' "${main_ok}"
gate success schedule "${main_sha}"
check "api: a rate limit that resets beyond the wait bound fails at once with the reset time, no hour-long sleep" \
  eval '((status != 0)) && [[ "$(requests_made)" == 1 ]] && said "rate limit"'

# --- keeper state restore ---------------------------------------------------------------
runs_path='/repos/acme/verifier/actions/workflows/regression-verifier-keeper.yml/runs?branch=main&status=completed&per_page=100&page=1'
run() { # id created head_branch head_repo
  printf '{"id": %s, "created_at": "%s", "head_branch": "%s", "head_repository": {"full_name": "%s"}, "repository": {"full_name": "acme/verifier"}}' "$@"
}
artifacts() { # expired
  printf '{"artifacts": [{"name": "regression-keeper-state", "expired": %s}]}' "$1"
}
cat > "${routes}" <<JSON
{
  "${runs_path}": {"workflow_runs": [
    $(run 40 2026-11-30T10:00:00Z main acme/verifier),
    $(run 41 2026-11-30T11:00:00Z main acme/verifier),
    $(run 42 2026-11-30T12:00:00Z main evil/fork),
    $(run 43 2026-11-30T13:00:00Z feature acme/verifier),
    $(run 44 2026-11-30T14:00:00Z main acme/verifier)
  ]},
  "/repos/acme/verifier/actions/runs/44/artifacts?name=regression-keeper-state": $(artifacts true),
  "/repos/acme/verifier/actions/runs/43/artifacts?name=regression-keeper-state": $(artifacts false),
  "/repos/acme/verifier/actions/runs/42/artifacts?name=regression-keeper-state": $(artifacts false),
  "/repos/acme/verifier/actions/runs/41/artifacts?name=regression-keeper-state": $(artifacts false),
  "/repos/acme/verifier/actions/runs/40/artifacts?name=regression-keeper-state": $(artifacts false)
}
JSON
GITHUB_RUN_ID=99 run_script "${scripts}/find-previous-artifact.sh"
check "state: the newest unexpired state of a keeper run on main wins (expired, fork and branch runs skipped)" \
  eval '((status == 0)) && output_is run_id 41'
check "state: the fork's and the branch's artifacts are never even listed" \
  eval '! grep -q "runs/42/\|runs/43/" "${tmp}/requests.log"'
check "state: the artifacts search is scoped to the keeper workflow, not the repository" \
  eval '! grep -q "^/repos/acme/verifier/actions/artifacts" "${tmp}/requests.log"'

cat > "${routes}" <<JSON
{"${runs_path}": {"workflow_runs": [$(run 44 2026-11-30T14:00:00Z main acme/verifier)]},
 "/repos/acme/verifier/actions/runs/44/artifacts?name=regression-keeper-state": $(artifacts true)}
JSON
GITHUB_RUN_ID=99 run_script "${scripts}/find-previous-artifact.sh"
check "state: only expired artifacts means starting from no state, not a failed run" \
  eval '((status == 0)) && output_is run_id ""'

# 34 keeper runs in a row that failed before their restore step (no state uploaded) in front
# of the last run that kept the state: the state must still be found, not silently dropped.
state_routes() { # runs-total newest-without-state [conclusion of the others]
  python3 - "$1" "$2" "${3:-failure}" > "${routes}" <<'PY'
import json, sys
total, without, conclusion = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
base = "/repos/acme/verifier/actions/workflows/regression-verifier-keeper.yml/runs?branch=main&status=completed"
runs = [{"id": 100 + k, "created_at": f"2026-11-{1 + k // 24:02d}T{k % 24:02d}:00:00Z",
         "head_branch": "main", "event": "workflow_run", "conclusion": "success" if k < total - without else conclusion,
         "head_repository": {"full_name": "acme/verifier"}, "repository": {"full_name": "acme/verifier"}}
        for k in range(total)]
newest_first = list(reversed(runs))
routes = {base + "&per_page=30": {"workflow_runs": newest_first[:30]}}
for page in range(1, 11):
    routes[base + f"&per_page=100&page={page}"] = {"workflow_runs": newest_first[(page - 1) * 100:page * 100]}
for k, run in enumerate(runs):
    has_state = k < total - without
    routes[f"/repos/acme/verifier/actions/runs/{run['id']}/artifacts?name=regression-keeper-state"] = {
        "artifacts": [{"name": "regression-keeper-state", "expired": False}] if has_state else []}
print(json.dumps(routes))
PY
}
state_routes 35 34
REQUIRED=true GITHUB_RUN_ID=99 run_script "${scripts}/find-previous-artifact.sh"
check "state: 34 runs that failed before restoring do not hide the state of the run before them" \
  eval '((status == 0)) && output_is run_id 100'

state_routes 40 40
REQUIRED=true GITHUB_RUN_ID=99 run_script "${scripts}/find-previous-artifact.sh"
check "state: earlier keeper runs but no state in any of them fails red instead of starting empty" \
  eval '((status == 1)) && said "::error::" && said "keeper status" && ! grep -q "^run_id=" "${out_file}"'

REQUIRED=true ALLOW_EMPTY=true GITHUB_RUN_ID=99 run_script "${scripts}/find-previous-artifact.sh"
check "state: REGRESSION_KEEPER_ALLOW_EMPTY_STATE starts empty, with a warning" \
  eval '((status == 0)) && output_is run_id "" && said "::warning::"'

state_routes 3 3 skipped
REQUIRED=true GITHUB_RUN_ID=99 run_script "${scripts}/find-previous-artifact.sh"
check "state: the first runs ever (earlier ones only skipped) start empty" \
  eval '((status == 0)) && output_is run_id ""'

# The runner's result cache: the same rule (its own workflow's runs on main only), its own
# workflow and artifact name; optional and bounded (#51 item 5).
cache_runs_path='/repos/acme/verifier/actions/workflows/regression-verifier-runner.yml/runs?branch=main&status=completed&per_page=100'
cache_artifacts_path='/repos/acme/verifier/actions/artifacts?name=regression-runner-cache&per_page=100'
cache_artifact() { # run-id created expired
  printf '{"name": "regression-runner-cache", "expired": %s, "created_at": "%s", "workflow_run": {"id": %s}}' "$3" "$2" "$1"
}
find_cache() {
  OPTIONAL=true WORKFLOW=regression-verifier-runner.yml ARTIFACT=regression-runner-cache GITHUB_RUN_ID=99 \
    run_script "${scripts}/find-previous-artifact.sh"
}
cat > "${routes}" <<JSON
{
  "${cache_runs_path}": {"workflow_runs": [
    $(run 50 2026-11-30T10:00:00Z main acme/verifier),
    $(run 51 2026-11-30T11:00:00Z main evil/fork)
  ]},
  "${cache_artifacts_path}": {"artifacts": [$(cache_artifact 51 2026-11-30T11:05:00Z false), $(cache_artifact 52 2026-11-30T12:05:00Z false), $(cache_artifact 50 2026-11-30T10:05:00Z false)]}
}
JSON
find_cache
check "runner cache: restored only from the runner's own runs on main (the fork's newer one and another workflow's are skipped)" \
  eval '((status == 0)) && output_is run_id 50 && ! grep -q "runs/51/\|runs/52/" "${tmp}/requests.log"'

# After an outage: 98 runs on main without a cache (each failed before uploading one) in front
# of the last one that kept it. The lookup is two requests, not a walk of one per run.
python3 - "${cache_runs_path}" "${cache_artifacts_path}" > "${routes}" <<'PY'
import json, sys
runs_path, artifacts_path = sys.argv[1:3]
runs = [{"id": 1000 + k, "created_at": f"2026-11-30T{k // 60:02d}:{k % 60:02d}:00Z", "head_branch": "main",
         "event": "schedule", "conclusion": "failure" if k else "success",
         "head_repository": {"full_name": "acme/verifier"}, "repository": {"full_name": "acme/verifier"}} for k in range(99)]
# Also under the page-numbered target a walk asks for, so a walk is seen walking.
routes = {runs_path: {"workflow_runs": list(reversed(runs))}, runs_path + "&page=1": {"workflow_runs": list(reversed(runs))},
          artifacts_path: {"artifacts": [{"name": "regression-runner-cache", "expired": False,
                                          "created_at": "2026-11-30T00:00:30Z", "workflow_run": {"id": 1000}}]}}
for run in runs:
    routes[f"/repos/acme/verifier/actions/runs/{run['id']}/artifacts?name=regression-runner-cache"] = {
        "artifacts": [{"name": "regression-runner-cache", "expired": False}] if run["id"] == 1000 else []}
print(json.dumps(routes))
PY
find_cache
check "runner cache: 98 runs without a cache after an outage cost 2 requests, not one per run, and the cache before them is found ($(wc -l < "${tmp}/requests.log") requests)" \
  eval '((status == 0)) && output_is run_id 1000 && [[ "$(wc -l < "${tmp}/requests.log")" == 2 ]]'

# Optional: the cache is worth a few minutes, not the batch. An API that does not answer is a
# warning and no cache, never a failed step.
echo '{}' > "${routes}"
API_MAX_ATTEMPTS=1 find_cache
check "runner cache: an API that does not answer is a warning and no cache, not a failed step" \
  eval '((status == 0)) && output_is run_id "" && said "::warning::no regression-runner-cache restored"'

# --- keeper relay -----------------------------------------------------------------------
relay_input="${tmp}/input"
mkdir -p "${relay_input}/candidates"
relay() {
  INPUT="${relay_input}" STATE_DIR="${tmp}/state" REPORT="${tmp}/report.json" KEEPER_BIN="${keeper_bin}" \
    API_URL="http://127.0.0.1:9" RPC_URL="http://127.0.0.1:9" run_script "${scripts}/keeper-relay.sh"
}
relay
check "relay: no attestation artifacts ends green without starting the keeper" \
  eval '((status == 0)) && said "nothing to relay" && [[ ! -e "${tmp}/report.json" ]]'

mkdir -p "${relay_input}/attestations/regression-attestations-1"
echo '{"schema": "agent-bounties/regression-attestation-manifest-v1", "attestations": []}' \
  > "${relay_input}/attestations/regression-attestations-1/attestation-manifest.json"
relay
check "relay: a slot that signed nothing (manifest only) is nothing to relay; the RPC is not touched" \
  eval '((status == 0)) && said "nothing to relay"'

# #43 item 2: a comma-separated RPC_URL reaches the keeper as one `--rpc` per endpoint, in
# order (a stand-in keeper records its arguments; the real one's failover is tested in Rust).
echo '{}' > "${relay_input}/attestations/regression-attestations-1/attestation-00-11.json"
cat > "${tmp}/argv-keeper" <<'SH'
#!/usr/bin/env bash
printf '%s\n' "$@" > "${ARGV_OUT}"
SH
chmod +x "${tmp}/argv-keeper"
INPUT="${relay_input}" STATE_DIR="${tmp}/state" REPORT="${tmp}/report.json" KEEPER_BIN="${tmp}/argv-keeper" \
  ARGV_OUT="${tmp}/argv" API_URL="http://127.0.0.1:9" RPC_URL="http://127.0.0.1:9, http://127.0.0.1:8545,," \
  run_script "${scripts}/keeper-relay.sh"
check "relay: RPC_URL 'a, b,,' is passed as --rpc a --rpc b, in order, blanks dropped" \
  eval '((status == 0)) && [[ "$(tr "\n" " " < "${tmp}/argv")" == *"--api http://127.0.0.1:9 --rpc http://127.0.0.1:9 --rpc http://127.0.0.1:8545 --key-env "* ]]'

if [[ -x "${keeper_bin}" ]]; then
  echo '{}' > "${relay_input}/attestations/regression-attestations-1/attestation-00-11.json"
  # Hardhat's well-known dev account #3 (public test key): the keeper gets past its key check
  # and reaches the (closed) RPC port, which must fail the job.
  REGRESSION_KEEPER_KEY=0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a relay
  check "relay: with attestations the real keeper runs in the workflow's argument shape; an RPC outage fails the job" \
    eval '((status == 5)) && said "keeper relay exited with 5"'
else
  echo "FAIL  relay: the keeper binary ${keeper_bin} is not built"
  failed=$((failed + 1))
fi

# --- the RPC endpoint list (#43 item 2) ------------------------------------------------------
# REGRESSION_VERIFIER_RPC_URL is one URL or an ordered, comma-separated list; the signer's Sign
# step and the keeper's steps hand it to their binary as one --rpc per entry. The steps run as
# the workflow files write them (workflow_step.py evaluates their env, the run script is the
# file's own), in a workspace holding this checkout's scripts and stand-in binaries that record
# their arguments (the real binaries' failover is tested in Rust).
workflows="$(cd "${scripts}/../workflows" && pwd)"
rpc_ws="${tmp}/rpc-ws"
mkdir -p "${rpc_ws}/.github" "${rpc_ws}/bin"
ln -s "${scripts}" "${rpc_ws}/.github/scripts"
# `keeper status` exits 3 (records open), so the Resume step goes on to `keeper resume`.
cat > "${rpc_ws}/bin/signer" <<'SH'
#!/usr/bin/env bash
[[ "$1" == status ]] && exit 3
printf '%s\n' "$@" > "${ARGV_OUT}"
SH
cp "${rpc_ws}/bin/signer" "${rpc_ws}/bin/keeper"
chmod +x "${rpc_ws}/bin/signer" "${rpc_ws}/bin/keeper"
# Runs one step with the secret and the variable REGRESSION_VERIFIER_RPC_URL set to $4 and $5
# (empty: unset); leaves each --rpc value the binary got, one per line, in rpc_seen.
rpc_step() { # workflow job step-name secret variable
  local env_file="${tmp}/rpc-step.env" run_file="${tmp}/rpc-step.run"
  local -a env_args=()
  jq -n --arg s "$4" --arg v "$5" '{
    secrets: {REGRESSION_VERIFIER_RPC_URL: $s, REGRESSION_VERIFIER_KEY: "0xkey", REGRESSION_KEEPER_KEY: "0xkey"},
    vars: {REGRESSION_VERIFIER_RPC_URL: $v, REGRESSION_VERIFIER: "0x1111111111111111111111111111111111111111",
           REGRESSION_VERIFIER_API_URL: "https://api.example"},
    matrix: {slot: "1"}, steps: {history: {outcome: "success"}}}' > "${tmp}/rpc-context.json"
  rm -f "${tmp}/argv"
  rpc_seen=""
  python3 "${here}/workflow_step.py" "${workflows}/$1" "$2" "$3" "${tmp}/rpc-context.json" "${env_file}" "${run_file}" || { status=99; return; }
  mapfile -t env_args < "${env_file}"
  run_script env -C "${rpc_ws}" "${env_args[@]}" ARGV_OUT="${tmp}/argv" bash -e "${run_file}"
  [[ -f "${tmp}/argv" ]] && rpc_seen="$(awk 'previous == "--rpc" { print } { previous = $0 }' "${tmp}/argv")"
}
# keeper-relay.sh (the keeper's Relay step) with RPC_URL=$1, its binary the same stand-in.
rpc_relay() {
  rm -f "${tmp}/argv"
  rpc_seen=""
  INPUT="${relay_input}" STATE_DIR="${tmp}/state" REPORT="${tmp}/report.json" KEEPER_BIN="${rpc_ws}/bin/keeper" \
    ARGV_OUT="${tmp}/argv" API_URL="http://127.0.0.1:9" RPC_URL="$1" run_script "${scripts}/keeper-relay.sh"
  [[ -f "${tmp}/argv" ]] && rpc_seen="$(awk 'previous == "--rpc" { print } { previous = $0 }' "${tmp}/argv")"
}
odd_url='https://rpc.example/v2/k3y?a=1&b=*;c=$HOME%20`id`\n#frag'
for where in "regression-verifier-signer.yml sign Sign" \
  "regression-verifier-keeper.yml relay Resume open records without candidates"; do
  read -r rpc_workflow rpc_job rpc_step_name <<<"${where}"
  label="${rpc_workflow%.yml}: ${rpc_step_name}"
  rpc_step "${rpc_workflow}" "${rpc_job}" "${rpc_step_name}" "https://a.example/k1, https://b.example/k2 ,,https://c.example" ""
  check "${label}: a list reaches the binary as one --rpc each, in order, blanks around commas and empty entries dropped" \
    eval '((status == 0)) && [[ "${rpc_seen}" == $'"'"'https://a.example/k1\nhttps://b.example/k2\nhttps://c.example'"'"' ]]'
  rpc_step "${rpc_workflow}" "${rpc_job}" "${rpc_step_name}" "" "https://rpc.example/v2/KEY"
  check "${label}: one URL (the variable, no secret) is exactly one --rpc, as before lists existed" \
    eval '((status == 0)) && [[ "${rpc_seen}" == "https://rpc.example/v2/KEY" ]] && [[ "$(grep -c -- "^--rpc$" "${tmp}/argv")" == 1 ]]'
  rpc_step "${rpc_workflow}" "${rpc_job}" "${rpc_step_name}" "https://secret.example" "https://variable.example"
  check "${label}: the secret wins over the variable" eval '((status == 0)) && [[ "${rpc_seen}" == "https://secret.example" ]]'
  rpc_step "${rpc_workflow}" "${rpc_job}" "${rpc_step_name}" "" ""
  check "${label}: neither set is the default https://mainnet.base.org" \
    eval '((status == 0)) && [[ "${rpc_seen}" == "https://mainnet.base.org" ]]'
  rpc_step "${rpc_workflow}" "${rpc_job}" "${rpc_step_name}" " , ,, " ""
  check "${label}: a list of blanks and commas alone is the default too, not a binary run without --rpc" \
    eval '((status == 0)) && [[ "${rpc_seen}" == "https://mainnet.base.org" ]]'
  rpc_step "${rpc_workflow}" "${rpc_job}" "${rpc_step_name}" "${odd_url}" ""
  check "${label}: a URL with no comma but odd characters (\$, \`, *, ?, &, ;, %, #, a backslash) is passed intact" \
    eval '((status == 0)) && [[ "${rpc_seen}" == "${odd_url}" ]]'
  rpc_step "${rpc_workflow}" "${rpc_job}" "${rpc_step_name}" "https://a.example/x y" ""
  check "${label}: a blank inside an entry is kept (the binary refuses the URL; glued, a typo would reach another endpoint)" \
    eval '((status == 0)) && [[ "${rpc_seen}" == "https://a.example/x y" ]]'
done
rpc_relay $'\thttps://a.example ,\n https://b.example\n'
check "relay: tabs and newlines around entries (a pasted secret) are dropped; order kept" \
  eval '((status == 0)) && [[ "${rpc_seen}" == $'"'"'https://a.example\nhttps://b.example'"'"' ]]'
rpc_relay ""
check "relay: an empty RPC_URL is the default https://mainnet.base.org" \
  eval '((status == 0)) && [[ "${rpc_seen}" == "https://mainnet.base.org" ]]'
rpc_relay "${odd_url}"
check "relay: a URL with odd characters is passed intact" eval '((status == 0)) && [[ "${rpc_seen}" == "${odd_url}" ]]'

# --- runner judge -----------------------------------------------------------------------
feed_report() { # fetch_failures jobs
  printf '{"schema_version": "agent-bounties/regression-feed-report-v1", "network": "base-mainnet", "verifiers": [], "fetch_failures": %s, "jobs": %s, "runtime_unavailable": 0, "executed": 0}' "$1" "$2" > "${tmp}/feed-report.json"
}
job() { # id status reason_code
  printf '{"job_id": "%s", "status": "%s", "reason_code": %s, "reason": "r", "reused_from_cache": false}' "$1" "$2" "$3"
}
judge() { run_script "${scripts}/runner-judge.sh" "$1" "${tmp}/feed-report.json"; }

feed_report '[]' "[$(job a completed_passed null), $(job b completed_failed null), $(job c no_verdict '"timeout"')]"
judge 3
check "runner: verdicts plus a solver's timeout is green, with counts in the summary and a warning" \
  eval '((status == 0)) && grep -q "| no_verdict | 1 |" "${summary_file}" && said "::warning::job c"'

feed_report '[{"verifier": "0x11", "kind": "http", "message": "connection refused", "transient": true}]' '[]'
judge 3
check "runner: a platform API that never answered fails the run (exit 3 is not enough)" \
  eval '((status == 1)) && said "::error::the platform API failed"'

# One bounty's fault must not stop the batch: nine verdicts and one job whose image its author
# never pushed is a green run (a warning and a summary row), so the nine get signed.
nine_verdicts=""
for k in 1 2 3 4 5 6 7 8 9; do nine_verdicts+="$(job "v${k}" completed_passed null), "; done
feed_report '[]' "[${nine_verdicts}$(job bad no_verdict '"image_missing"')]"
judge 3
check "runner: nine verdicts and one image_missing stay green (a warning and a summary row); one bounty's fault does not stop the batch" \
  eval '((status == 0)) && said "::warning::job bad: no verdict (image_missing)" && grep -q "| bad | image_missing |" "${summary_file}" && ! said "::error::"'

# Every reason that belongs to the bounty author or to the job, one at a time beside a verdict.
per_job_red=""
for pair in no_verdict:image_missing no_verdict:image_platform_mismatch no_verdict:start_failed \
  no_verdict:invalid_job no_verdict:expired rejected:expired error:download_http error:download_timeout error:extract_failed; do
  feed_report '[]' "[$(job ok completed_passed null), $(job j "${pair%%:*}" "\"${pair#*:}\"")]"
  judge 3
  if ((status != 0)) || said "::error::"; then per_job_red+=" ${pair}"; fi
done
check "runner: per-job reasons (image_missing, image_platform_mismatch, start_failed, invalid_job, expired, a transient archive error) are warnings, not a failed run${per_job_red:+ (red:${per_job_red})}" \
  eval '[[ -z "${per_job_red}" ]]'

# What says this runner cannot work stays red even beside verdicts.
runner_green=""
for pair in no_verdict:runtime_unavailable no_verdict:isolation_mismatch no_verdict:create_failed \
  no_verdict:externally_stopped no_verdict:internal_error no_verdict:input_mismatch no_verdict:image_digest_mismatch \
  error:runtime_unavailable error:executor_error error:scratch_failed error:digest_mismatch error:missing_evidence error:internal; do
  feed_report '[]' "[$(job ok completed_passed null), $(job j "${pair%%:*}" "\"${pair#*:}\"")]"
  judge 3
  if ((status != 1)) || ! said "::error::job j: ${pair#*:}"; then runner_green+=" ${pair}"; fi
done
check "runner: whole-runner reasons (runtime_unavailable, isolation_mismatch, create_failed, internal errors, …) fail the run even beside verdicts${runner_green:+ (green:${runner_green})}" \
  eval '[[ -z "${runner_green}" ]]'

# Every job failing the same per-job way looks like the runner (the registry or the archive
# host unreachable from here), not like every bounty author at once.
# Judged over the whole run (--run, every shard's report; here a run of one shard): a shard's
# own judge only warns, since it cannot tell one author's bounties from the runner (#51 item 4).
judge_run() { run_script "${scripts}/runner-judge.sh" --run "${tmp}/feed-report.json"; }
feed_report '[]' "[$(job a no_verdict '"image_missing"'), $(job b no_verdict '"image_missing"'), $(job c no_verdict '"image_missing"')]"
judge 3
shard_status="${status}"; shard_warned=false; said "::warning::every job of this shard ended image_missing" && shard_warned=true
judge_run
check "runner: every job of the run failing the same way (3 x image_missing) fails the run's judge; the shard's own judge only warns" \
  eval '((status == 1)) && said "::error::every job of the run (3, in 1 shard(s)) ended image_missing" && ((shard_status == 0)) && ${shard_warned}'

feed_report '[]' "[$(job a error '"download_http"'), $(job b error '"download_http"')]"
judge_run
check "runner: every job failing with the same archive error fails the run" \
  eval '((status == 1)) && said "every job of the run (2, in 1 shard(s)) ended download_http"'

# The platform serves its other verification mode's jobs (deterministic_module) to every
# verifier; the worker skips them (#41 item 4). A skip is never a failure, and skipped rows do
# not hide a batch whose every job that ran failed the same way.
feed_report '[]' "[$(job m1 skipped '"other_verification_mode"'), $(job m2 skipped '"other_verification_mode"')]"
judge 0
check "runner: a batch of two jobs skipped as another verification mode (other_verification_mode) is green, without a warning" \
  eval '((status == 0)) && ! said "::error::" && ! said "::warning::" && grep -q "| skipped | 2 |" "${summary_file}"'

feed_report '[]' "[$(job m1 skipped '"other_verification_mode"'), $(job a no_verdict '"image_missing"'), $(job m2 skipped '"other_verification_mode"'), $(job b no_verdict '"image_missing"')]"
judge_run
check "runner: every job that ran failing the same way (2 x image_missing) fails the run, skipped jobs of another mode beside them or not" \
  eval '((status == 1)) && said "::error::every job of the run (2, in 1 shard(s)) ended image_missing"'

feed_report '[]' "[$(job a no_verdict '"image_missing"')]"
judge_run
run_status="${status}"
judge 3
check "runner: a batch of one job whose image is missing is a warning (one bounty), not a failed run" \
  eval '((status == 0 && run_status == 0)) && said "::warning::job a: no verdict (image_missing)"'

feed_report '[]' "[$(job a completed_passed null)]"
jq '.runtime_unavailable = 1' "${tmp}/feed-report.json" > "${tmp}/r.json" && mv "${tmp}/r.json" "${tmp}/feed-report.json"
judge 3
check "runner: a report counting runtime_unavailable fails the run" eval '((status == 1)) && said "runtime_unavailable"'

feed_report '[]' '[]'
judge 5
check "runner: an unreachable engine fails the run" eval '((status == 1)) && said "exited with 5"'

: > "${tmp}/feed-report.json"
judge 1
check "runner: no report fails the run" eval '((status == 1)) && said "no readable report"'

if [[ -x "${worker_bin}" ]]; then
  # The real worker against a platform API that does not answer: it exits 3 with an empty
  # batch, which the old workflow accepted as success.
  feed_status=0
  "${worker_bin}" feed --api http://127.0.0.1:9 --network base-mainnet \
    --verifier 0x1111111111111111111111111111111111111111 --out "${tmp}/candidates" \
    --staging-root "${tmp}/staging" --work-dir "${tmp}" --json \
    > "${tmp}/feed-report.json" 2>/dev/null || feed_status=$?
  judge "${feed_status}"
  check "runner: the real worker's report of an API outage (exit ${feed_status}) fails the run" \
    eval '((feed_status == 3 && status == 1)) && said "::error::the platform API failed"'
else
  echo "FAIL  runner: the worker binary ${worker_bin} is not built"
  failed=$((failed + 1))
fi

# --- fetch binaries (build once, verify everywhere) ------------------------------------
build_runs_path="/repos/acme/verifier/actions/workflows/regression-verifier-build.yml/runs?branch=main&head_sha=${main_sha}&status=success&per_page=20"
build_run() { # id event head_branch head_repo head_sha
  printf '{"id": %s, "created_at": "2026-11-30T1%s:00:00Z", "event": "%s", "head_branch": "%s", "conclusion": "success", "head_sha": "%s", "head_repository": {"full_name": "%s"}, "repository": {"full_name": "acme/verifier"}}' \
    "$1" "${1: -1}" "$2" "$3" "$5" "$4"
}
binaries_artifact() { # id expired
  printf '{"artifacts": [{"id": %s, "name": "regression-binaries", "expired": %s}]}' "$1" "$2"
}
# An artifact as the build workflow uploads it: the binaries, SHA256SUMS and COMMIT, zipped.
make_artifact() { # zip commit binaries...
  local zip="$1" commit="$2"; shift 2
  local dir="${tmp}/artifact-src"
  rm -rf "${dir}" "${zip}"; mkdir -p "${dir}"
  for b in "$@"; do cp "${bin_dir}/${b}" "${dir}/${b}"; done
  (cd "${dir}" && sha256sum "$@" > SHA256SUMS && echo "${commit}" > COMMIT && zip -q "${zip}" ./*)
}
fetch() { # binaries...
  rm -rf "${tmp}/fetched"
  COMMIT="${main_sha}" DEST="${tmp}/fetched" VERIFY_ATTESTATION=0 run_script "${scripts}/fetch-binaries.sh" "$@"
}
ci_runs_path="/repos/acme/verifier/actions/workflows/ci.yml/runs?branch=main&event=push&head_sha=${main_sha}&status=success&per_page=20"
ci_run() { # event head_branch head_repo conclusion
  printf '{"id": 60, "event": "%s", "head_branch": "%s", "conclusion": "%s", "head_sha": "%s", "path": ".github/workflows/ci.yml", "head_repository": {"full_name": "%s"}, "repository": {"full_name": "acme/verifier"}}' \
    "$1" "$2" "$4" "${main_sha}" "$3"
}
ci_runs="$(ci_run push main acme/verifier success)"
binaries_routes() { # runs-json artifacts-of-run-71 [zip]
  cat > "${routes}" <<JSON
{"${ci_runs_path}": {"workflow_runs": [${ci_runs}]},
 "${build_runs_path}": {"workflow_runs": [$1]},
 "/repos/acme/verifier/actions/runs/71/artifacts?name=regression-binaries": $2,
 "/repos/acme/verifier/actions/runs/72/artifacts?name=regression-binaries": $(binaries_artifact 902 false),
 "/repos/acme/verifier/actions/artifacts/901/zip": {"@file": "${3:-${tmp}/good.zip}"},
 "/repos/acme/verifier/actions/artifacts/902/zip": {"@file": "${tmp}/good.zip"}}
JSON
}
if [[ -x "${keeper_bin}" && -x "${worker_bin}" ]]; then
  make_artifact "${tmp}/good.zip" "${main_sha}" keeper worker
  # Compared with the bytes zipped, not target/ (another build may replace those meanwhile).
  rm -rf "${tmp}/good-src"; cp -r "${tmp}/artifact-src" "${tmp}/good-src"
  binaries_routes "$(build_run 71 push main acme/verifier "${main_sha}")" "$(binaries_artifact 901 false)"
  fetch keeper worker
  check "binaries: the build of this exact main commit is downloaded, checked and installed" \
    eval '((status == 0)) && cmp -s "${tmp}/fetched/keeper" "${tmp}/good-src/keeper" && cmp -s "${tmp}/fetched/worker" "${tmp}/good-src/worker" && [[ -x "${tmp}/fetched/keeper" ]] && grep -q "sha256" "${summary_file}"'

  # Tampered: the keeper's bytes changed after the build summed them.
  make_artifact "${tmp}/tampered.zip" "${main_sha}" keeper worker
  (cd "${tmp}/artifact-src" && printf 'x' >> keeper && rm -f "${tmp}/tampered.zip" && zip -q "${tmp}/tampered.zip" ./*)
  binaries_routes "$(build_run 71 push main acme/verifier "${main_sha}")" "$(binaries_artifact 901 false)" "${tmp}/tampered.zip"
  fetch keeper worker
  check "binaries: a tampered binary fails closed and nothing is installed" \
    eval '((status != 0)) && said "keeper does not match its SHA-256" && [[ ! -e "${tmp}/fetched" ]]'

  # One byte of the worker replaced in place (same size, so no length check could catch it),
  # after SHA256SUMS was written (issue #49 item 3).
  make_artifact "${tmp}/flipped.zip" "${main_sha}" keeper worker
  (cd "${tmp}/artifact-src" && offset=$(($(stat -c %s worker) / 2)) &&
    byte="$(od -An -tu1 -j "${offset}" -N1 worker | tr -d ' ')" &&
    printf '%b' "\\$(printf '%03o' $(((byte + 1) % 256)))" | dd of=worker bs=1 seek="${offset}" conv=notrunc status=none &&
    rm -f "${tmp}/flipped.zip" && zip -q "${tmp}/flipped.zip" ./*)
  binaries_routes "$(build_run 71 push main acme/verifier "${main_sha}")" "$(binaries_artifact 901 false)" "${tmp}/flipped.zip"
  fetch keeper worker
  check "binaries: a worker with one byte changed fails closed and nothing is installed, not even the keeper" \
    eval '((status != 0)) && said "worker does not match its SHA-256" && [[ ! -e "${tmp}/fetched" ]]'

  make_artifact "${tmp}/other-commit.zip" "${old_sha}" keeper worker
  binaries_routes "$(build_run 71 push main acme/verifier "${main_sha}")" "$(binaries_artifact 901 false)" "${tmp}/other-commit.zip"
  fetch keeper
  check "binaries: an artifact built from another commit fails closed" \
    eval '((status != 0)) && said "was not built from ${main_sha}" && [[ ! -e "${tmp}/fetched" ]]'

  make_artifact "${tmp}/keeper-only.zip" "${main_sha}" keeper
  binaries_routes "$(build_run 71 push main acme/verifier "${main_sha}")" "$(binaries_artifact 901 false)" "${tmp}/keeper-only.zip"
  fetch keeper worker
  check "binaries: a binary missing from the artifact fails closed" \
    eval '((status != 0)) && said "has no worker" && [[ ! -e "${tmp}/fetched" ]]'

  binaries_routes "" "$(binaries_artifact 901 false)"
  fetch keeper
  check "binaries: no build run for this commit fails closed" \
    eval '((status != 0)) && said "run the build workflow for this commit" && [[ ! -e "${tmp}/fetched" ]]'

  binaries_routes "$(build_run 71 push main acme/verifier "${main_sha}")" "$(binaries_artifact 901 true)"
  fetch keeper
  check "binaries: only an expired artifact fails closed" \
    eval '((status != 0)) && said "no unexpired regression-binaries artifact" && [[ ! -e "${tmp}/fetched" ]]'

  # A pull request (or fork, or branch) run of the build workflow uploading the same name:
  # never listed, never downloaded.
  binaries_routes "$(build_run 72 pull_request main acme/verifier "${main_sha}"), $(build_run 73 push main evil/fork "${main_sha}"), $(build_run 74 push feature acme/verifier "${main_sha}")" "$(binaries_artifact 901 false)"
  fetch keeper
  check "binaries: artifacts of pull request, fork or branch runs are never used" \
    eval '((status != 0)) && ! grep -q "runs/72/\|runs/73/\|runs/74/\|artifacts/902" "${tmp}/requests.log"'

  # CI first: binaries of a commit whose CI did not pass (or passed only on a pull request, a
  # fork or a branch) are never looked up, let alone installed.
  for ci_runs in "" "$(ci_run pull_request main acme/verifier success)" \
    "$(ci_run push main evil/fork success)" "$(ci_run push feature acme/verifier success)" \
    "$(ci_run push main acme/verifier failure)"; do
    binaries_routes "$(build_run 71 push main acme/verifier "${main_sha}")" "$(binaries_artifact 901 false)"
    fetch keeper
    if ((status == 0)) || ! said "has no successful CI run" || grep -q "regression-verifier-build.yml\|artifacts" "${tmp}/requests.log" || [[ -e "${tmp}/fetched" ]]; then
      echo "      accepted without a passing CI run: ${ci_runs:-none}"
      ci_bad=$((${ci_bad:-0} + 1))
    fi
  done
  ci_runs="$(ci_run push main acme/verifier success)"
  check "binaries: a commit without a successful CI push run on main (none, pull request, fork, branch, failed) fails closed before the build is looked up" \
    eval '((${ci_bad:-0} == 0))'

  binaries_routes "$(build_run 71 workflow_run main acme/verifier "${main_sha}")" "$(binaries_artifact 901 false)"
  fetch keeper worker
  check "binaries: the build triggered by the commit's successful CI (workflow_run) is used" \
    eval '((status == 0)) && cmp -s "${tmp}/fetched/keeper" "${tmp}/good-src/keeper"'

  COMMIT="not-a-sha" DEST="${tmp}/fetched" VERIFY_ATTESTATION=0 run_script "${scripts}/fetch-binaries.sh" keeper
  check "binaries: a malformed commit fails before asking the API" \
    eval '((status != 0)) && [[ ! -s "${tmp}/requests.log" ]]'
else
  echo "FAIL  binaries: the keeper and worker binaries in ${bin_dir} are not built"
  failed=$((failed + 1))
fi

# --- fetch binaries: provenance verified offline against the pinned root (issue #49 item 3) --
# A real GitHub Actions SLSA provenance bundle and the file it attests
# (crates/provenance/tests/fixtures: pypi-attestations 0.0.19, built by
# trailofbits/pypi-attestations' release.yml at 08802efe…, a GitHub-hosted runner) stand in for a
# release binary: the file is served as `keeper` in a build artifact of that commit, its bundle
# from the attestations API, and verify-provenance judges it against
# deploy/sigstore/trusted_root.json with nothing of Sigstore's fetched.
prov_fixtures="${here}/../../../crates/provenance/tests/fixtures"
prov_sha=08802efe1f8e5fec4ad842d6b8ce97656092ee72
prov_file="${prov_fixtures}/pypi_attestations-0.0.19.tar.gz"
prov_digest="$(sha256sum "${prov_file}" | cut -d' ' -f1)"
verifier_bin="${bin_dir}/verify-provenance"
prov_attestations="$(jq -c '{attestations: [{bundle: ., repository_id: 772247423}]}' \
  "${prov_fixtures}/pypi_attestations-0.0.19.tar.gz.slsa.sigstore.json")"
prov_artifact() { # zip keeper-bytes
  local dir="${tmp}/prov-src"
  rm -rf "${dir}" "$1"; mkdir -p "${dir}"
  cp "$2" "${dir}/keeper"
  (cd "${dir}" && sha256sum keeper > SHA256SUMS && echo "${prov_sha}" > COMMIT && zip -q "$1" ./*)
}
prov_routes() { # zip attestations-answer (empty: no route, a 404)
  cat > "${routes}" <<JSON
{"/repos/acme/verifier/actions/workflows/ci.yml/runs?branch=main&event=push&head_sha=${prov_sha}&status=success&per_page=20": {"workflow_runs": [{"id": 60, "event": "push", "head_branch": "main", "conclusion": "success", "head_sha": "${prov_sha}", "path": ".github/workflows/ci.yml", "head_repository": {"full_name": "acme/verifier"}, "repository": {"full_name": "acme/verifier"}}]},
 "/repos/acme/verifier/actions/workflows/regression-verifier-build.yml/runs?branch=main&head_sha=${prov_sha}&status=success&per_page=20": {"workflow_runs": [$(build_run 71 push main acme/verifier "${prov_sha}")]},
 "/repos/acme/verifier/actions/runs/71/artifacts?name=regression-binaries": $(binaries_artifact 901 false),
 "/repos/acme/verifier/actions/artifacts/901/zip": {"@file": "$1"}${2:+,
 \"/repos/acme/verifier/attestations/sha256:${3:-${prov_digest}}\": $2}}
JSON
}
# The signer the fixture's certificate names; without these the default (this repository's
# release-build workflow on main) is expected.
prov_signer=(SIGNER_REPOSITORY=trailofbits/pypi-attestations SIGNER_WORKFLOW=release.yml
  SIGNER_REF=refs/tags/v0.0.19 SOURCE_REF=refs/tags/v0.0.19)
fetch_prov() { # [env...]
  rm -rf "${tmp}/fetched"
  run_script env COMMIT="${prov_sha}" DEST="${tmp}/fetched" PROVENANCE_VERIFIER="${verifier_bin}" \
    "$@" "${scripts}/fetch-binaries.sh" keeper
}
if [[ -x "${verifier_bin}" ]]; then
  prov_artifact "${tmp}/prov-good.zip" "${prov_file}"
  prov_routes "${tmp}/prov-good.zip" "${prov_attestations}"
  fetch_prov "${prov_signer[@]}"
  check "binaries: a binary whose provenance bundle verifies offline against the pinned trusted root is installed" \
    eval '((status == 0)) && cmp -s "${tmp}/fetched/keeper" "${prov_file}" && said "verified: " && grep -q "/attestations/sha256:${prov_digest}" "${tmp}/requests.log"'

  # Whoever can upload the build's artifact can rewrite SHA256SUMS too: one byte of the binary
  # changed and its sum rewritten to match passes the checksum, not the provenance.
  cp "${prov_file}" "${tmp}/prov-flipped"
  offset=$(($(stat -c %s "${tmp}/prov-flipped") / 2))
  byte="$(od -An -tu1 -j "${offset}" -N1 "${tmp}/prov-flipped" | tr -d ' ')"
  printf '%b' "\\$(printf '%03o' $(((byte + 1) % 256)))" | dd of="${tmp}/prov-flipped" bs=1 seek="${offset}" conv=notrunc status=none
  flipped_digest="$(sha256sum "${tmp}/prov-flipped" | cut -d' ' -f1)"
  prov_artifact "${tmp}/prov-flipped.zip" "${tmp}/prov-flipped"
  # The attestations API asked for the changed bytes' digest answers with the real bundle.
  prov_routes "${tmp}/prov-flipped.zip" "${prov_attestations}" "${flipped_digest}"
  fetch_prov "${prov_signer[@]}"
  check "binaries: a fetched binary with one byte changed and SHA256SUMS rewritten to match is refused by its provenance; nothing installed" \
    eval '((status != 0)) && said "keeper: its build provenance does not verify" && said "artifact hash does not match" && [[ ! -e "${tmp}/fetched" ]]'

  prov_routes "${tmp}/prov-good.zip" "${prov_attestations}"
  fetch_prov
  check "binaries: a real bundle signed by another workflow than this repository's release build is refused; nothing installed" \
    eval '((status != 0)) && said "identity mismatch" && said "regression-verifier-release-build.yml@refs/heads/main" && [[ ! -e "${tmp}/fetched" ]]'

  prov_routes "${tmp}/prov-good.zip" ""
  fetch_prov "${prov_signer[@]}"
  no_route_status=${status}
  prov_routes "${tmp}/prov-good.zip" '{"attestations": []}'
  fetch_prov "${prov_signer[@]}"
  check "binaries: a binary without a provenance attestation (none stored, or a 404) is refused; nothing installed" \
    eval '((no_route_status != 0 && status != 0)) && said "no provenance attestation for sha256" && [[ ! -e "${tmp}/fetched" ]]'

  prov_routes "${tmp}/prov-good.zip" "${prov_attestations}"
  fetch_prov "${prov_signer[@]}" TRUSTED_ROOT="${prov_fixtures}/staging_trusted_root.json"
  check "binaries: against a trusted root that is not Sigstore's public-good one the real bundle is refused" \
    eval '((status != 0)) && said "its build provenance does not verify" && [[ ! -e "${tmp}/fetched" ]]'

  # verify-provenance's exit code is read: only 4 is a refusal (the next stored bundle is
  # tried); any other failure means it could not judge at all and is said with its code, so a
  # broken pinned root is not reported as a binary whose provenance failed.
  printf '{}\n' > "${tmp}/not-a-trusted-root.json"
  prov_routes "${tmp}/prov-good.zip" "${prov_attestations}"
  fetch_prov "${prov_signer[@]}" TRUSTED_ROOT="${tmp}/not-a-trusted-root.json"
  check "binaries: a trusted root verify-provenance cannot use (exit 78) is said as such, not as a refused provenance; nothing installed" \
    eval '((status != 0)) && said "exit 78" && ! said "does not verify" && [[ ! -e "${tmp}/fetched" ]]'

  fetch_prov "${prov_signer[@]}" PROVENANCE_VERIFIER="${tmp}/no-such-verifier"
  check "binaries: without the verifier nothing is downloaded or installed" \
    eval '((status != 0)) && said "is not an executable" && ! grep -q "artifacts/901/zip" "${tmp}/requests.log" && [[ ! -e "${tmp}/fetched" ]]'
else
  echo "FAIL  binaries: ${verifier_bin} is not built (cargo build -p provenance)"
  failed=$((failed + 1))
fi

# --- independent execution: compare the runner's candidates with a slot's own re-run ------
# Two real runs of the worker in the sandbox (the bundled example, as scripts/example.sh runs
# it), wrapped as candidates of one job the way `worker feed` writes them.
example_job="${bin_dir}/examples/example_job"
images="${repo}/.work/images.json"
if [[ -x "${worker_bin}" && -x "${example_job}" && -s "${images}" ]]; then
  staging="${repo}/.work/script-tests-staging"
  mkdir -p "${staging}"
  export REGRESSION_SANDBOX_STAGING_ROOT="${staging}"
  image="$(jq -r .busybox "${images}")"
  stage() { "${worker_bin}" --quiet --stage-regression-input "$1" "$2" "${staging}" "$3" "$4" | jq -r .snapshot.digest; }
  bench_digest="$(stage benchmark "${repo}/fixtures/example/benchmark" 67108864 10000)"
  real_run() { # source-dir request-out outcome-out
    local digest
    digest="$(stage source "$1" 536870912 50000)"
    "${example_job}" "${image}" "${digest}" "${bench_digest}" /bin/cmp /benchmark/expected.txt /workspace/result.txt > "$2"
    "${worker_bin}" --run-regression "$2" > "$3"
  }
  real_run "${repo}/fixtures/example/source-pass" "${tmp}/request-pass.json" "${tmp}/outcome-runner.json"
  real_run "${repo}/fixtures/example/source-pass" "${tmp}/request-pass-2.json" "${tmp}/outcome-own.json"
  real_run "${repo}/fixtures/example/source-fail" "${tmp}/request-fail.json" "${tmp}/outcome-fail.json"
  job_id="$(jq -r .job.job_id "${tmp}/request-pass.json")"
  cand_file="candidate-$(printf '%s' "${job_id}" | sha256sum | cut -d' ' -f1).json"
  candidate_dir() { # dir request outcome
    mkdir -p "$1"
    jq -n --slurpfile r "$2" --slurpfile o "$3" \
      '{schema: "agent-bounties/regression-candidate-v1", job: $r[0].job, outcome: $o[0], runner_revision: "test"}' \
      > "$1/${cand_file}"
    jq -n --arg id "${job_id}" --arg f "${cand_file}" \
      '{schema: "agent-bounties/regression-candidate-manifest-v1", network: "base-mainnet", candidates: [{job_id: $id, file: $f}]}' \
      > "$1/manifest.json"
  }
  export SIGNER_BIN="${bin_dir}/signer"
  compare() { rm -rf "${tmp}/agreed" "${tmp}/agreed.disagreements"; run_script "${scripts}/compare-candidates.sh" "${tmp}/runner" "${tmp}/own" "${tmp}/agreed"; }
  rm -rf "${tmp}/runner" "${tmp}/own"
  candidate_dir "${tmp}/runner" "${tmp}/request-pass.json" "${tmp}/outcome-runner.json"
  candidate_dir "${tmp}/own" "${tmp}/request-pass.json" "${tmp}/outcome-own.json"
  compare
  check "independent: two real runs of the job agree bit for bit; the slot's own candidate is kept for signing" \
    eval '((status == 0)) && [[ "$(jq -r ".candidates[0].file" "${tmp}/agreed/manifest.json")" == "${cand_file}" ]] && cmp -s "${tmp}/own/${cand_file}" "${tmp}/agreed/${cand_file}" && grep -q "| agree: reproduced bit for bit; the slot signs its own run |" "${summary_file}"'

  # A runner presenting another run's result for this job: the slot's own real run disagrees.
  rm -rf "${tmp}/runner"
  candidate_dir "${tmp}/runner" "${tmp}/request-pass.json" "${tmp}/outcome-fail.json"
  compare
  check "independent: the runner's candidate is another tree's run (source digest, verdict differ); nothing is signed, reported as an error, both candidates kept" \
    eval '((status == 2)) && [[ "$(jq ".candidates | length" "${tmp}/agreed/manifest.json")" == 0 ]] && [[ ! -e "${tmp}/agreed/${cand_file}" ]] && said "::error::job ${job_id}: independent re-run disagrees" && grep -q "disagree" "${summary_file}" && cmp -s "${tmp}/runner/${cand_file}" "${tmp}/agreed.disagreements/${cand_file%.json}.runner.json" && cmp -s "${tmp}/own/${cand_file}" "${tmp}/agreed.disagreements/${cand_file%.json}.own.json"'

  check "independent: a disagreement fails the slot's step red (exit 2), the agreed directory still written for what agreed" \
    eval '((status == 2)) && [[ -f "${tmp}/agreed/manifest.json" ]]'

  rm -rf "${tmp}/own" && mkdir -p "${tmp}/own"
  compare
  check "independent: a job the slot's own run has no candidate for is not signed (warning)" \
    eval '((status == 0)) && [[ "$(jq ".candidates | length" "${tmp}/agreed/manifest.json")" == 0 ]] && said "::warning::job ${job_id}: not re-run here"'

  rm -f "${tmp}/runner/manifest.json"
  compare
  check "independent: runner candidates without a manifest fail closed" eval '((status == 1)) && [[ ! -e "${tmp}/agreed/manifest.json" ]]'

  # A forged runner candidate: the slot's own real run of the job failed; the runner claims it
  # passed (verdict and exit code flipped, response hash recomputed, so the file is
  # self-consistent). Only the comparison with the slot's own run can catch it.
  real_run "${repo}/fixtures/example/source-fail" "${tmp}/request-fail-2.json" "${tmp}/outcome-fail-own.json"
  jq -c '.verdict = "passed" | .receipt.execution.exit_code = 0' "${tmp}/outcome-fail.json" > "${tmp}/forged.json"
  forged_rh="0x$(jq -cj '{schema_version: "agent-bounties/regression-sandbox-receipt-v1", verdict, receipt}' "${tmp}/forged.json" | sha256sum | cut -d' ' -f1)"
  jq -c --arg h "${forged_rh}" '.response_hash = $h' "${tmp}/forged.json" > "${tmp}/outcome-forged.json"
  rm -rf "${tmp}/runner" "${tmp}/own"
  candidate_dir "${tmp}/runner" "${tmp}/request-fail.json" "${tmp}/outcome-forged.json"
  candidate_dir "${tmp}/own" "${tmp}/request-fail.json" "${tmp}/outcome-fail-own.json"
  compare
  check "independent: a forged runner candidate (the slot's run failed, the runner claims passed) disagrees on the verdict; nothing signed, both kept" \
    eval '((status == 2)) && [[ "$(jq ".candidates | length" "${tmp}/agreed/manifest.json")" == 0 ]] && grep -q "DISAGREES on verdict" "${summary_file}" && [[ -f "${tmp}/agreed.disagreements/${cand_file%.json}.runner.json" ]]'

  # A benchmark that prints timings (what pytest, cargo test, go test and node print; the
  # Python harness before it dropped unittest's duration): two real runs of the Python bounty
  # have different stdout and so different response hashes, with the same verdict and every
  # commitment equal. The slot agrees and signs its own run.
  python_image="$(jq -r .python "${images}")"
  py_src="$(stage source "${repo}/fixtures/python-bounty/solution-good" 536870912 50000)"
  py_bench="$(stage benchmark "${repo}/fixtures/python-bounty/benchmark" 67108864 10000)"
  timed='import runpy, sys, time; print("started at", time.time_ns(), flush=True); sys.argv = ["run_tests.py", "6"]; runpy.run_path("/benchmark/run_tests.py", run_name="__main__")'
  "${example_job}" "${python_image}" "${py_src}" "${py_bench}" python3 -I -B -c "${timed}" > "${tmp}/request-timed.json"
  "${worker_bin}" --run-regression "${tmp}/request-timed.json" > "${tmp}/outcome-timed-runner.json"
  "${worker_bin}" --run-regression "${tmp}/request-timed.json" > "${tmp}/outcome-timed-own.json"
  timed_job="$(jq -r .job.job_id "${tmp}/request-timed.json")"
  timed_file="candidate-$(printf '%s' "${timed_job}" | sha256sum | cut -d' ' -f1).json"
  timed_dir() { # dir outcome
    mkdir -p "$1"
    jq -n --slurpfile r "${tmp}/request-timed.json" --slurpfile o "$2" \
      '{schema: "agent-bounties/regression-candidate-v1", job: $r[0].job, outcome: $o[0], runner_revision: "test"}' > "$1/${timed_file}"
    jq -n --arg id "${timed_job}" --arg f "${timed_file}" \
      '{schema: "agent-bounties/regression-candidate-manifest-v1", network: "base-mainnet", candidates: [{job_id: $id, file: $f}]}' > "$1/manifest.json"
  }
  rm -rf "${tmp}/runner" "${tmp}/own"
  timed_dir "${tmp}/runner" "${tmp}/outcome-timed-runner.json"
  timed_dir "${tmp}/own" "${tmp}/outcome-timed-own.json"
  compare
  timed_hashes="$(jq -r .response_hash "${tmp}/outcome-timed-runner.json" "${tmp}/outcome-timed-own.json" | sort -u | wc -l)"
  check "independent: a benchmark printing timings (two real Python runs, ${timed_hashes} response hashes, verdict $(jq -r .verdict "${tmp}/outcome-timed-own.json")) agrees on the verdict; the slot's own candidate is kept for signing" \
    eval '((status == 0)) && ((timed_hashes == 2)) && [[ "$(jq -r .verdict "${tmp}/outcome-timed-own.json")" == passed ]] && cmp -s "${tmp}/own/${timed_file}" "${tmp}/agreed/${timed_file}" && grep -q "agree: verdict reproduced; output differs (stdout)" "${summary_file}"'
else
  echo "FAIL  independent: needs ${worker_bin}, ${example_job} (cargo build -p worker --example example_job) and ${images} (scripts/services.sh)"
  failed=$((failed + 1))
fi

# --- runner shards: the matrix size, and collecting every shard's candidates for the signer ---
shards() { REGRESSION_SHARDS="$1" run_script "${scripts}/shard-matrix.sh"; }
unset REGRESSION_SHARDS
run_script "${scripts}/shard-matrix.sh"
check "shards: vars.REGRESSION_SHARDS unset runs one shard" \
  eval '((status == 0)) && output_is count 1 && output_is shards "[0]"'
shards ""
check "shards: vars.REGRESSION_SHARDS empty runs one shard" eval '((status == 0)) && output_is count 1 && output_is shards "[0]"'
shards 3
check "shards: 3 runs shards [0,1,2] of 3" eval '((status == 0)) && output_is count 3 && output_is shards "[0,1,2]"'
shards 16
check "shards: 16, the most, is accepted" eval '((status == 0)) && output_is count 16'
bad_values=0
for value in 0 17 100 -1 abc 2.5 03 " 2" "2 " "1e1" "3;4" '$(id)'; do
  shards "${value}"
  if ((status == 0)) || ! said "::error::vars.REGRESSION_SHARDS must be a whole number from 1 to 16" || [[ -s "${out_file}" ]]; then
    echo "      accepted or unclear for '${value}'"
    bad_values=$((bad_values + 1))
  fi
done
check "shards: invalid values (0, 17, 100, -1, abc, 2.5, 03, spaces, 1e1, 3;4, \$(id)) fail the job with an ::error and no matrix" \
  eval '((bad_values == 0))'

# lib.sh's shard_of against the formula of crates/worker-jobs/src/feed/shard.rs, computed here by
# Python independently (and the Rust unit test's own example: sha256("a") mod 7).
# shellcheck source=.github/scripts/lib.sh
source "${scripts}/lib.sh"
py_shard() { python3 -c 'import hashlib,sys; print(int.from_bytes(hashlib.sha256(sys.argv[1].encode()).digest()[:8], "big") % int(sys.argv[2]))' "$1" "$2"; }
shard_mismatch=0
for k in $(seq 40); do
  n=$(((k % 16) + 1))
  [[ "$(shard_of "job-${k}-x" "${n}")" == "$(py_shard "job-${k}-x" "${n}")" ]] || shard_mismatch=$((shard_mismatch + 1))
done
check "shards: lib.sh shard_of is worker feed --shard's formula (40 ids, 1..16 shards; sha256(a) mod 7 = $(shard_of a 7))" \
  eval '((shard_mismatch == 0)) && [[ "$(shard_of a 7)" == "$(python3 -c "print(0xca978112ca1bbdca % 7)")" ]]'

# Job ids owned by a given shard of n, found with the independent Python formula.
id_of_shard() { # shard n tag
  local k=0
  while [[ "$(py_shard "job-$3-${k}" "$2")" != "$1" ]]; do k=$((k + 1)); done
  echo "job-$3-${k}"
}
# A shard's artifact as the runner uploads it: candidates, their manifest and the feed report.
shard_zip() { # zip job-ids...
  local zip="$1" dir="${tmp}/shard-src" entries='[]' id file
  shift
  rm -rf "${dir}" "${zip}"; mkdir -p "${dir}"
  for id in "$@"; do
    file="candidate-$(printf '%s' "${id}" | sha256sum | cut -d' ' -f1).json"
    jq -n --arg id "${id}" '{schema: "agent-bounties/regression-candidate-v1", job: {job_id: $id}, outcome: {response_hash: "0x00"}}' > "${dir}/${file}"
    echo '{"_type": "https://in-toto.io/Statement/v1"}' > "${dir}/${file%.json}.intoto.json"
    entries="$(jq -c --arg id "${id}" --arg f "${file}" '. + [{job_id: $id, file: $f}]' <<<"${entries}")"
  done
  jq -n --argjson c "${entries}" '{schema: "agent-bounties/regression-candidate-manifest-v1", network: "base-mainnet", candidates: $c}' > "${dir}/manifest.json"
  echo '{"jobs": []}' > "${dir}/feed-report.json"
  (cd "${dir}" && zip -q -y -r "${zip}" .)
}
shard_job() { printf '{"name": "Run the verification feed (shard %s/%s)", "conclusion": "%s"}' "$1" "$2" "$3"; }
shard_artifact() { printf '{"id": %s, "name": "regression-candidates-shard-%s-of-%s", "expired": false}' "$1" "$2" "$3"; }
shard_routes() { # jobs-json artifacts-json
  cat > "${routes}" <<JSON
{"/repos/acme/verifier/actions/runs/77/jobs?per_page=100": {"jobs": [{"name": "Plan the shards", "conclusion": "success"}, $1]},
 "/repos/acme/verifier/actions/runs/77/artifacts?per_page=100": {"artifacts": [$2]},
 "/repos/acme/verifier/actions/artifacts/800/zip": {"@file": "${tmp}/s0.zip"},
 "/repos/acme/verifier/actions/artifacts/801/zip": {"@file": "${tmp}/s1.zip"},
 "/repos/acme/verifier/actions/artifacts/802/zip": {"@file": "${tmp}/s2.zip"}}
JSON
}
collect() { rm -rf "${tmp}/collected"; RUN_ID=77 run_script "${scripts}/collect-shards.sh" "${tmp}/collected"; }
three_jobs="$(shard_job 0 3 success), $(shard_job 1 3 success), $(shard_job 2 3 success)"
three_artifacts="$(shard_artifact 800 0 3), $(shard_artifact 801 1 3), $(shard_artifact 802 2 3)"
a0="$(id_of_shard 0 3 a)"; b0="$(id_of_shard 0 3 b)"; a1="$(id_of_shard 1 3 a)"; a2="$(id_of_shard 2 3 a)"

shard_zip "${tmp}/s0.zip" "${a0}" "${b0}"; shard_zip "${tmp}/s1.zip" "${a1}"; shard_zip "${tmp}/s2.zip"
shard_routes "${three_jobs}" "${three_artifacts}"
collect
check "collect: three shards' candidates (with their in-toto statements and each shard's feed report) are merged into one manifest for the signer (an empty shard is fine)" \
  eval '((status == 0)) && [[ "$(jq -c "[.candidates[].job_id] | sort" "${tmp}/collected/manifest.json")" == "$(jq -cn --arg a "${a0}" --arg b "${b0}" --arg c "${a1}" "[\$a, \$b, \$c] | sort")" ]] && [[ "$(ls "${tmp}/collected"/candidate-*.intoto.json | wc -l)" == 3 && "$(ls "${tmp}/collected"/feed-report-shard-*.json | wc -l)" == 3 && "$(ls "${tmp}/collected" | wc -l)" == 10 ]] && output_is count 3 && output_is shards "[0,1,2]" && grep -q "| 2 | 0 candidate(s) |" "${summary_file}"'

# Shard 1 also lists shard 0's job: a duplicate across shards, whoever's copy is genuine.
shard_zip "${tmp}/s1.zip" "${a1}" "${a0}"
collect
check "collect: a job listed by two shards is refused; nothing is written for signing" \
  eval '((status == 1)) && said "::error::shard 1: job ${a0} is also listed by shard 0 (a duplicate)" && [[ ! -e "${tmp}/collected" ]] && grep -q "Nothing signed" "${summary_file}"'

# Shard 1 plants a candidate for a job of shard 2 that shard 2 did not run (no duplicate).
shard_zip "${tmp}/s1.zip" "${a1}" "${a2}"
collect
check "collect: a shard's candidate for a job another shard owns is refused" \
  eval '((status == 1)) && said "::error::shard 1: job ${a2} belongs to shard 2, not this one" && [[ ! -e "${tmp}/collected" ]]'

# Shard 1 lists its own job but points at a candidate for shard 0's job (under the right name).
shard_zip "${tmp}/s1.zip" "${a1}"
(cd "${tmp}/shard-src" && jq --arg id "${a0}" '.job.job_id = $id' "candidate-$(printf '%s' "${a1}" | sha256sum | cut -d' ' -f1).json" > t && mv t "candidate-$(printf '%s' "${a1}" | sha256sum | cut -d' ' -f1).json" && rm -f "${tmp}/s1.zip" && zip -q -r "${tmp}/s1.zip" .)
collect
check "collect: a manifest entry whose file holds another job's candidate is refused" \
  eval '((status == 1)) && said "is not a candidate for job ${a1}" && [[ ! -e "${tmp}/collected" ]]'

shard_zip "${tmp}/s1.zip" "${a1}"
shard_routes "${three_jobs}" "$(shard_artifact 800 0 3), $(shard_artifact 802 2 3)"
collect
check "collect: a shard's missing artifact is refused with a summary row" \
  eval '((status == 1)) && said "::error::shard 1: artifact regression-candidates-shard-1-of-3 is missing" && grep -q "| 1 | \*\*refused\*\*" "${summary_file}" && [[ ! -e "${tmp}/collected" ]]'

shard_routes "$(shard_job 0 3 success), $(shard_job 1 3 failure), $(shard_job 2 3 success)" "${three_artifacts}"
collect
check "collect: a shard whose job failed is refused, not signed as if complete" \
  eval '((status == 1)) && said "::error::shard 1: its job concluded failure" && [[ ! -e "${tmp}/collected" ]]'

shard_routes "$(shard_job 0 3 success), $(shard_job 2 3 success)" "${three_artifacts}"
collect
check "collect: a shard with no job in the run is refused" \
  eval '((status == 1)) && said "::error::shard 1: no job of the runner run ran this shard"'

# An artifact named for another shard count (say, planted by a shard's VM): refused.
shard_routes "${three_jobs}" "${three_artifacts}, $(shard_artifact 803 0 1)"
collect
check "collect: an extra regression-candidates artifact is refused" \
  eval '((status == 1)) && said "unexpected artifact regression-candidates-shard-0-of-1"'

shard_zip "${tmp}/s1.zip" "${a1}"
ln -s /etc/hostname "${tmp}/shard-src/feed-report.json.link"
(cd "${tmp}/shard-src" && rm -f "${tmp}/s1.zip" && zip -q -y -r "${tmp}/s1.zip" .)
shard_routes "${three_jobs}" "${three_artifacts}"
collect
check "collect: an artifact holding a symlink is refused" \
  eval '((status == 1)) && said "holds something other than regular files"'

# 22.7: the artifacts of a run past one page (100 others first, the shards' on page 2), and the
# requests a collection costs: 2 lists + one download per shard, whatever the shard count.
shard_zip "${tmp}/s1.zip" "${a1}"
others="$(for k in $(seq 100); do printf '{"id": %s, "name": "other-%s", "expired": false},' "$((1000 + k))" "${k}"; done)"
shard_routes "${three_jobs}" "${others%,}"
jq --argjson a "[${three_artifacts}]" '. + {"/repos/acme/verifier/actions/runs/77/artifacts?per_page=100&page=2": {artifacts: $a}}' "${routes}" > "${tmp}/r.json" && mv "${tmp}/r.json" "${routes}"
collect
check "collect: artifacts listed over two pages (per_page=100) are all seen; 2 lists + 1 per shard + 1 page = 6 requests" \
  eval '((status == 0)) && [[ "$(wc -l < "${tmp}/requests.log")" == 6 ]]'

# #51 item 4: one author's two broken bounties, both hashed into shard 1 of 3, beside healthy
# shards 0 and 2. Each shard is judged as its job judges it, the run as its run-level job does;
# the shard jobs' conclusions and the run's then go to the gate and the collection. The two
# jobs are not the runner's reach (the other shards reached what theirs needed), so the run
# stays green and the healthy shards' candidates are collected for signing.
x1="$(id_of_shard 1 3 x)"; y1="$(id_of_shard 1 3 y)"
judged_shard() { # shard jobs-json -> the shard job's conclusion; its report kept as shard-<i>.json
  feed_report '[]' "$2"
  cp "${tmp}/feed-report.json" "${tmp}/judged-shard-$1.json"
  judge 3
  if ((status == 0)); then echo success; else echo failure; fi
}
c0="$(judged_shard 0 "[$(job "${a0}" completed_passed null), $(job "${b0}" completed_failed null)]")"
c1="$(judged_shard 1 "[$(job "${x1}" no_verdict '"image_missing"'), $(job "${y1}" no_verdict '"image_missing"')]")"
c2="$(judged_shard 2 "[$(job "${a2}" completed_passed null)]")"
run_script "${scripts}/runner-judge.sh" --run "${tmp}"/judged-shard-{0,1,2}.json
run_judge_status="${status}"
run_conclusion=success
for c in "${c0}" "${c1}" "${c2}"; do [[ "${c}" == success ]] || run_conclusion=failure; done
((run_judge_status == 0)) || run_conclusion=failure
shard_zip "${tmp}/s0.zip" "${a0}" "${b0}"; shard_zip "${tmp}/s1.zip"; shard_zip "${tmp}/s2.zip" "${a2}"
shard_routes "$(shard_job 0 3 "${c0}"), $(shard_job 1 3 "${c1}"), $(shard_job 2 3 "${c2}")" "${three_artifacts}"
collect
check "judge: two broken bounties in one shard (2 x image_missing) beside healthy shards keep the run green, and the healthy shards' 3 candidates are collected for signing (shards ${c0}/${c1}/${c2}, run judge ${run_judge_status})" \
  eval '[[ "${run_conclusion}" == success ]] && ((status == 0)) && [[ "$(jq -c "[.candidates[].job_id] | sort" "${tmp}/collected/manifest.json")" == "$(jq -cn --arg a "${a0}" --arg b "${b0}" --arg c "${a2}" "[\$a, \$b, \$c] | sort")" ]]'

# What the per-shard rule was for still holds across the run: every job of every shard failing
# the same per-job way is this runner's reach (the registry unreachable), not every author.
judged_shard 0 "[$(job "${a0}" no_verdict '"image_missing"')]" >/dev/null
judged_shard 1 "[$(job "${x1}" no_verdict '"image_missing"'), $(job "${y1}" no_verdict '"image_missing"')]" >/dev/null
judged_shard 2 "[$(job "${a2}" no_verdict '"image_missing"'), $(job m skipped '"other_verification_mode"')]" >/dev/null
run_script "${scripts}/runner-judge.sh" --run "${tmp}"/judged-shard-{0,1,2}.json
check "judge: every job of every shard (4 x image_missing over 3 shards) failing the same way fails the run's judge" \
  eval '((status == 1)) && said "::error::every job of the run (4, in 3 shard(s)) ended image_missing"'

# A shard whose report is missing (its job failed before writing one) is already red; the run's
# judge judges the reports it has and names the missing one.
rm -f "${tmp}/judged-shard-1.json"
feed_report '[]' "[$(job "${a0}" completed_passed null)]"; cp "${tmp}/feed-report.json" "${tmp}/judged-shard-0.json"
run_script "${scripts}/runner-judge.sh" --run "${tmp}"/judged-shard-{0,1,2}.json
check "judge: the run's judge names a shard without a readable report and judges the rest" \
  eval '((status == 0)) && said "judged-shard-1.json" && said "::warning::"'

echo '{}' > "${routes}"
collect
check "collect: a jobs API that does not answer fails closed" eval '((status == 1)) && [[ ! -e "${tmp}/collected" ]]'

# One shard of 1,001 candidates, one past the manifest bound the signer agrees on
# (verifier_sdk::MAX_MANIFEST_CANDIDATES): the 1,000 that expire first are collected, the
# latest (listed first) is left out with a warning and a count; never the whole run refused.
rm -rf "${tmp}/shard-src" "${tmp}/s0.zip"; mkdir -p "${tmp}/shard-src"
python3 - "${tmp}/shard-src" <<'PY'
import hashlib, json, sys
d = sys.argv[1]
entries = []
for k in range(1001):
    job_id = f"job-bound-{k}"
    expires = 2100000000 if k == 0 else 2000000000 - k
    f = "candidate-" + hashlib.sha256(job_id.encode()).hexdigest() + ".json"
    json.dump({"schema": "agent-bounties/regression-candidate-v1",
               "job": {"job_id": job_id, "verification_expires_at": expires},
               "outcome": {"response_hash": "0x00"}}, open(f"{d}/{f}", "w"))
    entries.append({"job_id": job_id, "file": f})
json.dump({"schema": "agent-bounties/regression-candidate-manifest-v1", "network": "base-mainnet",
           "candidates": entries}, open(f"{d}/manifest.json", "w"))
PY
(cd "${tmp}/shard-src" && zip -q -r "${tmp}/s0.zip" .)
shard_routes "$(shard_job 0 1 success)" "$(shard_artifact 800 0 1)"
collect
bound_file() { printf 'candidate-%s.json' "$(printf '%s' "$1" | sha256sum | cut -d' ' -f1)"; }
check "collect: 1,001 candidates give a manifest of the 1,000 that expire first (earliest first), the latest left out with a warning and a count" \
  eval '((status == 0)) && [[ "$(jq ".candidates | length" "${tmp}/collected/manifest.json")" == 1000 ]] && [[ "$(jq -r ".candidates[0].job_id" "${tmp}/collected/manifest.json")" == job-bound-1000 ]] && ! jq -e "any(.candidates[]; .job_id == \"job-bound-0\")" "${tmp}/collected/manifest.json" >/dev/null && [[ ! -e "${tmp}/collected/$(bound_file job-bound-0)" ]] && said "::warning::1 candidate(s) left out" && output_is left_out 1 && grep -q "1 candidate(s) left out" "${summary_file}"'

# The real worker, sharded as the runner workflow runs it: `worker feed --shard i/3` over a
# local feed of six example jobs (crates/worker/examples/bench_feed.rs), each shard's output
# zipped as its artifact, collected; then each slot's independent re-run per shard
# (`--shard i/3 --job-id …` for that shard's collected jobs, as the signer workflow's `rerun`
# does) compared with compare-candidates.sh.
bench_feed="${bin_dir}/examples/bench_feed"
staging="${repo}/.work/script-tests-staging"
mkdir -p "${staging}"
if [[ -x "${worker_bin}" && -x "${bench_feed}" && -s "${images}" ]]; then
  mkdir -p "${tmp}/feed"
  "${bench_feed}" "${repo}" "$(jq -r .busybox "${images}")" 6 "${tmp}/feed" 2>/dev/null &
  feed_pid=$!
  for _ in $(seq 100); do [[ -s "${tmp}/feed/base" ]] && break; sleep 0.1; done
  feed_base="$(cat "${tmp}/feed/base" 2>/dev/null)"
  real_feed() { # out shard [job ids...]
    local out="$1" shard="$2" id
    shift 2
    local args=(feed --api "${feed_base}" --archive-base "${feed_base}" --network base-mainnet
      --verifier "$(cat "${tmp}/feed/verifier")" --out "${out}" --shard "${shard}"
      --staging-root "${staging}" --work-dir "${tmp}" --json)
    for id in "$@"; do args+=(--job-id "${id}"); done
    mkdir -p "${out}"
    "${worker_bin}" "${args[@]}" > "${out}/feed-report.json" 2>/dev/null
  }
  feed_statuses=""
  for i in 0 1 2; do
    rm -rf "${tmp}/real-$i"
    real_feed "${tmp}/real-$i" "$i/3"; feed_statuses+="$?"
    rm -f "${tmp}/s$i.zip"; (cd "${tmp}/real-$i" && zip -q -r "${tmp}/s$i.zip" .)
  done
  shard_routes "${three_jobs}" "${three_artifacts}"
  collect
  check "sharded: three real worker feed --shard i/3 runs collect into every job once (feed exits ${feed_statuses})" \
    eval '[[ "${feed_statuses}" == 000 ]] && ((status == 0)) && [[ "$(jq -r ".candidates[].job_id" "${tmp}/collected/manifest.json" | sort)" == "$(jq -r ".[].job_id" "${tmp}/feed/all-jobs.json" | sort)" ]]'

  rm -rf "${tmp}/own" && mkdir -p "${tmp}/own"
  rerun_statuses=""
  for i in 0 1 2; do
    mapfile -t shard_ids < <(jq -r '.candidates[].job_id' "${tmp}/collected/manifest.json" |
      while IFS= read -r id; do [[ "$(shard_of "${id}" 3)" == "$i" ]] && echo "${id}"; done)
    ((${#shard_ids[@]} > 0)) || continue
    rm -rf "${tmp}/rerun-$i"
    real_feed "${tmp}/rerun-$i" "$i/3" "${shard_ids[@]}"; rerun_statuses+="$?"
    cp "${tmp}/rerun-$i"/candidate-*.json "${tmp}/own/"
  done
  rm -rf "${tmp}/agreed"
  run_script "${scripts}/compare-candidates.sh" "${tmp}/collected" "${tmp}/own" "${tmp}/agreed"
  check "sharded: each shard's independent re-run (--shard i/3 --job-id) agrees with the collected candidates; all six kept" \
    eval '((status == 0)) && [[ "${rerun_statuses}" =~ ^0+$ ]] && [[ "$(jq ".candidates | length" "${tmp}/agreed/manifest.json")" == 6 ]] && said "6 agree, 0 disagree, 0 not re-run"'
  kill "${feed_pid}" 2>/dev/null; wait "${feed_pid}" 2>/dev/null

  # One bounty's fault does not stop every signature, end to end as the workflows run it: the
  # real worker over ten jobs, the tenth with an image its author never pushed; the runner's
  # judge decides the shard job's conclusion, the signer's gate and collection read it.
  rm -rf "${tmp}/feed" && mkdir -p "${tmp}/feed"
  BENCH_FEED_UNPULLABLE_ROUNDS=10 "${bench_feed}" "${repo}" "$(jq -r .busybox "${images}")" 10 "${tmp}/feed" 2>/dev/null &
  feed_pid=$!
  for _ in $(seq 100); do [[ -s "${tmp}/feed/base" ]] && break; sleep 0.1; done
  feed_base="$(cat "${tmp}/feed/base" 2>/dev/null)"
  rm -rf "${tmp}/real-0"
  real_feed "${tmp}/real-0" "0/1"; bad_feed_status=$?
  kill "${feed_pid}" 2>/dev/null; wait "${feed_pid}" 2>/dev/null
  cp "${tmp}/real-0/feed-report.json" "${tmp}/feed-report.json"
  judge "${bad_feed_status}"
  judged="${status}"; judge_said="${stdout}"
  shard_conclusion=failure; ((judged == 0)) && shard_conclusion=success
  run_conclusion="${shard_conclusion}"
  gate_routes
  gate "${run_conclusion}" schedule "${main_sha}"
  gate_proceeds=false; output_is proceed true && gate_proceeds=true
  rm -f "${tmp}/s0.zip"; (cd "${tmp}/real-0" && zip -q -r "${tmp}/s0.zip" .)
  shard_routes "$(shard_job 0 1 "${shard_conclusion}")" "$(shard_artifact 800 0 1)"
  collect
  check "one bad bounty: nine real verdicts and one image_missing (feed exit ${bad_feed_status}, judge ${judged}, gate proceeds ${gate_proceeds}) reach the signer, nine candidates" \
    eval '((bad_feed_status == 3 && judged == 0)) && [[ "${gate_proceeds}" == true ]] && grep -q "::warning::job .*image_missing" <<<"${judge_said}" && ((status == 0)) && [[ "$(jq ".candidates | length" "${tmp}/collected/manifest.json")" == 9 ]]'
else
  echo "FAIL  sharded: needs ${worker_bin}, ${bench_feed} (cargo build -p worker --example bench_feed) and ${images}"
  failed=$((failed + 1))
fi

# --- independent execution with shards: merging a slot's per-shard re-runs ----------------
# A re-run VM runs solver code: its artifact may only contribute candidates of its own shard.
rerun_shard_of() { shard_of "$1" 2; }
rerun_id0=""; rerun_id1=""
for n in $(seq 1 40); do
  case "$(rerun_shard_of "rerun-job-${n}")" in
    0) [[ -n "${rerun_id0}" ]] || rerun_id0="rerun-job-${n}" ;;
    1) [[ -n "${rerun_id1}" ]] || rerun_id1="rerun-job-${n}" ;;
  esac
done
rerun_name() { echo "candidate-$(printf '%s' "$1" | sha256sum | cut -d' ' -f1).json"; }
rerun_candidate() { # folder job-id hash [file name]
  mkdir -p "$1"
  jq -n --arg id "$2" --arg h "$3" '{job: {job_id: $id}, outcome: {response_hash: $h}}' \
    > "$1/${4:-$(rerun_name "$2")}"
}
# Each folder of ${tmp}/reruns is one artifact of signer run 88, zipped; the slot's two re-run
# jobs conclude rerun_conclusion[i] (default success) and upload between 10:04:00 and 10:04:30.
declare -A rerun_conclusion=()
rerun_created="2026-11-30T10:04:10Z"
merge_reruns() {
  rm -rf "${tmp}/merged"
  local jobs="" arts="" zips="" k=0 folder name sh
  for sh in 0 1; do
    jobs+="{\"name\": \"Re-run independently (slot 1, shard ${sh}/2)\", \"conclusion\": \"${rerun_conclusion[${sh}]:-success}\", \"run_attempt\": 1, \"started_at\": \"2026-11-30T10:00:00Z\", \"completed_at\": \"2026-11-30T10:05:00Z\", \"steps\": [{\"name\": \"Upload this slot's own candidates\", \"started_at\": \"2026-11-30T10:04:00Z\", \"completed_at\": \"2026-11-30T10:04:30Z\"}]},"
  done
  for folder in "${tmp}/reruns"/*; do
    name="$(basename "${folder}")"; k=$((k + 1))
    echo '{"slot": "1"}' > "${folder}/rerun.json"
    rm -f "${tmp}/rerun-${k}.zip"; (cd "${folder}" && zip -q -y -r "${tmp}/rerun-${k}.zip" .)
    arts+="{\"id\": $((900 + k)), \"name\": \"${name}\", \"expired\": false, \"created_at\": \"${rerun_created}\", \"workflow_run\": {\"id\": 88}},"
    zips+="\"/repos/acme/verifier/actions/artifacts/$((900 + k))/zip\": {\"@file\": \"${tmp}/rerun-${k}.zip\"},"
  done
  cat > "${routes}" <<JSON
{${zips}
 "/repos/acme/verifier/actions/runs/88/jobs?filter=latest&per_page=100": {"jobs": [${jobs%,}]},
 "/repos/acme/verifier/actions/runs/88/artifacts?per_page=100": {"artifacts": [${arts%,}, {"id": 1, "name": "regression-candidates", "expired": false}]}}
JSON
  RUN_ID=88 run_script "${scripts}/merge-reruns.sh" 1 2 "${tmp}/merged"
}
honest_hash="0x$(printf 'a%.0s' $(seq 64))"
forged_hash="0x$(printf 'f%.0s' $(seq 64))"
honest_reruns() {
  rm -rf "${tmp}/reruns"
  rerun_candidate "${tmp}/reruns/regression-rerun-1-shard-0" "${rerun_id0}" "${honest_hash}"
  rerun_candidate "${tmp}/reruns/regression-rerun-1-shard-1" "${rerun_id1}" "${honest_hash}"
}

honest_reruns
echo '{}' > "${tmp}/reruns/regression-rerun-1-shard-1/feed-report.json"
merge_reruns
check "reruns: each shard's own candidates are merged, each artifact bound to its job through the API (reports left out)" \
  eval '((status == 0)) && [[ -f "${tmp}/merged/$(rerun_name "${rerun_id0}")" && -f "${tmp}/merged/$(rerun_name "${rerun_id1}")" && ! -e "${tmp}/merged/feed-report.json" ]] && grep -q "artifacts/901/zip" "${tmp}/requests.log"'

# Shard 1's VM plants a candidate for shard 0's job agreeing with a forged runner candidate;
# whichever folder is merged last, only shard 0's own answer may reach the comparison.
rerun_candidate "${tmp}/reruns/regression-rerun-1-shard-1" "${rerun_id0}" "${forged_hash}"
merge_reruns
check "reruns: a shard's planted candidate for another shard's job is dropped with an error" \
  eval '[[ "$(jq -r .outcome.response_hash "${tmp}/merged/$(rerun_name "${rerun_id0}")")" == "${honest_hash}" ]] && said "::error::re-run artifact regression-rerun-1-shard-1/$(rerun_name "${rerun_id0}"): job ${rerun_id0} is in shard 0, not 1"'
check "reruns: a planted file dropped fails red (exit 2), the honest candidates still merged" \
  eval '((status == 2)) && [[ -f "${tmp}/merged/$(rerun_name "${rerun_id0}")" ]]'

honest_reruns
rerun_candidate "${tmp}/reruns/regression-rerun-1-shard-1" "${rerun_id1}" "${forged_hash}" "$(rerun_name "${rerun_id0}")"
merge_reruns
check "reruns: a file named for another job is dropped (exit 2)" \
  eval '((status == 2)) && said "holds job ${rerun_id1}" && [[ ! -e "${tmp}/merged/$(rerun_name "${rerun_id0}")" || "$(jq -r .outcome.response_hash "${tmp}/merged/$(rerun_name "${rerun_id0}")")" == "${honest_hash}" ]]'

honest_reruns
ln -s /etc/passwd "${tmp}/reruns/regression-rerun-1-shard-1/link.json"
merge_reruns
check "reruns: an artifact holding a symlink is dropped whole (exit 2)" \
  eval '((status == 2)) && said "holds something other than regular files" && [[ ! -e "${tmp}/merged/$(rerun_name "${rerun_id1}")" ]]'

# 21.2: a re-run VM uploads an extra artifact whose name ends in another shard's suffix; it
# must not stand in for shard 1's honest re-run and agree with a forged runner candidate.
honest_reruns
rerun_candidate "${tmp}/reruns/regression-rerun-1-shard-9-shard-1" "${rerun_id1}" "${forged_hash}"
rm -rf "${tmp}/forged-runner"
rerun_candidate "${tmp}/forged-runner" "${rerun_id1}" "${forged_hash}"
jq -n --arg id "${rerun_id1}" --arg f "$(rerun_name "${rerun_id1}")" \
  '{schema: "agent-bounties/regression-candidate-manifest-v1", network: "base-mainnet", candidates: [{job_id: $id, file: $f}]}' \
  > "${tmp}/forged-runner/manifest.json"
merge_reruns
merge_status="${status}"; merge_said="${stdout}"
rm -rf "${tmp}/agreed"
mkdir -p "${tmp}/merged-or-none"; [[ -d "${tmp}/merged" ]] && cp -r "${tmp}/merged/." "${tmp}/merged-or-none/"
run_script "${scripts}/compare-candidates.sh" "${tmp}/forged-runner" "${tmp}/merged-or-none" "${tmp}/agreed"
check "reruns: an extra artifact regression-rerun-1-shard-9-shard-1 does not overwrite shard 1's honest re-run; the forged runner candidate is not kept" \
  eval '[[ ! -s "${tmp}/agreed/$(rerun_name "${rerun_id1}")" ]] && ((merge_status != 0 || status != 0))'
check "reruns: that extra artifact refuses the slot's re-runs with an ::error, nothing written" \
  eval '((merge_status == 1)) && grep -q "::error::re-runs of slot 1: unexpected artifact regression-rerun-1-shard-9-shard-1" <<<"${merge_said}" && [[ ! -e "${tmp}/merged" ]]'

honest_reruns
rerun_conclusion[1]=failure
merge_reruns
rerun_conclusion[1]=success
check "reruns: a re-run job of the slot that did not succeed refuses the slot (nothing signed)" \
  eval '((status == 1)) && said "concluded failure" && [[ ! -e "${tmp}/merged" ]]'

honest_reruns
rerun_created="2026-11-30T10:04:50Z"
merge_reruns
rerun_created="2026-11-30T10:04:10Z"
check "reruns: an artifact created after its job's upload step (overwritten by another VM) is refused" \
  eval '((status == 1)) && said "created outside the upload" && [[ ! -e "${tmp}/merged" ]]'

rm -rf "${tmp}/reruns"
rerun_candidate "${tmp}/reruns/regression-rerun-1-shard-0" "${rerun_id0}" "${honest_hash}"
merge_reruns
check "reruns: a shard's re-run artifact missing refuses the slot" \
  eval '((status == 1)) && said "not exactly one artifact regression-rerun-1-shard-1"'

RUN_ID=88 run_script "${scripts}/merge-reruns.sh" 1 0 "${tmp}/merged-bad"
check "reruns: a malformed shard count fails closed" eval '((status == 1)) && [[ ! -e "${tmp}/merged-bad" ]]'

# --- freshness: nothing happening turns a run red (22.8) ------------------------------------
fresh_routes() { # runner-updated keeper-updated [signed-at [older-runner-updated [sign-conclusion]]]
  # The signer's run 901 (created at $3, default 5 min after the runner run) has a `Sign (slot 1)`
  # job concluding $5 (default success); the runner list holds run $1 and, with $4, an older one.
  local r="/repos/acme/verifier/actions/workflows" run
  run() { printf '{"id": %s, "conclusion": "success", "created_at": "%s", "updated_at": "%s"}' "$1" "$2" "$2"; }
  local runner_runs="${1:+$(run 801 "$1")}${4:+, $(run 800 "$4")}"
  printf '{"%s/regression-verifier-runner.yml/runs?branch=main&status=success&per_page=1": {"workflow_runs": [%s]},
 "%s/regression-verifier-keeper.yml/runs?branch=main&status=success&per_page=1": {"workflow_runs": [%s]},
 "%s/regression-verifier-runner.yml/runs?branch=main&status=success&per_page=20": {"workflow_runs": [%s]},
 "%s/regression-verifier-signer.yml/runs?branch=main&status=success&per_page=10": {"workflow_runs": [%s]},
 "/repos/acme/verifier/actions/runs/901/jobs?filter=latest&per_page=100": {"jobs": [{"name": "Check the runner run", "conclusion": "success"}, {"name": "Sign (slot 1)", "conclusion": "%s"}]}}' \
    "${r}" "${1:+$(run 801 "$1")}" "${r}" "${2:+{\"conclusion\": \"success\", \"updated_at\": \"$2\"\}}" \
    "${r}" "${runner_runs}" "${r}" "$(run 901 "${3:-2026-11-30T11:55:30Z}")" "${5:-success}" > "${routes}"
}
fresh() { NOW="$(date -d 2026-11-30T12:00:00Z +%s)" run_script "${scripts}/freshness-check.sh"; }
fresh_routes 2026-11-30T11:50:00Z 2026-11-30T11:55:00Z
fresh
check "freshness: a cycle finished 5-10 min ago is fresh" eval '((status == 0)) && said fresh'
fresh_routes 2026-11-30T11:50:00Z 2026-11-30T07:00:00Z
fresh
check "freshness: no keeper success for 5 hours turns the run red" \
  eval '((status == 1)) && said "::error::regression-verifier-keeper.yml last succeeded 300 min ago"'
fresh_routes "" 2026-11-30T11:55:00Z
fresh
check "freshness: a runner that never succeeded on main is red" eval '((status == 1)) && said "has no successful run on main"'
echo '{}' > "${routes}"
fresh
check "freshness: an API that does not answer is red, not green" eval '((status == 1)) && said "could not list"'
# 22.8: the oldest unsigned batch. Runner batches at 10:00 and 11:50; the last successful
# Sign job's run was created at 09:30 (so neither batch was signed): red, naming 120 min.
fresh_routes 2026-11-30T11:50:00Z 2026-11-30T11:55:00Z 2026-11-30T09:30:00Z 2026-11-30T10:00:00Z
fresh
check "freshness: a runner batch no Sign job succeeded after for 2 hours is red (oldest unsigned batch)" \
  eval '((status == 1)) && said "::error::the oldest unsigned runner batch finished 120 min ago"'
fresh_routes 2026-11-30T11:50:00Z 2026-11-30T11:55:00Z 2026-11-30T11:51:00Z 2026-11-30T10:00:00Z failure
fresh
check "freshness: a signer run whose Sign job failed (a green gate-skip likewise) does not count as signed" \
  eval '((status == 1)) && said "oldest unsigned runner batch finished 120 min ago"'
fresh_routes 2026-11-30T11:50:00Z 2026-11-30T11:55:00Z 2026-11-30T11:51:00Z 2026-11-30T10:00:00Z
fresh
check "freshness: batches signed after they finished are not unsigned" \
  eval '((status == 0)) && grep -q "every successful runner batch has been signed" "${summary_file}"'
# The keeper's gas against N settlements, on the real chain here (Hardhat, chain id 8453).
fresh_routes 2026-11-30T11:50:00Z 2026-11-30T11:55:00Z
KEEPER_ADDRESS=0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 RPC_URL=http://127.0.0.1:8545 fresh
check "freshness: a funded keeper (Hardhat dev account) covers 10 settlements at the caps" \
  eval '((status == 0)) && grep -q "keeper: balance covers" "${summary_file}"'
KEEPER_ADDRESS="0x$(openssl rand -hex 20)" RPC_URL=http://127.0.0.1:8545 fresh
check "freshness: an unfunded keeper address (real chain, balance 0) is red" \
  eval '((status == 1)) && said "can pay 0 settlement(s) at the caps, fewer than 10"'
KEEPER_ADDRESS=0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 RPC_URL=http://127.0.0.1:9 fresh
check "freshness: an RPC that does not answer is red" eval '((status == 1)) && said "could not read the keeper"'
KEEPER_ADDRESS=0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 RPC_URL=http://127.0.0.1:9,http://127.0.0.1:8545 fresh
check "freshness: RPC_URL as a list: the first endpoint down, the next one's balance is read (#43 item 2)" \
  eval '((status == 0)) && grep -q "keeper: balance covers" "${summary_file}"'

# #43: a listed job whose window ends within WINDOW_MARGIN_MINUTES and is still unsettled on
# chain (no candidate, no attestation or no relay got it there) is red. The feed comes from the
# stand-in, the bounties' status() from the real Hardhat node: two addresses given code that
# answers every call with 3 (Submitted) or 4 (Settled).
set_code() {
  curl -s -H 'Content-Type: application/json' --data \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hardhat_setCode\",\"params\":[\"$1\",\"0x60${2}60005260206000f3\"]}" \
    http://127.0.0.1:8545 >/dev/null
}
open_bounty="0x$(openssl rand -hex 20)"
settled_bounty="0x$(openssl rand -hex 20)"
set_code "${open_bounty}" 03
set_code "${settled_bounty}" 04
fresh_verifier=0xbe6292b9e465f549e2363b918d6dd9187038431e
feed_job() { # job-id bounty expires-at
  printf '{"job_id": "%s", "bounty_contract": "%s", "verification_expires_at": %s}' "$1" "$2" "$(date -d "$3" +%s)"
}
fresh_feed() { # job JSON objects
  local jobs
  jobs="$(printf '%s,' "$@")"
  jq --arg k "/v1/base/autonomous-bounties/verification-jobs?network=base-mainnet&verifier=${fresh_verifier}" \
    --argjson v "[${jobs%,}]" '.[$k] = $v' "${routes}" > "${routes}.new" && mv "${routes}.new" "${routes}"
}
fresh_jobs() { PLATFORM_API="${GITHUB_API_URL}" VERIFIERS="${fresh_verifier}" RPC_URL="${1:-http://127.0.0.1:8545}" fresh; }
fresh_routes 2026-11-30T11:50:00Z 2026-11-30T11:55:00Z
fresh_feed "$(feed_job "base-mainnet:${open_bounty}:1" "${open_bounty}" 2026-11-30T12:10:00Z)" \
  "$(feed_job "base-mainnet:${settled_bounty}:1" "${settled_bounty}" 2026-11-30T12:10:00Z)" \
  "$(feed_job "base-mainnet:${open_bounty}:2" "${open_bounty}" 2026-11-30T17:00:00Z)"
fresh_jobs
check "freshness: a listed job whose window ends within the margin with no settlement is red (#43 item 1)" \
  eval '((status == 1)) && said "base-mainnet:${open_bounty}:1 ends in 10 min" && ! said ":${settled_bounty}:1 ends" && ! said ":2 ends"'
fresh_routes 2026-11-30T11:50:00Z 2026-11-30T11:55:00Z
fresh_feed "$(feed_job "base-mainnet:${settled_bounty}:1" "${settled_bounty}" 2026-11-30T12:10:00Z)" \
  "$(feed_job "base-mainnet:${open_bounty}:2" "${open_bounty}" 2026-11-30T17:00:00Z)"
fresh_jobs
check "freshness: a job settled on chain, or whose window ends beyond the margin, is not red (#43 item 1)" \
  eval '((status == 0)) && said fresh'
fresh_routes 2026-11-30T11:50:00Z 2026-11-30T11:55:00Z
fresh_feed "$(feed_job "base-mainnet:${open_bounty}:1" "${open_bounty}" 2026-11-30T12:10:00Z)"
fresh_jobs http://127.0.0.1:9
check "freshness: a job near its window end whose settlement cannot be read is red, not green (#43 item 1)" \
  eval '((status == 1)) && said "could not read the status of base-mainnet:${open_bounty}:1"'
fresh_routes 2026-11-30T11:50:00Z 2026-11-30T11:55:00Z
fresh_jobs
check "freshness: a feed that does not answer is red, not green (#43 item 1)" \
  eval '((status == 1)) && said "could not list the jobs of ${fresh_verifier}"'

# --- every job of every workflow has a timeout ---------------------------------------------
# A job without `timeout-minutes` runs up to six hours (a hung pull or RPC holds the
# concurrency group, and every later cycle queues behind it).
workflows_dir="$(dirname "${scripts}")/workflows"
untimed=""
for workflow in "${workflows_dir}"/*.yml; do
  # Job keys sit two spaces in under `jobs:`; each must have a four-space `timeout-minutes:`,
  # except a job that calls a reusable workflow (`uses:`), which GitHub does not let set one:
  # the called workflow's jobs carry theirs.
  missing="$(awk '
    /^jobs:/ { in_jobs = 1; next }
    in_jobs && /^[^ #]/ { in_jobs = 0 }
    in_jobs && /^  [A-Za-z0-9_-]+:[[:space:]]*$/ { if (job != "" && !timed) print job; job = $1; timed = 0; next }
    in_jobs && /^    timeout-minutes:/ { timed = 1 }
    in_jobs && /^    uses:/ { timed = 1 }
    END { if (job != "" && !timed) print job }' "${workflow}")"
  [[ -z "${missing}" ]] || untimed+=" $(basename "${workflow}"):${missing//$'\n'/,}"
done
check "workflows: every job has timeout-minutes${untimed:+ (missing:${untimed})}" eval '[[ -z "${untimed}" ]]'

check_summary
