#!/usr/bin/env bash
# Independent execution: keeps, of the runner's candidates, only those this signer slot's own
# re-run agrees with, and hands the signer the slot's OWN candidate for each, so the slot signs
# its own run (its own response hash, its own evidence) and nothing it did not run itself.
#
# For each entry of the runner's manifest.json, the slot's own candidate for the same job (the
# file name derives from the job id) must exist and agree with the runner's, as `signer agree`
# decides (one definition, crates/verifier-sdk/src/agreement.rs): the same job, the same
# verdict and every commitment of the receipt equal (scope, manifest and command hashes,
# source and benchmark digests, image, isolation). The stream hashes may differ: a test
# runner that prints its durations gives a new response hash on every run, and the contract
# needs one verdict across the attestations, not one response hash (PROTOCOL §6).
# Agreement: the slot's own candidate is copied to the output directory and listed in its
# manifest.json. Disagreement (or a runner candidate that is no run of its job): `::error`
# and a summary line, nothing of that job is signed, and both candidates are kept in the
# disagreements directory (`<runner file stem>.runner.json` / `.own.json`) for the record. No
# own candidate (the re-run ended without a verdict, or the job left the feed): `::warning`,
# nothing kept. The output is always a valid candidate directory (possibly empty), so the
# signer signs exactly what agreed.
#
#   compare-candidates.sh <runner candidates> <own candidates> <out dir> [<disagreements dir>]
#
# The disagreements directory defaults to `<out dir>.disagreements`; it is created only when
# something disagreed. `SIGNER_BIN` names the signer binary (default `bin/signer`, where the
# signer workflow installs it).
#
# Exits 0 when every runner candidate agreed or was not re-run; 2 when at least one disagreed
# (a detection: the output still holds what agreed, for signing, and the slot's job must end
# red, docs/operations.md "Independent execution"); 1 when an input is unreadable or the
# signer cannot be run (nothing more is written).
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

runner="$1"
own="$2"
out="$3"
kept="${4:-${out%/}.disagreements}"
signer="${SIGNER_BIN:-bin/signer}"
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
[[ -x "${signer}" ]] || fail "the signer binary ${signer} is not there (SIGNER_BIN)"

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
  [[ -f "${runner}/${file}" && ! -L "${runner}/${file}" ]] || fail "the runner's ${file} is missing"
  runner_hash="$(jq -r '.outcome.response_hash // empty' "${runner}/${file}" 2>/dev/null)" ||
    fail "the runner's ${file} is unreadable"
  if [[ ! -f "${own}/${file}" ]]; then
    echo "::warning::job ${job_id}: not re-run here (no own candidate); not signed by this slot"
    summary "| ${job_id} | ${runner_hash} | none | not signed: no own candidate |"
    missing=$((missing + 1))
    continue
  fi
  own_hash="$(jq -r '.outcome.response_hash // empty' "${own}/${file}" 2>/dev/null || true)"
  rc=0
  answer="$("${signer}" agree --runner "${runner}/${file}" --own "${own}/${file}" --json 2>/dev/null)" || rc=$?
  case "${rc}" in
    0)
      what="$(jq -r '.summary' <<<"${answer}")"
      cp "${own}/${file}" "${out}/${file}"
      agreed="$(jq -c --arg id "${job_id}" --arg f "${file}" '. + [{job_id: $id, file: $f}]' <<<"${agreed}")"
      summary "| ${job_id} | ${runner_hash} | ${own_hash} | agree: ${what}; the slot signs its own run |"
      agree=$((agree + 1))
      ;;
    4 | 6)
      if ((rc == 6)); then
        why="$(jq -r '.summary' <<<"${answer}")"
      else
        why="not comparable: $(jq -r '.error.message // "unreadable"' <<<"${answer}" 2>/dev/null || echo unreadable)"
      fi
      mkdir -p "${kept}"
      cp "${runner}/${file}" "${kept}/${file%.json}.runner.json"
      cp "${own}/${file}" "${kept}/${file%.json}.own.json"
      echo "::error::job ${job_id}: independent re-run disagrees (${why}; response hash ${own_hash:-missing}, the runner's ${runner_hash:-missing}); not signed by this slot, both candidates kept in ${kept}"
      summary "| ${job_id} | ${runner_hash} | ${own_hash:-none} | **disagree**: ${why}; not signed |"
      disagree=$((disagree + 1))
      ;;
    *) fail "signer agree exited ${rc} for job ${job_id}" ;;
  esac
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
