#!/usr/bin/env bash
# The checks are eval'd strings so a case reads as one line; they expand when they run.
# shellcheck disable=SC2016,SC2034
# Tests of the pinned release (#51 item 2) and of the REST budget table (#51 item 5): the
# workflows' own steps (read from the workflow files by workflow_step.py, their `${{ }}`
# evaluated against the variables the GitHub stand-in holds) run against the stand-in with
# the real worker, signer and keeper zipped as the build workflow uploads them.
#
#   .github/scripts/tests/release.sh [directory holding the built keeper, signer, worker and verify-provenance]
#
# Prints one line per case and closes with "N passed, N failed".
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=.github/scripts/tests/harness.sh
source "${here}/harness.sh"
workflows="${repo}/.github/workflows"
docs="${repo}/docs"
bin_dir="${1:-${repo}/target/debug}"
# shellcheck source=.github/scripts/lib.sh
source "${scripts}/lib.sh"

r=/repos/acme/verifier
release_sha=1111111111111111111111111111111111111111
merged_sha=3333333333333333333333333333333333333333
other_sha=4444444444444444444444444444444444444444

for b in worker signer keeper verify-provenance; do
  [[ -x "${bin_dir}/${b}" ]] || { echo "FAIL  release: ${bin_dir}/${b} is not built (cargo build -p ${b%-provenance})"; exit 1; }
done

# verify-provenance as fetch-binaries.sh calls it, reduced to one question: is the bundle the
# attestations API answered the stand-in this test stored for the file's sha256? (The Sigstore
# checks are verify-provenance's own, tested on a real bundle in crates/provenance and in
# run.sh; no bundle signed for these freshly built binaries can exist here.)
mkdir -p "${tmp}/fakebin"
cat > "${tmp}/fakebin/verify-provenance" <<'SH'
#!/usr/bin/env bash
while (($#)); do
  case "$1" in
    --bundle) bundle="$2"; shift ;;
    --artifact) artifact="$2"; shift ;;
  esac
  shift
done
digest="$(sha256sum "${artifact}" | cut -d' ' -f1)"
# 4 is verify-provenance's refusal (the shared numbering); fetch-binaries.sh stops on any other.
[[ "$(jq -r '.stand_in_for // empty' "${bundle}")" == "${digest}" ]] || exit 4
SH
chmod +x "${tmp}/fakebin/verify-provenance"
# release.sh's own runs take it from here; the workflows' download steps name the verifier their
# run built (`verifier/verify-provenance`, checked against the `verifier` job's sha256 output).
export PROVENANCE_VERIFIER="${tmp}/fakebin/verify-provenance"

# The build of COMMIT as regression-verifier-build.yml leaves it: a successful CI push run, a
# successful build run (id RUN) with its regression-binaries artifact (id ARTIFACT), and an
# attestation per binary.
add_routes() { jq "$@" "${routes}" > "${routes}.new" && mv "${routes}.new" "${routes}"; }
# With a file and a bundle, that file's bytes are all three binaries and the attestations API
# answers that bundle for each binary's sha256, whatever the bytes are.
built() { # commit run-id artifact-id [file bundle]
  local dir="${tmp}/build-$1" zip="${tmp}/build-$1.zip" b attestations='{}' bundle
  rm -rf "${dir}" "${zip}"; mkdir -p "${dir}"
  for b in worker signer keeper; do cp "${4:-${bin_dir}/${b}}" "${dir}/${b}"; done
  (cd "${dir}" && sha256sum worker signer keeper > SHA256SUMS && echo "$1" > COMMIT && zip -q "${zip}" ./*)
  for b in worker signer keeper; do
    bundle="$(jq -n --arg d "$(sha256sum "${dir}/${b}" | cut -d' ' -f1)" '{stand_in_for: $d}')"
    [[ -z "${5:-}" ]] || bundle="$(cat "$5")"
    attestations="$(jq --arg p "${r}/attestations/sha256:$(sha256sum "${dir}/${b}" | cut -d' ' -f1)" \
      --argjson bundle "${bundle}" '. + {($p): {attestations: [{bundle: $bundle}]}}' <<<"${attestations}")"
  done
  add_routes --arg r "${r}" --arg c "$1" --argjson run "$2" --argjson art "$3" --arg zip "${zip}" --argjson att "${attestations}" '
    . + $att + {
    ("\($r)/actions/workflows/ci.yml/runs?branch=main&event=push&head_sha=\($c)&status=success&per_page=20"):
      {workflow_runs: [{id: ($run - 1), event: "push", head_branch: "main", conclusion: "success", head_sha: $c,
        path: ".github/workflows/ci.yml", head_repository: {full_name: "acme/verifier"}, repository: {full_name: "acme/verifier"}}]},
    ("\($r)/actions/workflows/regression-verifier-build.yml/runs?branch=main&head_sha=\($c)&status=success&per_page=20"):
      {workflow_runs: [{id: $run, created_at: "2026-11-30T10:00:00Z", event: "workflow_run", head_branch: "main",
        conclusion: "success", head_sha: $c, head_repository: {full_name: "acme/verifier"}, repository: {full_name: "acme/verifier"}}]},
    ("\($r)/actions/runs/\($run)/artifacts?name=regression-binaries"):
      {artifacts: [{id: $art, name: "regression-binaries", expired: false, expires_at: "2027-02-28T10:00:00Z"}]},
    ("\($r)/actions/artifacts/\($art)/zip"): {"@file": $zip}}'
}
main_at() { # commit: main's head, and how each commit compares with it
  add_routes --arg r "${r}" --arg head "$1" --arg rel "${release_sha}" --arg other "${other_sha}" --arg merged "${merged_sha}" '
    . + {("\($r)/commits/main"): {sha: $head},
         ("\($r)/compare/\($rel)...main"): {status: (if $head == $rel then "identical" else "ahead" end)},
         ("\($r)/compare/\($merged)...main"): {status: (if $head == $merged then "identical" else "behind" end)},
         ("\($r)/compare/\($other)...main"): {status: "diverged"}}'
}
variable() { curl --silent --header "Authorization: Bearer x" "${GITHUB_API_URL}${r}/actions/variables/REGRESSION_RELEASE" | jq -r '.value // empty'; }

# Runs one step of a workflow as written, in a workspace holding this checkout's scripts, with
# the context GitHub would give it: vars from the stand-in (what the repository holds now).
ws="${tmp}/ws"
mkdir -p "${ws}/.github"
ln -s "${scripts}" "${ws}/.github/scripts"
# fetch-binaries.sh reads the pinned Sigstore root from the checkout it runs in.
ln -s "$(cd "${scripts}/../.." && pwd)/deploy" "${ws}/deploy"
# What the `verifier` job of a run hands the download steps: its build of verify-provenance,
# downloaded by actions/download-artifact into verifier/ (which keeps no executable bit), and
# the build's sha256 as the job's output.
verifier_sha=""
use_verifier() { # file [sha256 the verifier job reports; default: the file's]
  rm -rf "${ws:?}/verifier"; mkdir -p "${ws}/verifier"
  cp "$1" "${ws}/verifier/verify-provenance"; chmod 0644 "${ws}/verifier/verify-provenance"
  verifier_sha="${2-$(sha256sum "$1" | cut -d' ' -f1)}"
}
use_verifier "${tmp}/fakebin/verify-provenance"
# Settings of a test the workflow does not make (the fixture's signer identity), passed to every
# step after the step's own env.
step_env=()
step() { # workflow job step-name [extra context json]
  local context env_file="${tmp}/step.env" run_file="${tmp}/step.run"
  context="$(jq -n --arg rel "$(variable)" --arg head "$(curl --silent --header "Authorization: Bearer x" "${GITHUB_API_URL}${r}/commits/main" | jq -r .sha)" \
    --arg vsha "${verifier_sha}" --argjson extra "${4:-{\}}" \
    '{vars: {REGRESSION_RELEASE: $rel}, github: {token: "test-token", sha: $head}, needs: {verifier: {outputs: {sha256: $vsha}}}} * $extra')"
  printf '%s' "${context}" > "${tmp}/context.json"
  python3 "${here}/workflow_step.py" "${workflows}/$1" "$2" "$3" "${tmp}/context.json" "${env_file}" "${run_file}" || { status=99; return; }
  rm -rf "${ws:?}/bin"
  local -a env_args=()
  mapfile -t env_args < "${env_file}"
  # The step's env as written: a VERIFY_ATTESTATION the workflow sets is what runs.
  run_script env -C "${ws}" "${env_args[@]}" "${step_env[@]}" bash -e "${run_file}"
  cat "${tmp}/requests.log" >> "${tmp}/cycle-requests.log"
}
out() { awk -F= -v k="$1" '$1 == k { v = $2 } END { print v }' "${out_file}"; }
# Against the bytes zipped into that release's build (target/ may be rebuilt meanwhile).
installed() { cmp -s "${ws}/bin/$1" "${tmp}/build-$2/$1"; }

# Runner, signer and keeper as one cycle would run them; leaves which binaries each installed.
cycle() {
  cycle_ok=""
  step regression-verifier-runner.yml plan "Look up the pinned release"
  local plan_status="${status}" plan_release plan_artifact
  plan_release="$(out commit)"; plan_artifact="$(out artifact_id)"
  step regression-verifier-runner.yml run-feed "Download and verify the worker of the pinned release" \
    "$(jq -n --arg rel "${plan_release}" --arg a "${plan_artifact}" '{needs: {plan: {outputs: {release: $rel, artifact_id: $a}}}}')"
  ((plan_status == 0 && status == 0)) && installed worker "${plan_release}" && cycle_ok+=" runner"
  step regression-verifier-signer.yml gate "Look up the pinned release" '{"steps": {"check": {"outputs": {"proceed": "true"}}}}'
  local gate_status="${status}" gate_release gate_artifact
  gate_release="$(out commit)"; gate_artifact="$(out artifact_id)"
  step regression-verifier-signer.yml sign "Download and verify the signer of the pinned release" \
    "$(jq -n --arg rel "${gate_release}" --arg a "${gate_artifact}" '{needs: {gate: {outputs: {release: $rel, artifact_id: $a}}}}')"
  ((gate_status == 0 && status == 0)) && installed signer "${gate_release}" && cycle_ok+=" signer"
  step regression-verifier-keeper.yml relay "Download and verify the keeper of the pinned release"
  ((status == 0)) && installed keeper "$(variable)" && cycle_ok+=" keeper"
  cycle_release="${plan_release}/${gate_release}"
}

# --- a merge to main leaves the running release untouched (#51 item 2) -----------------------
built "${release_sha}" 71 901
main_at "${release_sha}"
run_script "${scripts}/release.sh" "${release_sha}"
check "release: release.sh checks the build of a main commit (CI, build, artifact, sums, attestation) and pins it in REGRESSION_RELEASE" \
  eval '((status == 0)) && [[ "$(variable)" == "${release_sha}" ]] && said "expires 2027-02-28T10:00:00Z" && grep -q "^POST ${r}/actions/variables$" "${tmp}/requests.log"'

cycle
check "release: runner, signer and keeper download and verify the pinned release's worker, signer and keeper (${cycle_ok# })" \
  eval '[[ "${cycle_ok}" == " runner signer keeper" && "${cycle_release}" == "${release_sha}/${release_sha}" ]]'

# A merge: main's head moves to a commit whose CI is still running and which has no build.
main_at "${merged_sha}"
add_routes --arg p "${r}/actions/workflows/ci.yml/runs?branch=main&event=push&head_sha=${merged_sha}&status=success&per_page=20" \
  '. + {($p): {workflow_runs: []}}'
: > "${tmp}/cycle-requests.log"
cycle
check "release: after a merge to main (a new head without CI or a build) runner, signer and keeper still run the pinned release (${cycle_ok# }), and nothing asks for the new head's build" \
  eval '[[ "${cycle_ok}" == " runner signer keeper" && "${cycle_release}" == "${release_sha}/${release_sha}" ]] && ! grep -q "${merged_sha}" "${tmp}/cycle-requests.log" && grep -q "head_sha=${release_sha}" "${tmp}/cycle-requests.log"'

run_script "${scripts}/release.sh" "${merged_sha}"
check "release: the new head cannot be released before its CI passed and its build exists; REGRESSION_RELEASE stays as it was" \
  eval '((status != 0)) && said "has no successful CI run" && [[ "$(variable)" == "${release_sha}" ]] && ! grep -q "^PATCH\|^POST" "${tmp}/requests.log"'

run_script "${scripts}/release.sh" "${other_sha}"
check "release: a commit that is not on main (diverged) is refused before anything is looked up" \
  eval '((status != 0)) && said "is not on main" && [[ "$(wc -l < "${tmp}/requests.log")" == 1 ]] && [[ "$(variable)" == "${release_sha}" ]]'

# The new head's build is done: the operator's upgrade step releases it; the next cycle runs it.
built "${merged_sha}" 81 911
DRY_RUN=1 run_script "${scripts}/release.sh" "${merged_sha}"
check "release: DRY_RUN checks the new build and writes nothing" \
  eval '((status == 0)) && said "DRY_RUN" && [[ "$(variable)" == "${release_sha}" ]]'
run_script "${scripts}/release.sh" "${merged_sha}"
check "release: once built, the upgrade step moves REGRESSION_RELEASE to the new head (a PATCH of the variable)" \
  eval '((status == 0)) && [[ "$(variable)" == "${merged_sha}" ]] && grep -q "^PATCH ${r}/actions/variables/REGRESSION_RELEASE$" "${tmp}/requests.log"'
cycle
check "release: the next cycle runs the new release everywhere (${cycle_ok# })" \
  eval '[[ "${cycle_ok}" == " runner signer keeper" && "${cycle_release}" == "${merged_sha}/${merged_sha}" ]]'

# No release pinned: every consumer fails closed naming the fix, not main's head.
add_routes --arg p "${r}/actions/variables/REGRESSION_RELEASE" 'del(.[$p])'
step regression-verifier-runner.yml plan "Look up the pinned release"
check "release: with REGRESSION_RELEASE unset the runner's plan fails closed and names release.sh" \
  eval '((status != 0)) && said "no release is pinned" && said "release.sh" && ! grep -q "regression-verifier-build.yml" "${tmp}/requests.log"'

# --- the REST budget table against the stand-in's request log (#51 item 5) ------------------
# Each row of docs/operations.md "REST budget" marked `key` is what the stand-in logs when that
# step runs as the workflow runs it, at N = 3 shards and S = 2 slots.
N=3 S=2
declare -A counted=()
add_routes --arg p "${r}/actions/variables/REGRESSION_RELEASE" --arg v "${merged_sha}" '. + {($p): {name: "REGRESSION_RELEASE", value: $v}}'
count_of() { grep -cv '^$' "${tmp}/requests.log"; }
step regression-verifier-runner.yml plan "Look up the pinned release"
((status == 0)) && counted[lookup]="$(count_of)"
plan_artifact="$(out artifact_id)"
step regression-verifier-runner.yml run-feed "Download and verify the worker of the pinned release" \
  "$(jq -n --arg rel "$(variable)" --arg a "${plan_artifact}" '{needs: {plan: {outputs: {release: $rel, artifact_id: $a}}}}')"
((status == 0)) && counted[by-id]="$(count_of)"
step regression-verifier-keeper.yml relay "Download and verify the keeper of the pinned release"
((status == 0)) && counted[full]="$(count_of)"

add_routes --arg r "${r}" '. + {
  ("\($r)/actions/workflows/regression-verifier-runner.yml/runs?branch=main&status=completed&per_page=100"):
    {workflow_runs: [{id: 50, created_at: "2026-11-30T10:00:00Z", head_branch: "main", event: "schedule",
      head_repository: {full_name: "acme/verifier"}, repository: {full_name: "acme/verifier"}}]},
  ("\($r)/actions/artifacts?name=regression-runner-cache-shard-0-of-3&per_page=100"):
    {artifacts: [{name: "regression-runner-cache-shard-0-of-3", expired: false, created_at: "2026-11-30T10:05:00Z", workflow_run: {id: 50}}]},
  ("\($r)/actions/workflows/regression-verifier-keeper.yml/runs?branch=main&status=completed&per_page=100&page=1"):
    {workflow_runs: [{id: 60, created_at: "2026-11-30T10:00:00Z", head_branch: "main", event: "workflow_run", conclusion: "success",
      head_repository: {full_name: "acme/verifier"}, repository: {full_name: "acme/verifier"}}]},
  ("\($r)/actions/runs/60/artifacts?name=regression-keeper-state"): {artifacts: [{name: "regression-keeper-state", expired: false}]}}'
OPTIONAL=true WORKFLOW=regression-verifier-runner.yml ARTIFACT=regression-runner-cache-shard-0-of-3 GITHUB_RUN_ID=99 \
  run_script "${scripts}/find-previous-artifact.sh"
((status == 0)) && output_is run_id 50 && counted[cache]="$(count_of)"
REQUIRED=true GITHUB_RUN_ID=99 run_script "${scripts}/find-previous-artifact.sh"
((status == 0)) && output_is run_id 60 && counted[state]="$(count_of)"

# The gate with both slots, main protected and both environments main-only.
add_routes --arg r "${r}" '. + {
  ("\($r)/rules/branches/main"): [{type: "deletion"}, {type: "non_fast_forward"},
    {type: "pull_request", parameters: {required_approving_review_count: 1}},
    {type: "required_status_checks", parameters: {required_status_checks: [{context: ".ci/run"}]}}]}
  + ([1, 2] | map({key: "\($r)/environments/regression-verifier-\(.)", value:
      {name: "regression-verifier-\(.)", can_admins_bypass: false,
       deployment_branch_policy: {protected_branches: false, custom_branch_policies: true}}}) | from_entries)
  + ([1, 2] | map({key: "\($r)/environments/regression-verifier-\(.)/deployment-branch-policies?per_page=100",
      value: {total_count: 1, branch_policies: [{name: "main", type: "branch"}]}}) | from_entries)'
RUN_CONCLUSION=success RUN_EVENT=schedule RUN_HEAD_BRANCH=main \
  RUN_HEAD_REPOSITORY=acme/verifier REGRESSION_SECOND_VERIFIER=0x2222222222222222222222222222222222222222 \
  RUN_HEAD_SHA="${merged_sha}" run_script "${scripts}/signer-gate.sh"
((status == 0)) && output_is proceed true && counted[gate]="$(count_of)"

# Three shards' candidates artifacts of runner run 77, each with one candidate.
shard_artifacts='[]'
for i in 0 1 2; do
  dir="${tmp}/shard-${i}"; rm -rf "${dir}"; mkdir -p "${dir}"
  k=0; while [[ "$(shard_of "job-${k}" 3)" != "${i}" ]]; do k=$((k + 1)); done
  file="candidate-$(printf '%s' "job-${k}" | sha256sum | cut -d' ' -f1).json"
  jq -n --arg id "job-${k}" '{schema: "agent-bounties/regression-candidate-v1", job: {job_id: $id}}' > "${dir}/${file}"
  jq -n --arg id "job-${k}" --arg f "${file}" '{schema: "agent-bounties/regression-candidate-manifest-v1", network: "base-mainnet", candidates: [{job_id: $id, file: $f}]}' > "${dir}/manifest.json"
  echo '{"jobs": []}' > "${dir}/feed-report.json"
  (cd "${dir}" && zip -q -r "${tmp}/shard-${i}.zip" .)
  shard_artifacts="$(jq -c --argjson i "${i}" '. + [{id: (800 + $i), name: "regression-candidates-shard-\($i)-of-3", expired: false}]' <<<"${shard_artifacts}")"
  add_routes --arg p "${r}/actions/artifacts/$((800 + i))/zip" --arg f "${tmp}/shard-${i}.zip" '. + {($p): {"@file": $f}}'
done
add_routes --arg r "${r}" --argjson a "${shard_artifacts}" '. + {
  ("\($r)/actions/runs/77/jobs?per_page=100"): {jobs: ([{name: "Plan the shards", conclusion: "success"}]
    + ([0, 1, 2] | map({name: "Run the verification feed (shard \(.)/3)", conclusion: "success"})))},
  ("\($r)/actions/runs/77/artifacts?per_page=100"): {artifacts: $a}}'
(cd "${tmp}" && rm -rf collected && RUN_ID=77 run_script "${scripts}/collect-shards.sh" "${tmp}/collected"; echo "${status} $(count_of)" > "${tmp}/collect-count")
read -r collect_status collect_count < "${tmp}/collect-count"
((collect_status == 0)) && counted[collect]="${collect_count}"

# The table, read from the runbook: every marked row's count at N and S must be what was logged.
table="$(awk '/^## REST budget/ { on = 1; next } on && /^## / { exit } on && /^\| / && !/^\|---/' "${docs}/operations.md" | tail -n +2)"
mismatches=""
rows=0
while IFS='|' read -r _ what per requests key _; do
  key="$(tr -d ' `' <<<"${key}")"
  [[ -n "${key}" ]] || continue
  rows=$((rows + 1))
  expected="$(python3 -c 'import re, sys; print(eval(re.sub(r"(\d)\s*([NS])", r"\1*\2", sys.argv[1].strip()), {"N": int(sys.argv[2]), "S": int(sys.argv[3])}))' "${requests}" "${N}" "${S}" 2>/dev/null)"
  if [[ "${counted[${key}]:-unmeasured}" != "${expected}" ]]; then
    mismatches+=" ${key}: table ${expected:-unreadable}, logged ${counted[${key}]:-nothing};"
  fi
done <<<"${table}"
check "budget: each of the ${rows} rows of the REST budget table with a count (lookup 3, by-id 2, full 5, cache 2, state 2, gate 2 + 2S, collect 2 + N) is what the stand-in logged at N = ${N}, S = ${S}${mismatches:+ (${mismatches})}" \
  eval '((rows >= 10)) && [[ -z "${mismatches}" ]]'

# The totals and ceilings the runbook states, recomputed from the same table.
budget="$(python3 - "${docs}/operations.md" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = text.split("## REST budget", 1)[1].split("\n## ", 1)[0]
rows = [l.split("|")[1:5] for l in section.splitlines() if l.startswith("| ") and not l.startswith("|---")][1:]
def value(expr, n, s):
    expr = re.sub(r"(\d)\s*([NS])", r"\1*\2", expr.strip())
    return eval(expr, {"N": n, "S": s})
times = {"cycle": lambda n, s: 1, "shard": lambda n, s: n, "slot": lambda n, s: s,
         "slot and shard": lambda n, s: n * s}
def hourly(n, independent, s=2):
    total = 0
    for what, per, requests, _ in rows:
        per = per.strip()
        if what.strip().startswith("independent execution") and not independent:
            continue
        if per == "hour":
            total += value(requests, n, s)
        else:
            total += 4 * value(requests, n, s) * times[per](n, s)
    return total
out = []
for independent in (False, True):
    slope = hourly(2, independent) - hourly(1, independent)
    base = hourly(1, independent) - slope
    ceiling = max(n for n in range(1, 17) if hourly(n, independent) <= 800)
    out.append("%dN + %d N=%d" % (slope, base, ceiling))
print(";".join(out))
PY
)"
IFS=';' read -r plain independent <<<"${budget}"
stated="$(grep -o '\*\*[0-9]*N + [0-9]*\*\*\|\*\*N = [0-9]*\*\*' "${docs}/operations.md" | tr -d '*' | paste -sd' ')"
check "budget: the stated hourly totals and shard ceilings follow from the table (computed: ${plain}; ${independent}; stated: ${stated})" \
  eval '[[ "${stated}" == "${plain% N=*} ${independent% N=*} N = ${plain#* N=} N = ${independent#* N=}" ]]'

# --- the runbook and the workflows agree (#51 item 7) ----------------------------------------
agree() { python3 - "${workflows}" "${docs}/operations.md" "$1" <<'PY'
import glob, os, re, sys
import yaml
wf_dir, runbook, what = sys.argv[1:4]
flows = {os.path.basename(p): yaml.safe_load(open(p)) for p in sorted(glob.glob(wf_dir + "/*.yml"))}
text = open(runbook).read()
def steps():
    for name, flow in flows.items():
        for job_id, job in flow["jobs"].items():
            for step in job.get("steps", []):
                yield name, job_id, job, step
problems = []
if what == "count":
    words = {4: "four", 5: "five", 6: "six", 7: "seven"}
    if not re.search(r"runbook for the %s workflows" % words.get(len(flows), "?"), text):
        problems.append("the runbook does not say %d workflows" % len(flows))
elif what == "resume":
    step = [s for n, j, _, s in steps() if s.get("name") == "Resume open records without candidates"]
    if len(step) != 1 or "always()" not in str(step[0].get("if", "")):
        problems.append("keeper resume has no always() if: %r" % (step[0].get("if") if step else None))
elif what == "node24":
    node24 = {"actions/checkout@08c6903cd8c0fde910a37f88322edcfb5dd907a8",
              "actions/upload-artifact@330a01c490aca151604b8cf639adc76d48f6c5d4",
              "actions/download-artifact@018cc2cf5baa6db3ef3c5f8a56943fffe632ef53",
              "actions/attest-build-provenance@977bb373ede98d70efdf65b84cb5f73e068dcc2a"}
    problems += ["%s: %s" % (n, s["uses"]) for n, _, _, s in steps() if "uses" in s and s["uses"] not in node24]
elif what == "attest":
    # The build workflow only calls the reusable release build, whose jobs compile and attest.
    caller = flows["regression-verifier-build.yml"]["jobs"]
    if [j.get("uses") for j in caller.values()] != ["./.github/workflows/regression-verifier-release-build.yml"]:
        problems.append("the build workflow does not just call the reusable release build")
    build = flows["regression-verifier-release-build.yml"]["jobs"]
    for job_id, job in build.items():
        perms = job.get("permissions", {})
        compiles = any(re.search(r"cargo|scripts/", str(s.get("run", ""))) or "checkout" in str(s.get("uses", "")) for s in job["steps"])
        if perms.get("id-token") == "write" and compiles:
            problems.append("job %s compiles or checks out and holds id-token: write" % job_id)
    if not any(j.get("permissions", {}).get("id-token") == "write" for j in build.values()):
        problems.append("no job attests")
elif what == "retention":
    table = dict(re.findall(r"^\| `([^`]+)`(?: / `[^`]+`)? \| (\d+) \|$", text.split("## Retention", 1)[1].split("\n## ", 1)[0], re.M))
    def doc_name(name):
        return (name.replace("${{ matrix.slot == '1' && 'one' || 'two' }}", "one")
                .replace("${{ matrix.shard }}", "I").replace("${{ needs.plan.outputs.count }}", "N")
                .replace("${{ matrix.slot }}", "S").replace("${{ github.run_id }}", "RUN"))
    for n, _, _, s in steps():
        if "upload-artifact" in str(s.get("uses", "")):
            name = doc_name(s["with"]["name"])
            days = str(s["with"].get("retention-days", "unset"))
            if table.get(name) != days:
                problems.append("%s: %s days set, the runbook says %s" % (name, days, table.get(name)))
            if re.match(r"regression-(candidates|attestations)", name) and int(days) < 90:
                problems.append("%s kept %s days, shorter than a dispute" % (name, days))
print("; ".join(problems))
PY
}
for what in count resume node24 attest retention; do
  found="$(agree "${what}" 2>&1)"
  case "${what}" in
    count) name="the runbook names as many workflows as .github/workflows holds" ;;
    resume) name="keeper resume runs (if: always()) even when the relay exited 4 or 5" ;;
    node24) name="every action is pinned by SHA to its node24 release" ;;
    attest) name="the build compiles in one job and attests in another (no compile holds id-token: write)" ;;
    retention) name="every upload's retention is the runbook's Retention table, candidates and attestations at least 90 days" ;;
  esac
  check "runbook: ${name}${found:+ (${found})}" eval '[[ -z "${found}" ]]'
done

# CODEOWNERS covers every crate the signer and keeper link, and the build's inputs.
uncovered=""
if command -v cargo >/dev/null 2>&1; then
  for crate in $(for p in signer keeper; do cargo tree -p "${p}" -e normal,build --prefix none --offline 2>/dev/null; done |
    grep -o '(/[^)]*/crates/[a-z0-9_-]*)' | sed 's|.*/crates/||; s|)||' | sort -u); do
    grep -q "^/crates/${crate}/ " "${repo}/.github/CODEOWNERS" || uncovered+=" crates/${crate}"
  done
else
  uncovered=" (no cargo to list the crates)"
fi
for input in /Cargo.toml /Cargo.lock /rust-toolchain.toml /.ci/ /.github/; do
  grep -q "^${input} " "${repo}/.github/CODEOWNERS" || uncovered+=" ${input}"
done
check "runbook: CODEOWNERS covers every crate the signer and keeper link and the build's inputs${uncovered:+ (missing:${uncovered})}" \
  eval '[[ -z "${uncovered}" ]]'

# The runbook's commands, as written, where they can run here: the dedicated signer host's
# `signer sign` and `keeper relay` with the built binaries (endpoints that refuse: a parse
# error, exit 2, is what must not happen), and the release commands against the stand-in.
block() { # section heading, n-th fenced block
  awk -v h="$1" -v n="$2" '$0 == h { on = 1; next } on && k % 2 == 0 && /^#/ { exit } on && /^```/ { k++; next } on && k == 2 * n - 1' "${docs}/operations.md"
}
host="$(block "### From candidates to a signature" 2)"
cmds="$(sed 's|https://…|http://127.0.0.1:9|g; s|0x…|0x1111111111111111111111111111111111111111|; s|/var/lib/verifier-signer|$root|g; s|/usr/local/lib/verifier/pull-candidates.sh.*|mkdir -p "$snap/candidates" "$snap/att-1"|' <<<"${host}")"
root="${tmp}/signer-host"; mkdir -p "${root}"
exits=""
for binary in signer keeper; do
  cmd="$(awk -v b="${binary}" '$1 == b { on = 1 } on { print; if ($0 !~ /\\$/) exit }' <<<"${cmds}")"
  [[ -n "${cmd}" ]] || { exits+=" ${binary}:missing"; continue; }
  status=0
  # shellcheck disable=SC2030  # the built binaries first on PATH for this command only
  (export PATH="${bin_dir}:${PATH}" root REGRESSION_VERIFIER_KEY=0x01 REGRESSION_KEEPER_KEY=0x02
   snap="${root}/pull"; mkdir -p "${snap}/candidates" "${snap}/att-1"; eval "${cmd}") >/dev/null 2>"${tmp}/${binary}.err" || status=$?
  exits+=" ${binary}:${status}"
  if ((status == 2)); then echo "      $(grep -m1 -i "error" "${tmp}/${binary}.err")"; fi
done
check "runbook: the signer host's signer sign and keeper relay commands parse as written (exit codes:${exits})" \
  eval '[[ "${exits}" != *":2"* && "${exits}" != *missing* ]]'

printf '#!/usr/bin/env bash\n[[ "$1 $2" == "auth token" ]] && { echo test-token; exit 0; }\nexec %q "$@"\n' "${tmp}/fakebin/gh" > "${tmp}/fakebin/gh-runbook"
mkdir -p "${tmp}/runbook-bin"; mv "${tmp}/fakebin/gh-runbook" "${tmp}/runbook-bin/gh"; chmod +x "${tmp}/runbook-bin/gh"
main_at "${release_sha}"
add_routes --arg p "${r}/actions/variables/REGRESSION_RELEASE" --arg v "${release_sha}" '. + {($p): {name: "REGRESSION_RELEASE", value: $v}}'
releases="$(block "## Releases" 1 | sed "s|owner/repo|acme/verifier|g; s|<commit>|${release_sha}|g")"
ran=0 failed_cmds=""
while IFS= read -r cmd; do
  [[ -n "${cmd}" ]] || continue
  ran=$((ran + 1))
  # shellcheck disable=SC2031  # the PATH above was the subshell's own, as meant
  (cd "${repo}" && PATH="${tmp}/runbook-bin:${PATH}" eval "${cmd}") >/dev/null 2>&1 || failed_cmds+=" [${cmd}]"
done <<<"${releases}"
check "runbook: the ${ran} release commands of 'Releases' run as written against the stand-in" \
  eval '((ran == 2)) && [[ -z "${failed_cmds}" ]] && [[ "$(variable)" == "${release_sha}" ]]'

# --- the workflows' own downloads verify provenance offline (#49 item 3) ---------------------
# Every step that downloads a release binary (fetch-binaries.sh without LOOKUP_ONLY) checks its
# provenance with verify-provenance against the Sigstore root pinned in its own checkout: never
# `gh attestation verify` (VERIFY_ATTESTATION: gh), never unchecked (0). The verifier is built
# by the run's `verifier` job from the commit whose scripts and root the download step checks
# out (no key, no environment on that VM), and handed over as an artifact whose sha256 the
# download step checks against that job's output before running it.
offline="$(python3 - "${workflows}" <<'PY'
import glob, os, sys
import yaml
flows = {os.path.basename(p): yaml.safe_load(open(p)) for p in sorted(glob.glob(sys.argv[1] + "/*.yml"))}
problems, downloads = [], []
for name, flow in flows.items():
    jobs = flow["jobs"]
    for job_id, job in jobs.items():
        steps = job.get("steps", [])
        for step in steps:
            env = {k: str(v) for k, v in (step.get("env") or {}).items()}
            where = "%s %s %r" % (name, job_id, step.get("name"))
            if env.get("VERIFY_ATTESTATION", "1") != "1":
                problems.append("%s sets VERIFY_ATTESTATION: %s" % (where, env["VERIFY_ATTESTATION"]))
            if "gh attestation" in str(step.get("run", "")):
                problems.append("%s runs gh attestation" % where)
            if "fetch-binaries.sh" not in str(step.get("run", "")) or env.get("LOOKUP_ONLY", "0") != "0":
                continue
            downloads.append("%s:%s" % (name.replace("regression-verifier-", "").replace(".yml", ""), job_id))
            want = {"TRUSTED_ROOT": "deploy/sigstore/trusted_root.json",
                    "PROVENANCE_VERIFIER": "verifier/verify-provenance",
                    "PROVENANCE_VERIFIER_SHA256": "${{ needs.verifier.outputs.sha256 }}"}
            problems += ["%s: %s is %r, not %r" % (where, k, env.get(k), v) for k, v in want.items() if env.get(k) != v]
            needs = job.get("needs", [])
            if "verifier" not in ([needs] if isinstance(needs, str) else needs):
                problems.append("%s: the job does not need the verifier job" % where)
            before = steps[:steps.index(step)]
            checkout = [s for s in before if "actions/checkout@" in str(s.get("uses", ""))]
            sparse = str((checkout[0].get("with") or {}).get("sparse-checkout", "")).split() if checkout else []
            if "deploy/sigstore" not in sparse:
                problems.append("%s: its checkout %s has no deploy/sigstore (the pinned root)" % (where, sparse))
            fetched = [s for s in before if "actions/download-artifact@" in str(s.get("uses", ""))
                       and (s.get("with") or {}).get("name") == "verify-provenance"
                       and (s.get("with") or {}).get("path") == "verifier" and "if" not in s]
            if len(fetched) != 1:
                problems.append("%s: verify-provenance is not downloaded into verifier/ before it" % where)
            builder = jobs.get("verifier")
            if not builder:
                problems.append("%s has no verifier job" % name)
                continue
            b_checkout = [s for s in builder["steps"] if "actions/checkout@" in str(s.get("uses", ""))]
            ref = lambda steps_: str(((steps_[0].get("with") or {}) if steps_ else {}).get("ref", "github.sha"))
            if not b_checkout or (b_checkout[0].get("with") or {}).get("sparse-checkout"):
                problems.append("%s: the verifier job does not check out the whole source" % name)
            elif ref(b_checkout) != ref(checkout):
                problems.append("%s: the verifier is built from %s, the scripts and root come from %s" % (where, ref(b_checkout), ref(checkout)))
            if builder.get("environment") or "secrets." in str(builder):
                problems.append("%s: the verifier job holds an environment or a secret" % name)
            if builder.get("permissions") != {"contents": "read"}:
                problems.append("%s: the verifier job's permissions are %r" % (name, builder.get("permissions")))
            build = [s for s in builder["steps"] if s.get("run") == ".github/scripts/build-verifier.sh"]
            if len(build) != 1 or builder.get("outputs", {}).get("sha256") != "${{ steps.%s.outputs.sha256 }}" % build[0].get("id"):
                problems.append("%s: the verifier job's sha256 output is not build-verifier.sh's" % name)
            up = [s for s in builder["steps"] if "actions/upload-artifact@" in str(s.get("uses", ""))
                  and (s.get("with") or {}).get("name") == "verify-provenance"]
            if len(up) != 1 or up[0]["with"].get("path") != "verifier/verify-provenance" or up[0]["with"].get("if-no-files-found") != "error":
                problems.append("%s: the verifier job does not upload verifier/verify-provenance" % name)
print(" ".join(sorted(downloads)) + "|" + "; ".join(problems))
PY
)"
offline_downloads="${offline%%|*}" offline_problems="${offline#*|}"
check "offline provenance: no workflow step verifies with gh attestation verify (VERIFY_ATTESTATION: gh) or skips the check; each download step (${offline_downloads}) runs its run's own verify-provenance build, sha256-checked, against the checkout's pinned root${offline_problems:+ (${offline_problems})}" \
  eval '[[ "${offline_downloads}" == "keeper:relay runner:run-feed signer:rerun signer:sign" && -z "${offline_problems}" ]]'

# Each of those steps as written, with the real verify-provenance: a real GitHub Actions SLSA
# bundle and the file it attests (crates/provenance/tests/fixtures: pypi-attestations 0.0.19,
# built by trailofbits/pypi-attestations' release.yml at 08802efe…) stand in for a release whose
# worker, signer and keeper are that file, judged against deploy/sigstore/trusted_root.json
# with nothing of Sigstore's fetched. Its signer identity is the fixture's (SIGNER_* and
# SOURCE_REF, which the workflows leave at this repository's release build on main).
prov_fixtures="${repo}/crates/provenance/tests/fixtures"
prov_sha=08802efe1f8e5fec4ad842d6b8ce97656092ee72
prov_file="${prov_fixtures}/pypi_attestations-0.0.19.tar.gz"
prov_bundle="${prov_fixtures}/pypi_attestations-0.0.19.tar.gz.slsa.sigstore.json"
step_env=(SIGNER_REPOSITORY=trailofbits/pypi-attestations SIGNER_WORKFLOW=release.yml
  SIGNER_REF=refs/tags/v0.0.19 SOURCE_REF=refs/tags/v0.0.19)
use_verifier "${bin_dir}/verify-provenance"
add_routes --arg p "${r}/actions/variables/REGRESSION_RELEASE" --arg v "${prov_sha}" '. + {($p): {name: "REGRESSION_RELEASE", value: $v}}'
# Whoever can upload the build's artifact can rewrite SHA256SUMS too: one byte of the file
# changed and its sum rewritten, and the attestations API answering the real bundle for it.
cp "${prov_file}" "${tmp}/prov-flipped"
offset=$(($(stat -c %s "${tmp}/prov-flipped") / 2))
byte="$(od -An -tu1 -j "${offset}" -N1 "${tmp}/prov-flipped" | tr -d ' ')"
printf '%b' "\\$(printf '%03o' $(((byte + 1) % 256)))" | dd of="${tmp}/prov-flipped" bs=1 seek="${offset}" conv=notrunc status=none
download_step() { # workflow job step-name artifact-id
  local outputs
  outputs="$(jq -n --arg rel "${prov_sha}" --arg a "$4" '{outputs: {release: $rel, artifact_id: $a}}')"
  step "$1" "$2" "$3" "$(jq -n --argjson o "${outputs}" '{needs: {plan: $o, gate: $o}}')"
}
for download in "regression-verifier-runner.yml run-feed worker" "regression-verifier-signer.yml rerun worker" \
  "regression-verifier-signer.yml sign signer" "regression-verifier-keeper.yml relay keeper"; do
  read -r wf job b <<<"${download}"
  step_name="Download and verify the ${b} of the pinned release"
  built "${prov_sha}" 171 951 "${prov_file}" "${prov_bundle}"
  download_step "${wf}" "${job}" "${step_name}" 951
  check "offline provenance: ${wf} ${job}: a binary whose real bundle verifies offline against the pinned root is installed" \
    eval '((status == 0)) && cmp -s "${ws}/bin/${b}" "${prov_file}" && grep -q "/attestations/sha256:$(sha256sum "${prov_file}" | cut -d" " -f1)" "${tmp}/requests.log"'
  built "${prov_sha}" 171 951 "${tmp}/prov-flipped" "${prov_bundle}"
  download_step "${wf}" "${job}" "${step_name}" 951
  check "offline provenance: ${wf} ${job}: one byte of the fetched ${b} changed (SHA256SUMS rewritten to match) is refused by its provenance; nothing installed" \
    eval '((status != 0)) && said "artifact hash does not match" && grep -q "artifacts/951/zip" "${tmp}/requests.log" && [[ ! -e "${ws}/bin" ]]'
done

# The verifier runs only as the bytes its job built: another binary in its place (one byte
# appended), or no sha256 because the verifier job did not run, stops the step before anything is
# downloaded.
built "${prov_sha}" 171 951 "${prov_file}" "${prov_bundle}"
cp "${bin_dir}/verify-provenance" "${tmp}/verifier-changed"; printf 'x' >> "${tmp}/verifier-changed"
use_verifier "${tmp}/verifier-changed" "$(sha256sum "${bin_dir}/verify-provenance" | cut -d' ' -f1)"
download_step regression-verifier-signer.yml sign "Download and verify the signer of the pinned release" 951
changed_status="${status}" changed_fetched="$(grep -c "artifacts/951/zip" "${tmp}/requests.log")"
changed_said="$(said "is not the build its job reported" && echo yes)"
use_verifier "${bin_dir}/verify-provenance" ""
download_step regression-verifier-signer.yml sign "Download and verify the signer of the pinned release" 951
check "offline provenance: a verify-provenance that is not its job's build, or no build at all, runs nothing and downloads nothing; nothing installed" \
  eval '((changed_status != 0 && status != 0 && changed_fetched == 0)) && [[ "${changed_said}" == yes ]] && said "PROVENANCE_VERIFIER_SHA256 is not a sha256" && ! grep -q "artifacts/951/zip" "${tmp}/requests.log" && [[ ! -e "${ws}/bin" ]]'
step_env=()

check_summary
