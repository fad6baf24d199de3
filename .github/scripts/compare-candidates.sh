#!/usr/bin/env bash
# Independent execution: keeps, of the runner's candidates, only those this signer slot's own
# re-run agrees with, so the slot signs nothing it did not reproduce itself.
#
# For each entry of the runner's manifest.json, the slot's own candidate for the same job (the
# file name derives from the job id) must exist, be for the same job (identical `job`), and
# carry the same `outcome.response_hash`. Agreement: the runner's candidate is copied to the
# output directory and listed in its manifest.json. Disagreement: `::error` and a summary
# line, nothing of that job is kept. No own candidate (the re-run ended without a verdict, or
# the job left the feed): `::warning`, nothing kept. The output is always a valid candidate
# directory (possibly empty), so the signer signs exactly what agreed.
#
#   compare-candidates.sh <runner candidates> <own candidates> <out dir>
#
# Exits 0 when every runner candidate agreed or was not re-run; 2 when at least one disagreed
# (a detection: the output still holds what agreed, for signing, and the slot's job must end
# red, docs/operations.md "Independent execution"); 1 when an input is unreadable (nothing is
# written).
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

runner="$1"
own="$2"
out="$3"
manifest_schema=agent-bounties/regression-candidate-manifest-v1
file_re='^candidate-[0-9a-f]{64}\.json$'

fail() {
  echo "::error::$*"
  summary "Independent execution: nothing signed: $*"
  exit 1
}

[[ -f "${runner}/manifest.json" ]] || fail "the runner's candidates have no manifest.json"
jq -e --arg s "${manifest_schema}" '.schema == $s and (.candidates | type == "array")' \
  "${runner}/manifest.json" >/dev/null 2>&1 || fail "the runner's manifest.json is malformed"
network="$(jq -r '.network' "${runner}/manifest.json")"

mkdir -p "${out}"
agreed='[]'
agree=0
disagree=0
missing=0
summary "### Independent execution"
summary ""
summary "| job | runner response hash | own response hash | result |"
summary "|---|---|---|---|"
while IFS=$'\t' read -r job_id file; do
  [[ "${file}" =~ ${file_re} ]] || fail "the runner's manifest names ${file}"
  runner_hash="$(jq -r '.outcome.response_hash // empty' "${runner}/${file}" 2>/dev/null)" ||
    fail "the runner's ${file} is unreadable"
  if [[ ! -f "${own}/${file}" ]]; then
    echo "::warning::job ${job_id}: not re-run here (no own candidate); not signed by this slot"
    summary "| ${job_id} | ${runner_hash} | none | not signed: no own candidate |"
    missing=$((missing + 1))
    continue
  fi
  own_hash="$(jq -r '.outcome.response_hash // empty' "${own}/${file}" 2>/dev/null || true)"
  same_job=false
  if jq -e --slurpfile a "${runner}/${file}" --slurpfile b "${own}/${file}" -n \
    '$a[0].job == $b[0].job' >/dev/null 2>&1; then
    same_job=true
  fi
  if [[ "${same_job}" == true && "${runner_hash}" =~ ^0x[0-9a-f]{64}$ && "${own_hash}" == "${runner_hash}" ]]; then
    cp "${runner}/${file}" "${out}/${file}"
    agreed="$(jq -c --arg id "${job_id}" --arg f "${file}" '. + [{job_id: $id, file: $f}]' <<<"${agreed}")"
    summary "| ${job_id} | ${runner_hash} | ${own_hash} | agree |"
    agree=$((agree + 1))
  else
    why="response hash ${own_hash:-missing}, the runner's ${runner_hash:-missing}"
    [[ "${same_job}" == true ]] || why="a different job"
    echo "::error::job ${job_id}: independent re-run disagrees (${why}); not signed by this slot"
    summary "| ${job_id} | ${runner_hash} | ${own_hash:-none} | **disagree**: not signed |"
    disagree=$((disagree + 1))
  fi
done < <(jq -r '.candidates[] | [.job_id, .file] | @tsv' "${runner}/manifest.json")

jq -n --arg s "${manifest_schema}" --arg n "${network}" --argjson c "${agreed}" \
  '{schema: $s, network: $n, candidates: $c}' > "${out}/manifest.json"
summary ""
summary "${agree} agree, ${disagree} disagree, ${missing} not re-run; only the ${agree} that agree are signed."
echo "${agree} agree, ${disagree} disagree, ${missing} not re-run"
if ((disagree > 0)); then
  echo "::error::independent execution: ${disagree} job(s) disagree with this slot's own re-run; only what agreed is signed, and this slot's job fails"
  exit 2
fi
