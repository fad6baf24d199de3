#!/usr/bin/env bash
# Independent execution with shards: merges one signer slot's per-shard re-run outputs into a
# single own-candidates directory for compare-candidates.sh, keeping from each shard's artifact
# only the candidates of jobs that shard owns. A re-run VM runs solver code; one that escaped
# the sandbox could otherwise plant, beside its own shard's results, a candidate agreeing with
# a forged runner candidate for a job of another shard, whose honest re-run ran on another VM.
#
#   merge-reruns.sh <downloaded dir> <shard count> <out dir>
#
# <downloaded dir> holds one folder per artifact, `regression-rerun-<slot>-shard-<i>`, as
# actions/download-artifact writes a pattern without merge-multiple. A file there is kept only
# when it is a regular file (not a link) named `candidate-<sha256(job id)>.json` for the job id
# it holds, and that job is in shard i (lib.sh shard_of, the worker's formula). Anything else
# named like a candidate is dropped with an `::error` (that job is then not signed by this slot
# unless its own shard's re-run supplied it); other files (feed reports, in-toto statements)
# are not carried. Exits 0 after merging, 1 on unusable arguments (nothing written).
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

downloaded="$1"
shards="$2"
out="$3"

[[ "${shards}" =~ ^[1-9][0-9]*$ ]] || { echo "::error::shard count ${shards} is malformed"; exit 1; }
[[ -d "${downloaded}" || ! -e "${downloaded}" ]] || { echo "::error::${downloaded} is not a folder"; exit 1; }
mkdir -p "${out}"

refuse() {
  echo "::error::re-run artifact $1: $2; dropped, not used for signing"
  summary "| $1 | dropped: $2 |"
  dropped=$((dropped + 1))
}

kept=0
dropped=0
summary "### Re-run shards merged"
summary ""
summary "| file | result |"
summary "|---|---|"
shopt -s nullglob
for folder in "${downloaded}"/*; do
  name="$(basename "${folder}")"
  if [[ -L "${folder}" || ! -d "${folder}" || ! "${name}" =~ -shard-([0-9]+)$ ]]; then
    refuse "${name}" "not a re-run shard's folder"
    continue
  fi
  shard="${BASH_REMATCH[1]}"
  if [[ ! "${shard}" =~ ^(0|[1-9][0-9]*)$ ]] || ((shard >= shards)); then
    refuse "${name}" "shard ${shard} is not one of 0..$((shards - 1))"
    continue
  fi
  for file in "${folder}"/candidate-*.json; do
    base="$(basename "${file}")"
    [[ "${base}" == *.intoto.json ]] && continue
    label="${name}/${base}"
    if [[ -L "${file}" || ! -f "${file}" ]]; then
      refuse "${label}" "not a regular file"
      continue
    fi
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
    if [[ "${owner}" != "${shard}" ]]; then
      refuse "${label}" "job ${job_id} is in shard ${owner}, not ${shard}"
      continue
    fi
    cp "${file}" "${out}/${base}"
    summary "| ${label} | kept |"
    kept=$((kept + 1))
  done
done
summary ""
summary "${kept} kept, ${dropped} dropped."
echo "${kept} kept, ${dropped} dropped"
