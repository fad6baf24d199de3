#!/usr/bin/env bash
# Collects the candidates of every shard of one runner run into a single candidate directory
# (one merged manifest.json), or refuses the whole run.
#
# The runner fans `worker feed --shard i/n` out over a matrix; each shard uploads its
# candidates as the artifact `regression-candidates-shard-<i>-of-<n>`. The shard count comes
# from the run's jobs as GitHub reports them (`Run the verification feed (shard i/n)`), not
# from any artifact, since a shard's VM runs solver code and can upload whatever it likes
# under any name. Refused, each with `::error` and a summary row, and then nothing is written:
# - a shard job missing, or one that did not conclude `success`;
# - a shard's artifact missing, expired, or an extra `regression-candidates*` artifact;
# - an artifact holding anything but regular files and directories (a symlink could make
#   this job read, and forward, a file of its own VM), or a malformed manifest;
# - a candidate for a job another shard owns (the `--shard` formula, lib.sh `shard_of`), a
#   manifest entry whose file is not the job's own (`candidate-<sha256(job id)>.json` holding
#   that job), or a job listed twice, in one shard or across shards.
# A shard that planted a candidate for another shard's job would otherwise get it signed
# beside, or instead of, the owner's own; the signer re-checks every candidate it is given,
# but it cannot tell which shard was meant to run it.
# The merged manifest lists at most `manifest_bound` candidates (the one bound of every
# manifest, verifier_sdk::artifacts::MAX_MANIFEST_CANDIDATES; a Rust test holds the two
# equal): past it, the ones of the earliest `verification_expires_at`, with a `::warning::`,
# a summary line and the output `left_out` counting the rest (not copied; the next cycle offers
# them again). That is a crowded feed, not a refusal: the signer would sign no more anyway.
#
#   collect-shards.sh <out dir>
#
# Env: RUN_ID (the runner run), GITHUB_REPOSITORY, GH_TOKEN, GITHUB_OUTPUT (gets `count`,
# `shards`, the JSON list of shard indexes, and `left_out`), GITHUB_STEP_SUMMARY.
# Exits 0 with <out dir> holding every shard's candidates; 1 with nothing written.
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

out="$1"
run_id="${RUN_ID:?RUN_ID is not set}"
manifest_schema=agent-bounties/regression-candidate-manifest-v1
manifest_bound=1000
file_re='^candidate-[0-9a-f]{64}\.json$'
job_re='^Run the verification feed \(shard ([0-9]+)/([0-9]+)\)$'

[[ "${run_id}" =~ ^[0-9]+$ ]] || { echo "::error::RUN_ID is malformed"; exit 1; }
[[ ! -e "${out}" ]] || { echo "::error::${out} already exists"; exit 1; }

problems=0
rows=()
problem() { # shard message
  echo "::error::shard $1: $2"
  rows+=("| $1 | **refused**: $2 |")
  problems=$((problems + 1))
}
finish() {
  summary "### Runner shards (run ${run_id})"
  summary ""
  summary "| shard | result |"
  summary "|---|---|"
  local row
  for row in "${rows[@]}"; do summary "${row}"; done
  summary ""
  if ((problems > 0)); then
    summary "**Nothing signed**: ${problems} problem(s) with the shards of this run (see the annotations)."
    exit 1
  fi
}

# Each list once for all shards, every page (lib.sh api_get_all): 2 + N requests a collection.
jobs_json="$(api_get_all "/repos/${GITHUB_REPOSITORY}/actions/runs/${run_id}/jobs" jobs)" || {
  echo "::error::could not list the jobs of runner run ${run_id}"
  exit 1
}
# name <TAB> conclusion, for the shard jobs only.
shard_jobs="$(jq -r '.jobs[] | [.name, (.conclusion // "none")] | @tsv' <<<"${jobs_json}" |
  while IFS=$'\t' read -r name conclusion; do
    [[ "${name}" =~ ${job_re} ]] && printf '%s\t%s\t%s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${conclusion}"
  done || true)"
if [[ -z "${shard_jobs}" ]]; then
  problem "-" "the runner run has no shard jobs"
  finish
fi
counts="$(cut -f2 <<<"${shard_jobs}" | sort -u)"
if [[ "$(wc -l <<<"${counts}")" != 1 || ! "${counts}" =~ ^[1-9][0-9]?$ ]]; then
  problem "-" "the shard jobs disagree on the shard count ($(tr '\n' ' ' <<<"${counts}"))"
  finish
fi
count="${counts}"

artifacts_json="$(api_get_all "/repos/${GITHUB_REPOSITORY}/actions/runs/${run_id}/artifacts" artifacts)" || {
  echo "::error::could not list the artifacts of runner run ${run_id}"
  exit 1
}
expected_names=()
for ((i = 0; i < count; i++)); do expected_names+=("regression-candidates-shard-${i}-of-${count}"); done
while IFS= read -r name; do
  [[ " ${expected_names[*]} " == *" ${name} "* ]] ||
    problem "-" "unexpected artifact ${name} (this run has ${count} shard(s))"
  # The reference's name for the same candidates (compatibility mode, one shard; see
  # reference-compat.sh): never read here, so not a planted shard.
done < <(jq -r --arg compat "regression-candidates-${run_id}" \
  '.artifacts[].name | select(startswith("regression-candidates") and . != $compat)' <<<"${artifacts_json}")

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
declare -A owner=()
merged='[]'
network=""
for ((i = 0; i < count; i++)); do
  jobs_of_i="$(awk -F'\t' -v i="${i}" '$1 == i' <<<"${shard_jobs}")"
  if [[ -z "${jobs_of_i}" ]]; then
    problem "${i}" "no job of the runner run ran this shard"
    continue
  fi
  if [[ "$(wc -l <<<"${jobs_of_i}")" != 1 ]]; then
    problem "${i}" "more than one job of the runner run claims this shard"
    continue
  fi
  conclusion="$(cut -f3 <<<"${jobs_of_i}")"
  if [[ "${conclusion}" != success ]]; then
    problem "${i}" "its job concluded ${conclusion}; its jobs are not signed as if complete"
    continue
  fi
  name="regression-candidates-shard-${i}-of-${count}"
  ids="$(jq -r --arg n "${name}" '[.artifacts[] | select(.name == $n)] | map(.id) | @tsv' <<<"${artifacts_json}")"
  expired="$(jq -r --arg n "${name}" '[.artifacts[] | select(.name == $n and .expired == true)] | length' <<<"${artifacts_json}")"
  if [[ ! "${ids}" =~ ^[0-9]+$ ]]; then
    problem "${i}" "artifact ${name} is missing (or listed more than once)"
    continue
  fi
  if [[ "${expired}" != 0 ]]; then
    problem "${i}" "artifact ${name} has expired"
    continue
  fi
  dir="${work}/shard-${i}"
  if ! why="$(artifact_unpack "${ids}" "${dir}")"; then
    [[ -n "${why}" ]] || { echo "::error::could not download artifact ${name}"; exit 1; }
    problem "${i}" "artifact ${name}: ${why}"
    continue
  fi
  manifest="${dir}/manifest.json"
  if ! jq -e --arg s "${manifest_schema}" \
    '.schema == $s and (.network | type == "string") and (.candidates | type == "array")
     and all(.candidates[]; (.job_id | type == "string") and (.file | type == "string"))' \
    "${manifest}" >/dev/null 2>&1; then
    problem "${i}" "its manifest.json is missing or malformed"
    continue
  fi
  shard_network="$(jq -r .network "${manifest}")"
  if [[ -z "${network}" ]]; then
    network="${shard_network}"
  elif [[ "${shard_network}" != "${network}" ]]; then
    problem "${i}" "its manifest is for ${shard_network}, another shard's for ${network}"
    continue
  fi
  kept=0
  bad=0
  while IFS=$'\t' read -r job_id file; do
    why=""
    expected_file="candidate-$(printf '%s' "${job_id}" | sha256sum | cut -d' ' -f1).json"
    if [[ -n "${owner[${job_id}]+x}" ]]; then
      why="job ${job_id} is also listed by shard ${owner[${job_id}]} (a duplicate)"
    elif [[ "$(shard_of "${job_id}" "${count}")" != "${i}" ]]; then
      why="job ${job_id} belongs to shard $(shard_of "${job_id}" "${count}"), not this one"
    elif [[ ! "${file}" =~ ${file_re} || "${file}" != "${expected_file}" ]]; then
      why="job ${job_id} is listed with the file ${file}, not its own ${expected_file}"
    elif [[ ! -f "${dir}/${file}" ]] ||
      ! jq -e --arg id "${job_id}" '.job.job_id == $id' "${dir}/${file}" >/dev/null 2>&1; then
      why="${file} is missing or is not a candidate for job ${job_id}"
    fi
    owner[${job_id}]="${owner[${job_id}]:-${i}}"
    if [[ -n "${why}" ]]; then
      problem "${i}" "${why}"
      bad=$((bad + 1))
      continue
    fi
    kept=$((kept + 1))
  done < <(jq -r '.candidates[] | [.job_id, .file] | @tsv' "${manifest}")
  if ((bad == 0)); then
    merged="$(jq -c --slurpfile m "${manifest}" '. + $m[0].candidates' <<<"${merged}")"
    rows+=("| ${i} | ${kept} candidate(s) |")
  fi
done
finish

# Past the bound: the earliest-expiring first (ties in shard and manifest order); a candidate
# whose expiry does not read sorts last (the signer would refuse it anyway).
listed="$(jq length <<<"${merged}")"
left_out=0
if ((listed > manifest_bound)); then
  expiries="$(for ((i = 0; i < count; i++)); do
    (cd "${work}/shard-${i}" && jq -r '.candidates[].file' manifest.json |
      xargs -r jq -c '{(.job.job_id): .job.verification_expires_at}')
  done | jq -cs 'add // {}')"
  merged="$(jq -c --argjson at "${expiries}" --argjson n "${manifest_bound}" '
    [to_entries[] | {i: .key, e: .value,
      at: ($at[.value.job_id] | if type == "number" then . else infinite end)}]
    | sort_by(.at, .i) | map(.e) | .[:$n]' <<<"${merged}")"
  left_out=$((listed - manifest_bound))
  echo "::warning::${left_out} candidate(s) left out: a manifest lists at most ${manifest_bound}, the earliest-expiring; the next cycle offers the rest again"
fi
declare -A kept_file=()
while IFS= read -r file; do kept_file[${file}]=1; done < <(jq -r '.[].file' <<<"${merged}")

mkdir -p "${out}"
# Each candidate with the in-toto statement `worker feed` writes beside it, and each shard's
# feed report under its own name.
for ((i = 0; i < count; i++)); do
  while IFS= read -r file; do
    [[ -n "${kept_file[${file}]+x}" ]] || continue
    cp "${work}/shard-${i}/${file}" "${out}/${file}"
    statement="${file%.json}.intoto.json"
    if [[ -f "${work}/shard-${i}/${statement}" ]]; then
      cp "${work}/shard-${i}/${statement}" "${out}/${statement}"
    fi
  done < <(jq -r '.candidates[].file' "${work}/shard-${i}/manifest.json")
  if [[ -f "${work}/shard-${i}/feed-report.json" ]]; then
    cp "${work}/shard-${i}/feed-report.json" "${out}/feed-report-shard-${i}.json"
  fi
done
jq -n --arg s "${manifest_schema}" --arg n "${network}" --argjson c "${merged}" \
  '{schema: $s, network: $n, candidates: $c}' > "${out}/manifest.json"
output count "${count}"
output shards "$(jq -cn --argjson n "${count}" '[range($n)]')"
output left_out "${left_out}"
echo "collected $(jq length <<<"${merged}") candidate(s) from ${count} shard(s)"
summary "$(jq length <<<"${merged}") candidate(s) from ${count} shard(s), every shard complete."
if ((left_out > 0)); then
  summary "**Warning**: ${left_out} candidate(s) left out: a manifest lists at most ${manifest_bound} (the earliest-expiring); the next cycle offers them again."
fi
