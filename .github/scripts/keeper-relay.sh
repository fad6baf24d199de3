#!/usr/bin/env bash
# Runs `keeper relay` over the attestation directories the signer run uploaded.
#
# Nothing to relay (no attestation file in any directory the signer slots uploaded) ends green without starting the keeper, so an
# RPC outage cannot fail a run that had nothing to send. Keeper exit 3 (some candidate refused,
# or sent but not yet confirmed; the next run resumes it) is a warning; every other non-zero
# status fails the job.
#
# Env: KEEPER_BIN (default bin/keeper), INPUT (default input: holds candidates/ and
# attestations/<artifact>/), STATE_DIR (default state), API_URL, RPC_URL (one endpoint or a
# comma-separated ordered list; empty: https://mainnet.base.org), MAX_GAS,
# MAX_FEE_PER_GAS, CONFIRMATIONS (default 3), REPLACE_AFTER_BLOCKS (default 10: blocks a sent
# settlement may stay unmined before the keeper replaces it with higher fees, within the caps),
# REPORT (default keeper-report.json), and the key
# in REGRESSION_KEEPER_KEY (passed by name, never on the command line).
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

keeper="${KEEPER_BIN:-bin/keeper}"
input="${INPUT:-input}"
state="${STATE_DIR:-state}"
report="${REPORT:-keeper-report.json}"

shopt -s nullglob
attestation_dirs=("${input}"/attestations/*/)
attestation_files=0
for file in "${input}"/attestations/*/attestation-*.json; do
  [[ "$(basename "${file}")" == attestation-manifest.json ]] || attestation_files=$((attestation_files + 1))
done
shopt -u nullglob
if ((attestation_files == 0)); then
  echo "no attestation artifacts in the signer run; nothing to relay"
  summary "Nothing to relay: the signer run uploaded no attestations."
  exit 0
fi
if [[ -z "${API_URL:-}" ]]; then
  echo "::error::vars.REGRESSION_VERIFIER_API_URL is not set"
  exit 78
fi
# RPC_URL may be a comma-separated, ordered list: one `--rpc` per endpoint, so the keeper fails
# over on its own (docs/operations.md "RPC outage"; lib.sh's rpc_args).
rpc_args rpc "${RPC_URL:-}"
args=(relay --candidates "${input}/candidates" --api "${API_URL}" "${rpc[@]}"
  --key-env REGRESSION_KEEPER_KEY --state-dir "${state}"
  --max-gas "${MAX_GAS:-1500000}" --max-fee-per-gas "${MAX_FEE_PER_GAS:-2000000000}"
  --confirmations "${CONFIRMATIONS:-3}" --replace-after-blocks "${REPLACE_AFTER_BLOCKS:-10}" --json)
for dir in "${attestation_dirs[@]}"; do
  args+=(--attestations "${dir%/}")
done
mkdir -p "${state}"
status=0
"${keeper}" "${args[@]}" > "${report}" || status=$?
case "${status}" in
  0)
    echo "every candidate relayed, settled or already done"
    summary "Relay finished: every candidate paid, rejected or already done."
    ;;
  3)
    echo "::warning::some candidates were refused or are not yet confirmed; see ${report} (the next run resumes)"
    summary "Relay finished with candidates refused or not yet confirmed (see the report)."
    ;;
  *)
    echo "::error::keeper relay exited with ${status}"
    summary "Relay failed: keeper exited with ${status}."
    exit "${status}"
    ;;
esac
