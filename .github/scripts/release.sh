#!/usr/bin/env bash
# Pins the release the runner, signer and keeper run: the repository variable
# REGRESSION_RELEASE, a main commit whose build passed. The operator's upgrade step
# (docs/operations.md "Releases"); nothing else writes the variable, so a merge to main never
# changes what runs and never leaves a window with nothing to run.
#
#   GH_TOKEN=$(gh auth token) GITHUB_REPOSITORY=owner/repo .github/scripts/release.sh <commit>
#
# Before it writes anything it checks, through the REST API, what every consumer checks again
# when it downloads (fetch-binaries.sh): the commit is on main (main's head or an ancestor),
# CI passed for it (a push run of ci.yml on main), a successful build run of it left an
# unexpired `regression-binaries` artifact, and each of worker, signer and keeper matches
# SHA256SUMS, COMMIT and (with VERIFY_ATTESTATION=1, the default) its build provenance
# attestation, verified offline by verify-provenance. Any failure leaves the variable as it
# was. DRY_RUN=1 checks and prints, without writing. The token must be allowed to write repository variables (an
# administrator's or maintainer's `gh auth token`; the workflows' GITHUB_TOKEN cannot).
#
# Prints the previous release, the new one and the artifact's expiry: a release must be
# replaced (or its commit rebuilt while it is main's head) before its artifact expires.
#
# Env: GITHUB_REPOSITORY, GH_TOKEN, GITHUB_API_URL, DRY_RUN, VERIFY_ATTESTATION.
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=.github/scripts/lib.sh
source "${here}/lib.sh"

variable=REGRESSION_RELEASE
commit="${1:-}"
[[ "${commit}" =~ ^[0-9a-f]{40}$ ]] || { echo "usage: release.sh <40-hex main commit>" >&2; exit 2; }
: "${GITHUB_REPOSITORY:?GITHUB_REPOSITORY is not set (owner/repo)}"
r="/repos/${GITHUB_REPOSITORY}"

# On main: main's head is the commit or ahead of it (the compare API's status from the
# commit to main: identical or ahead; behind or diverged is a commit main does not hold).
compare="$(api_get "${r}/compare/${commit}...main")" || { echo "release: cannot compare ${commit} with main" >&2; exit 1; }
case "$(jq -r .status <<<"${compare}")" in
  identical | ahead) ;;
  *) echo "release: ${commit} is not on main; only a commit of main is released" >&2; exit 1 ;;
esac

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
# The consumers' own check, for every binary at once: CI, build run, artifact, sums, commit,
# attestation. Its outputs name the artifact and its expiry.
: > "${work}/output"
if ! COMMIT="${commit}" DEST="${work}/bin" WAIT_SECONDS=0 GITHUB_OUTPUT="${work}/output" \
  "${here}/fetch-binaries.sh" worker signer keeper; then
  echo "release: the build of ${commit} did not check out (above); ${variable} is unchanged" >&2
  exit 1
fi
expires="$(awk -F= '$1 == "expires_at" { print $2 }' "${work}/output")"

previous=""
if current="$(api_get "${r}/actions/variables/${variable}" 2>/dev/null)"; then
  previous="$(jq -r '.value // empty' <<<"${current}")"
fi
echo "release: ${variable} ${previous:-(unset)} -> ${commit}; its build artifact expires ${expires:-unknown}"
if [[ "${DRY_RUN:-0}" != 0 ]]; then
  echo "release: DRY_RUN, nothing written"
  exit 0
fi
body="${work}/body.json"
jq -n --arg name "${variable}" --arg value "${commit}" '{name: $name, value: $value}' > "${body}"
if [[ -n "${previous}" ]]; then
  api_request "${r}/actions/variables/${variable}" "${work}/answer" --request PATCH \
    --header "Content-Type: application/json" --data-binary "@${body}" ||
    { echo "release: could not update ${variable}" >&2; exit 1; }
else
  api_request "${r}/actions/variables" "${work}/answer" --request POST \
    --header "Content-Type: application/json" --data-binary "@${body}" ||
    { echo "release: could not create ${variable}" >&2; exit 1; }
fi
echo "release: ${variable} = ${commit}"
