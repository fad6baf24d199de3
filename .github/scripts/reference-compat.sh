#!/usr/bin/env bash
# Compatibility mode with the reference pipeline (repository variable
# `REGRESSION_REFERENCE_COMPAT` = `true`; docs/operations.md, "Compatibility with the reference
# pipeline"): before a directory is also uploaded under the reference's artifact name, checks
# that it holds what the reference relay (`scripts/regression_verifier_pipeline.py relay` of
# NSPG13/agent-bounties) reads from it, and fails the step otherwise.
#
#   reference-compat.sh candidates DIR            for regression-candidates-<runner run id>
#   reference-compat.sh attestations DIR ADDRESS  for regression-attestations-one / -two
#
# What the reference relay reads: the candidates' `manifest.json` (`schema`
# agent-bounties/regression-candidate-manifest-v1, `candidates: [{job_id, file}]`, each file a
# candidate with schema agent-bounties/regression-candidate-v1 and that job); per signer
# directory `manifest.json` (`signer`: the lowercase address, `attestations: [{job_id, file}]`,
# each file an attestation with schema agent-bounties/regression-attestation-v1 of that job and
# signer). Other files in the directory are ignored by it.
set -euo pipefail

fail() {
  echo "::error::reference compatibility: $*"
  exit 1
}

kind="${1:-}"
dir="${2:-}"
[[ -d "${dir}" ]] || fail "${dir:-<no directory>} is not a directory"
manifest="${dir}/manifest.json"
[[ -f "${manifest}" && ! -L "${manifest}" ]] || fail "${dir} has no manifest.json, which the reference relay reads"

# check_entries LIST SCHEMA JQ_CONDITION: checks each file the manifest's LIST names (a plain
# name in DIR) holds SCHEMA for that job id ($id) and meets JQ_CONDITION; sets `checked` to the
# count. Not run in a subshell, so `fail` ends the script.
check_entries() {
  local list="$1" schema="$2" extra="$3" job_id file
  checked=0
  while IFS=$'\t' read -r job_id file; do
    [[ "${file}" =~ ^[A-Za-z0-9._-]+\.json$ ]] || fail "${manifest}: entry for ${job_id} names '${file}', not a file in the directory"
    [[ -f "${dir}/${file}" && ! -L "${dir}/${file}" ]] || fail "${manifest}: ${file} (job ${job_id}) is missing"
    jq -e --arg s "${schema}" --arg id "${job_id}" "(.schema == \$s) and ${extra}" "${dir}/${file}" >/dev/null ||
      fail "${dir}/${file}: not a ${schema} for job ${job_id}"
    checked=$((checked + 1))
  done < <(jq -r --arg l "${list}" '.[$l][] | [.job_id, .file] | @tsv' "${manifest}")
}

case "${kind}" in
  candidates)
    jq -e '.schema == "agent-bounties/regression-candidate-manifest-v1" and (.candidates | type == "array")' \
      "${manifest}" >/dev/null || fail "${manifest} is not a regression-candidate-manifest-v1"
    # shellcheck disable=SC2016 # a jq program; $id is jq's
    check_entries candidates agent-bounties/regression-candidate-v1 '(.job.job_id == $id) and (.outcome | type == "object")'
    echo "reference-compatible candidates: ${checked} in ${dir}"
    ;;
  attestations)
    address="$(tr '[:upper:]' '[:lower:]' <<<"${3:-}")"
    [[ "${address}" =~ ^0x[0-9a-f]{40}$ ]] || fail "no signer address given"
    jq -e --arg a "${address}" '.signer == $a and (.attestations | type == "array")' "${manifest}" >/dev/null ||
      fail "${manifest} does not name signer ${address} with a list of attestations"
    check_entries attestations agent-bounties/regression-attestation-v1 "(.job_id == \$id) and (.verifier | ascii_downcase) == \"${address}\""
    echo "reference-compatible attestations of ${address}: ${checked} in ${dir}"
    ;;
  *) fail "usage: reference-compat.sh candidates DIR | attestations DIR ADDRESS" ;;
esac
