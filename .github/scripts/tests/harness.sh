#!/usr/bin/env bash
# Shared by run.sh, setup.sh and release.sh (sourced, after they set `here`): a temporary directory, the
# local GitHub REST API stand-in (github_standin.py) answering from "${routes}", the `check`
# counter, and `run_script`, which runs a script with fresh GITHUB_OUTPUT and
# GITHUB_STEP_SUMMARY files and leaves status, stdout and the output files in globals.
# A caller that starts a background feed keeps its pid in `feed_pid`; cleanup stops it.
# shellcheck disable=SC2034,SC2154  # globals are read by, and `here` set by, the sourcing script
# Also sets `scripts` (.github/scripts) and `repo` (the repository's root) for the callers.
scripts="$(dirname "${here}")"
repo="$(cd "${here}/../../.." && pwd)"
tmp="$(mktemp -d)"
server_pid=""
feed_pid=""
cleanup() {
  [[ -n "${server_pid}" ]] && kill "${server_pid}" 2>/dev/null
  [[ -n "${feed_pid:-}" ]] && kill "${feed_pid}" 2>/dev/null
  rm -rf "${tmp}"
}
trap cleanup EXIT

routes="${tmp}/routes.json"
echo '{}' > "${routes}"
python3 "${here}/github_standin.py" "${routes}" "${tmp}/port" "${tmp}/requests.log" &
server_pid=$!
for _ in $(seq 50); do [[ -s "${tmp}/port" ]] && break; sleep 0.1; done
[[ -s "${tmp}/port" ]] || { echo "the GitHub stand-in did not start"; exit 1; }

GITHUB_API_URL="http://127.0.0.1:$(cat "${tmp}/port")"
export GITHUB_API_URL
export GH_TOKEN=test-token
export GITHUB_REPOSITORY=acme/verifier

# shellcheck source=scripts/tests/check.sh
source "${here}/../../../scripts/tests/check.sh"

# Runs a script with fresh output files; leaves status, stdout and outputs in globals.
run_script() {
  : > "${tmp}/requests.log"
  out_file="${tmp}/output"; summary_file="${tmp}/summary"
  : > "${out_file}"; : > "${summary_file}"
  stdout="$(GITHUB_OUTPUT="${out_file}" GITHUB_STEP_SUMMARY="${summary_file}" "$@" 2>&1)"
  status=$?
}
output_is() { grep -qxF "$1=$2" "${out_file}"; }
said() { grep -qF -- "$1" <<<"${stdout}"; }
