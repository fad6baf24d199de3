#!/usr/bin/env bash
# Independent execution with shards: collects one signer slot's per-shard re-runs of THIS
# signer run into a single own-candidates directory for compare-candidates.sh, each re-run
# bound to the job that produced it. A re-run VM runs solver code; one that escaped the sandbox
# holds the run's artifact token and can upload under any name, so neither an artifact's name
# nor its folder is taken on trust:
# - the slot's re-run jobs are read from the API (`Re-run independently (slot S, shard i/n)`,
#   the latest attempt of each): exactly one per shard 0 … n-1, and every one concluded
#   `success`, or nothing is merged (the slot signs nothing);
# - the artifacts are listed through the API (every page): each shard's
#   `regression-rerun-S-shard-i` exactly once, unexpired, of this run, created while its own
#   job's upload step ran (artifact `created_at` within that step's start and end, 5 s slack
#   for clocks); any other `regression-rerun-*` name (`regression-rerun-1-shard-9-shard-1`),
#   a second artifact of a name, or one created outside its job's upload refuses the whole
#   slot. Artifact names are unique in a run, and each re-run job always uploads (a marker
#   file), so a planted artifact of a shard's name makes that shard's own upload, and so its
#   job, fail;
# - each is downloaded by its id (not by name), must hold only regular files, and contributes
#   only files `candidate-<sha256(job id)>.json` holding that job, for a job of its own shard
#   (lib.sh shard_of); anything else named like a candidate is dropped.
#
#   merge-reruns.sh <slot> <shard count> <out dir>
#
# Env: RUN_ID (this signer run), GITHUB_REPOSITORY, GH_TOKEN, GITHUB_STEP_SUMMARY.
# Exits 0 after a clean merge; 2 after merging when something was dropped (a detection: the
# slot's job must end red, the rest may still be signed); 1 when refused (nothing written).
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

slot="$1"
shards="$2"
out="$3"
run_id="${RUN_ID:?RUN_ID is not set}"
slack=5

refuse_all() {
  echo "::error::re-runs of slot ${slot}: $*; nothing of this slot's re-runs is used, nothing signed"
  summary "Re-runs of slot ${slot} refused: $*"
  exit 1
}
[[ "${slot}" =~ ^[1-9]$ ]] || refuse_all "slot ${slot} is malformed"
[[ "${shards}" =~ ^[1-9][0-9]*$ ]] || refuse_all "shard count ${shards} is malformed"
[[ "${run_id}" =~ ^[0-9]+$ ]] || refuse_all "RUN_ID is malformed"
[[ ! -e "${out}" ]] || refuse_all "${out} already exists"

jobs_json="$(api_get_all "/repos/${GITHUB_REPOSITORY}/actions/runs/${run_id}/jobs?filter=latest" jobs)" ||
  refuse_all "could not list the jobs of run ${run_id}"
artifacts_json="$(api_get_all "/repos/${GITHUB_REPOSITORY}/actions/runs/${run_id}/artifacts" artifacts)" ||
  refuse_all "could not list the artifacts of run ${run_id}"

# Any re-run artifact name other than regression-rerun-<slot>-shard-<i>, i < n.
while IFS= read -r name; do
  if [[ ! "${name}" =~ ^regression-rerun-([1-9])-shard-(0|[1-9][0-9]*)$ ]] || ((BASH_REMATCH[2] >= shards)); then
    refuse_all "unexpected artifact ${name} (this run has ${shards} shard(s))"
  fi
done < <(jq -r '.artifacts[].name | select(startswith("regression-rerun-"))' <<<"${artifacts_json}")

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
ids=()
for ((i = 0; i < shards; i++)); do
  job_name="Re-run independently (slot ${slot}, shard ${i}/${shards})"
  job="$(jq -c --arg n "${job_name}" '[.jobs[] | select(.name == $n)]' <<<"${jobs_json}")"
  [[ "$(jq length <<<"${job}")" == 1 ]] || refuse_all "not exactly one job '${job_name}' in run ${run_id}"
  conclusion="$(jq -r '.[0].conclusion // "none"' <<<"${job}")"
  [[ "${conclusion}" == success ]] || refuse_all "job '${job_name}' concluded ${conclusion}"
  # The upload step's window (the job's, when the API lists no steps).
  window="$(jq -r '.[0] as $j
    | ([$j.steps[]? | select(.name == "Upload this slot'"'"'s own candidates")] | first) as $s
    | [(($s.started_at // $j.started_at) | fromdateiso8601), (($s.completed_at // $j.completed_at) | fromdateiso8601)] | @tsv' \
    <<<"${job}" 2>/dev/null)" || refuse_all "job '${job_name}' has no readable start and end"
  read -r from to <<<"${window}"
  name="regression-rerun-${slot}-shard-${i}"
  artifact="$(jq -c --arg n "${name}" '[.artifacts[] | select(.name == $n)]' <<<"${artifacts_json}")"
  [[ "$(jq length <<<"${artifact}")" == 1 ]] || refuse_all "not exactly one artifact ${name}"
  id="$(jq -r '.[0].id' <<<"${artifact}")"
  [[ "${id}" =~ ^[0-9]+$ ]] || refuse_all "artifact ${name} has a malformed id"
  [[ "$(jq -r '.[0].expired' <<<"${artifact}")" == false ]] || refuse_all "artifact ${name} has expired"
  [[ "$(jq -r '.[0].workflow_run.id // empty' <<<"${artifact}")" == "${run_id}" ]] ||
    refuse_all "artifact ${name} does not name this run"
  created="$(jq -r '.[0].created_at | fromdateiso8601' <<<"${artifact}" 2>/dev/null)" ||
    refuse_all "artifact ${name} has no readable creation time"
  if ((created < from - slack || created > to + slack)); then
    refuse_all "artifact ${name} was created outside the upload of job '${job_name}' (not its own)"
  fi
  ids+=("${id}")
done

mkdir -p "${out}"
kept=0
dropped=0
refuse() {
  echo "::error::re-run artifact $1: $2; dropped, not used for signing"
  summary "| $1 | dropped: $2 |"
  dropped=$((dropped + 1))
}
summary "### Re-run shards merged (slot ${slot})"
summary ""
summary "| file | result |"
summary "|---|---|"
for ((i = 0; i < shards; i++)); do
  name="regression-rerun-${slot}-shard-${i}"
  folder="${work}/${name}"
  if ! why="$(artifact_unpack "${ids[i]}" "${folder}")"; then
    [[ -n "${why}" ]] || refuse_all "could not download artifact ${name}"
    refuse "${name}" "${why}"
    continue
  fi
  shopt -s nullglob
  for file in "${folder}"/candidate-*.json; do
    base="$(basename "${file}")"
    [[ "${base}" == *.intoto.json ]] && continue
    label="${name}/${base}"
    job_id="$(jq -r '.job.job_id | strings' "${file}" 2>/dev/null || true)"
    if [[ -z "${job_id}" ]]; then
      refuse "${label}" "no job id"
      continue
    fi
    expected="candidate-$(printf '%s' "${job_id}" | sha256sum | cut -d' ' -f1).json"
    if [[ "${base}" != "${expected}" ]]; then
      refuse "${label}" "holds job ${job_id}, whose candidate is ${expected}"
      continue
    fi
    owner="$(shard_of "${job_id}" "${shards}")"
    if [[ "${owner}" != "${i}" ]]; then
      refuse "${label}" "job ${job_id} is in shard ${owner}, not ${i}"
      continue
    fi
    if [[ -e "${out}/${base}" ]]; then
      refuse "${label}" "job ${job_id} was already answered"
      continue
    fi
    cp "${file}" "${out}/${base}"
    summary "| ${label} | kept |"
    kept=$((kept + 1))
  done
  shopt -u nullglob
done
summary ""
summary "${kept} kept, ${dropped} dropped."
echo "${kept} kept, ${dropped} dropped"
if ((dropped > 0)); then
  echo "::error::independent execution of slot ${slot}: ${dropped} re-run file(s) dropped (see the summary); this slot's job fails"
  exit 2
fi
