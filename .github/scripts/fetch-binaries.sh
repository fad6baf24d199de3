#!/usr/bin/env bash
# Downloads the release binaries the build workflow (regression-verifier-build.yml) built for
# one main commit, verifies them and installs them into DEST. Fails closed: no build for the
# commit, an expired artifact, a missing binary, a checksum or commit mismatch, or (on
# Actions) a provenance attestation that does not verify all end the job with nothing
# installed.
#
# COMMIT must have passed CI first: a successful push run of the CI workflow (CI_WORKFLOW,
# default ci.yml) for exactly COMMIT on main in this repository, looked up through the API
# before anything is downloaded. The build workflow itself runs only after such a CI run, but
# a dispatched rebuild does not wait for one, so the check is made here, where the binaries are
# about to be used.
#
# Only a successful run of the build workflow itself, for exactly COMMIT, on main, triggered by
# a successful CI run, pushed or dispatched in this repository counts: an artifact of the same name from a pull request, a
# branch, a fork or any other workflow is never even listed. The artifact carries SHA256SUMS
# and COMMIT beside the binaries; each binary's digest is checked against SHA256SUMS and, with
# VERIFY_ATTESTATION=1 (the default), against the build's provenance attestation
# (`gh attestation verify`: signed by the reusable release-build workflow of this repository
# (SIGNER_WORKFLOW, default regression-verifier-release-build.yml, which the build workflow
# calls), on main, at COMMIT), which ties the bytes to that build rather than to whoever could
# upload an artifact.
#
#   fetch-binaries.sh <binary>...      e.g. fetch-binaries.sh worker
#
# COMMIT is the pinned release (the repository variable REGRESSION_RELEASE, a main commit whose
# build passed; docs/operations.md "Releases"), not main's head: a merge to main does not
# change what runs, so it never leaves a window without binaries.
#
# Looked up once per run (docs/operations.md "REST budget"): LOOKUP_ONLY=1 does the CI check
# and the lookup only (3 requests) and writes `artifact_id` and `expires_at` to GITHUB_OUTPUT;
# a later job of the same run passes that id as ARTIFACT_ID and only downloads and verifies
# (1 request, plus 1 per binary for its attestation). The id comes from a job of the same run,
# and the bytes are still checked against COMMIT, SHA256SUMS and the attestation.
#
# A build that has not finished yet is waited for up to WAIT_SECONDS (default 0), polling
# every 30 s.
#
# Env: COMMIT (40 hex; the release the calling run works with), DEST (default bin),
# WAIT_SECONDS, ARTIFACT_ID, LOOKUP_ONLY, GITHUB_REPOSITORY, GH_TOKEN, GITHUB_API_URL,
# GITHUB_OUTPUT (optional), BUILD_WORKFLOW (default regression-verifier-build.yml),
# CI_WORKFLOW (default ci.yml), SIGNER_WORKFLOW (default regression-verifier-release-build.yml),
# VERIFY_ATTESTATION (default 1).
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fail() {
  echo "::error::$*"
  summary "Binaries not installed: $*"
  exit 1
}

(($# > 0)) || fail "no binary named"
commit="${COMMIT:-}"
[[ -n "${commit}" ]] ||
  fail "no release is pinned: set the repository variable REGRESSION_RELEASE with .github/scripts/release.sh (docs/operations.md, Releases)"
[[ "${commit}" =~ ^[0-9a-f]{40}$ ]] || fail "COMMIT is not a 40-hex commit"
dest="${DEST:-bin}"
workflow="${BUILD_WORKFLOW:-regression-verifier-build.yml}"
ci_workflow="${CI_WORKFLOW:-ci.yml}"
signer_workflow="${SIGNER_WORKFLOW:-regression-verifier-release-build.yml}"
artifact_name=regression-binaries
for name in "$@"; do
  [[ "${name}" =~ ^[a-z][a-z0-9-]*$ ]] || fail "bad binary name ${name}"
done

# Prints "<id> <expires_at>" of the newest unexpired artifact of a successful build run of the
# commit (nothing when there is none); fails when the API does not answer.
find_artifact() {
  local runs run_ids run_id artifacts id
  runs="$(api_get "/repos/${GITHUB_REPOSITORY}/actions/workflows/${workflow}/runs?branch=main&head_sha=${commit}&status=success&per_page=20")" || return 1
  run_ids="$(jq -r --arg repo "${GITHUB_REPOSITORY}" --arg sha "${commit}" '
    .workflow_runs
    | sort_by(.created_at) | reverse
    | .[]
    | select(.head_sha == $sha and .head_branch == "main" and .conclusion == "success"
             and (.event == "workflow_run" or .event == "push" or .event == "workflow_dispatch")
             and .head_repository.full_name == $repo and .repository.full_name == $repo)
    | .id' <<<"${runs}")" || return 1
  for run_id in ${run_ids}; do
    [[ "${run_id}" =~ ^[0-9]+$ ]] || continue
    artifacts="$(api_get "/repos/${GITHUB_REPOSITORY}/actions/runs/${run_id}/artifacts?name=${artifact_name}")" || continue
    id="$(jq -r --arg name "${artifact_name}" \
      '[.artifacts[] | select(.name == $name and .expired == false) | "\(.id) \(.expires_at // "unknown")"] | first // empty' <<<"${artifacts}")"
    if [[ "${id%% *}" =~ ^[0-9]+$ ]]; then
      echo "using the binaries of build run ${run_id} (artifact ${id%% *}) for ${commit}" >&2
      echo "${id}"
      return 0
    fi
  done
}

# True when a push run of the CI workflow passed for exactly COMMIT on main in this repository;
# fails when the API does not answer.
ci_passed() {
  local runs
  runs="$(api_get "/repos/${GITHUB_REPOSITORY}/actions/workflows/${ci_workflow}/runs?branch=main&event=push&head_sha=${commit}&status=success&per_page=20")" || return 2
  jq -e --arg repo "${GITHUB_REPOSITORY}" --arg sha "${commit}" --arg path ".github/workflows/${ci_workflow}" '
    [.workflow_runs[]
     | select(.head_sha == $sha and .head_branch == "main" and .event == "push"
              and .conclusion == "success" and (.path == $path or (.path | startswith($path + "@")))
              and .head_repository.full_name == $repo and .repository.full_name == $repo)]
    | length > 0' <<<"${runs}" >/dev/null || return 1
}

artifact_id="${ARTIFACT_ID:-}"
if [[ -n "${artifact_id}" ]]; then
  [[ "${artifact_id}" =~ ^[0-9]+$ ]] || fail "ARTIFACT_ID is not an artifact id"
  [[ "${LOOKUP_ONLY:-0}" == 0 ]] || fail "LOOKUP_ONLY with ARTIFACT_ID: nothing to look up"
  echo "using artifact ${artifact_id}, looked up for ${commit} earlier in this run"
fi

deadline=$((SECONDS + ${WAIT_SECONDS:-0}))
while [[ -z "${artifact_id}" ]]; do
  ci_status=0
  ci_passed || ci_status=$?
  ((ci_status != 2)) || fail "could not list the CI workflow's runs of ${commit}"
  ((ci_status == 0)) && break
  ((SECONDS >= deadline)) &&
    fail "${commit} has no successful CI run (${ci_workflow}, push on main); binaries of a commit that did not pass CI are never used"
  echo "CI has not passed for ${commit} yet; waiting"
  sleep 30
done
if [[ -z "${artifact_id}" ]]; then
  while true; do
    found="$(find_artifact)" || fail "could not list the build workflow's runs of ${commit}"
    [[ -n "${found}" ]] || ((SECONDS >= deadline)) && break
    echo "no finished build of ${commit} yet; waiting"
    sleep 30
  done
  [[ -n "${found}" ]] ||
    fail "no unexpired ${artifact_name} artifact of a successful build run for ${commit} on main; run the build workflow for this commit"
  artifact_id="${found%% *}"
  expires_at="${found#* }"
  if [[ -n "${GITHUB_OUTPUT:-}" ]]; then
    output commit "${commit}"
    output artifact_id "${artifact_id}"
    output expires_at "${expires_at}"
  fi
  if [[ "${LOOKUP_ONLY:-0}" != 0 ]]; then
    summary "Release ${commit}: build artifact ${artifact_id}, expires ${expires_at}."
    echo "found artifact ${artifact_id} of ${commit} (expires ${expires_at})"
    exit 0
  fi
fi

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
api_download "/repos/${GITHUB_REPOSITORY}/actions/artifacts/${artifact_id}/zip" "${work}/artifact.zip" ||
  fail "could not download artifact ${artifact_id}"
mkdir "${work}/files"
unzip -q "${work}/artifact.zip" -d "${work}/files" || fail "artifact ${artifact_id} is not a readable zip"

[[ -f "${work}/files/COMMIT" && "$(cat "${work}/files/COMMIT")" == "${commit}" ]] ||
  fail "artifact ${artifact_id} was not built from ${commit}"
[[ -f "${work}/files/SHA256SUMS" ]] || fail "artifact ${artifact_id} has no SHA256SUMS"

for name in "$@"; do
  file="${work}/files/${name}"
  [[ -f "${file}" && ! -L "${file}" ]] || fail "artifact ${artifact_id} has no ${name}"
  expected="$(awk -v n="${name}" '$2 == n || $2 == "*" n { print $1 }' "${work}/files/SHA256SUMS")"
  [[ "${expected}" =~ ^[0-9a-f]{64}$ ]] || fail "SHA256SUMS has no single digest for ${name}"
  actual="$(sha256sum "${file}" | cut -d' ' -f1)"
  [[ "${actual}" == "${expected}" ]] ||
    fail "${name} does not match its SHA-256 (${actual}, expected ${expected})"
  if [[ "${VERIFY_ATTESTATION:-1}" != 0 ]]; then
    gh attestation verify "${file}" --repo "${GITHUB_REPOSITORY}" \
      --signer-workflow "${GITHUB_REPOSITORY}/.github/workflows/${signer_workflow}" \
      --source-ref refs/heads/main --source-digest "${commit}" --deny-self-hosted-runners >/dev/null ||
      fail "${name}: its build provenance attestation does not verify"
  fi
done

# Installed only once every binary checked out.
mkdir -p "${dest}"
for name in "$@"; do
  install -m 0755 "${work}/files/${name}" "${dest}/${name}"
  summary "\`${name}\` sha256 \`$(sha256sum "${dest}/${name}" | cut -d' ' -f1)\` (release ${commit})"
  echo "installed ${dest}/${name}"
done
