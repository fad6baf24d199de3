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
# VERIFY_ATTESTATION=1 (the default), against the build's provenance attestation, which ties
# the bytes to that build rather than to whoever could upload an artifact: the attestations
# GitHub stores for the binary's sha256 are fetched (1 request per binary) and verified
# OFFLINE by verify-provenance (crates/provenance) against the Sigstore trusted root pinned in
# this repository (TRUSTED_ROOT, default deploy/sigstore/trusted_root.json; nothing of
# Sigstore's is fetched): certificate chain, signature, Rekor entry, the binary's sha256 as
# the in-toto subject, SLSA provenance, signed by the reusable release-build workflow of this
# repository (SIGNER_WORKFLOW, default regression-verifier-release-build.yml, which the build
# workflow calls) at refs/heads/main, built from COMMIT on main on a GitHub-hosted runner. One
# attestation that verifies is enough; none is a refusal. Only verify-provenance's exit 4 counts
# as a refused attestation: any other failure (78, an unusable trusted root) stops at once with
# its code named.
#
# verify-provenance is PROVENANCE_VERIFIER, else the one on PATH, else built here from this
# checkout (cargo build --release --locked -p provenance, a few minutes on a fresh runner).
# With PROVENANCE_VERIFIER_SHA256 set, even empty, only a verifier of exactly that sha256 runs,
# from a private copy, and anything else ends the job before a byte is downloaded: the
# workflows' download steps compile nothing, they run the build of their run's `verifier` job
# (.github/scripts/build-verifier.sh), handed over as an artifact of the run, and give that
# job's sha256 output here.
# SIGNER_REPOSITORY, SIGNER_REF and SOURCE_REF (defaults: GITHUB_REPOSITORY, refs/heads/main,
# refs/heads/main) exist for the tests, which verify a real bundle of another project.
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
# VERIFY_ATTESTATION (default 1; 0 only in tests of the other checks), TRUSTED_ROOT,
# PROVENANCE_VERIFIER, PROVENANCE_VERIFIER_SHA256, SIGNER_REPOSITORY, SIGNER_REF, SOURCE_REF.
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
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
trusted_root="${TRUSTED_ROOT:-${repo_root}/deploy/sigstore/trusted_root.json}"
signer_identity="https://github.com/${SIGNER_REPOSITORY:-${GITHUB_REPOSITORY:-}}/.github/workflows/${signer_workflow}@${SIGNER_REF:-refs/heads/main}"
source_ref="${SOURCE_REF:-refs/heads/main}"
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

# The verifier, found or built before anything is downloaded: without it nothing is installed.
verifier=""
verify_mode="${VERIFY_ATTESTATION:-1}"
[[ "${verify_mode}" =~ ^(0|1)$ ]] || fail "VERIFY_ATTESTATION is 1 (offline) or 0 (tests only), not ${verify_mode}"
if [[ "${verify_mode}" == 1 ]]; then
  [[ -f "${trusted_root}" ]] || fail "no pinned Sigstore trusted root at ${trusted_root}"
  verifier="${PROVENANCE_VERIFIER:-$(command -v verify-provenance || true)}"
  if [[ -z "${verifier}" ]]; then
    echo "building verify-provenance from this checkout (crates/provenance)"
    cargo build --release --locked --quiet --manifest-path "${repo_root}/Cargo.toml" \
      -p provenance --bin verify-provenance >&2 ||
      fail "verify-provenance could not be built; no binary is installed without its provenance checked"
    verifier="$(cargo metadata --format-version 1 --no-deps --manifest-path "${repo_root}/Cargo.toml" |
      jq -r .target_directory)/release/verify-provenance"
  fi
  if [[ -n "${PROVENANCE_VERIFIER_SHA256+set}" ]]; then
    # Empty when the job that built it did not run: never a reason to run whatever is there.
    [[ "${PROVENANCE_VERIFIER_SHA256}" =~ ^[0-9a-f]{64}$ ]] ||
      fail "PROVENANCE_VERIFIER_SHA256 is not a sha256 ('${PROVENANCE_VERIFIER_SHA256}'): the build of verify-provenance is unknown, so nothing is downloaded or installed"
    [[ -f "${verifier}" ]] || fail "verify-provenance ${verifier} is not a file"
    # Checked and run from one private copy, so the bytes run are the bytes checked.
    cp "${verifier}" "${work}/verify-provenance"
    chmod 0700 "${work}/verify-provenance"
    verifier_digest="$(sha256sum "${work}/verify-provenance" | cut -d' ' -f1)"
    [[ "${verifier_digest}" == "${PROVENANCE_VERIFIER_SHA256}" ]] ||
      fail "verify-provenance ${verifier} is not the build its job reported (sha256 ${verifier_digest}, expected ${PROVENANCE_VERIFIER_SHA256}); nothing is downloaded or installed"
    verifier="${work}/verify-provenance"
  fi
  [[ -x "${verifier}" ]] || fail "verify-provenance ${verifier} is not an executable"
fi

# Fails unless one of the attestations GitHub stores for the binary's sha256 verifies offline
# against the pinned root as the release build's provenance of COMMIT. The API only says where
# to look: what it answers is judged by the bundle's own signatures, never trusted.
verify_provenance() { # name file sha256
  local name="$1" file="$2" digest="$3" answer count i bundle status
  answer="$(api_get "/repos/${GITHUB_REPOSITORY}/attestations/sha256:${digest}")" ||
    fail "${name}: no provenance attestation could be fetched for sha256 ${digest}"
  count="$(jq -r '.attestations | length' <<<"${answer}" 2>/dev/null)" ||
    fail "${name}: the attestations answer is not JSON"
  if [[ ! "${count}" =~ ^[0-9]+$ ]] || ((count == 0)); then
    fail "${name}: no provenance attestation for sha256 ${digest}"
  fi
  for ((i = 0; i < count && i < 20; i++)); do
    bundle="${work}/${name}.${i}.sigstore.json"
    jq -c ".attestations[${i}].bundle" <<<"${answer}" >"${bundle}" || continue
    status=0
    "${verifier}" --trusted-root "${trusted_root}" --bundle "${bundle}" --artifact "${file}" \
      --identity "${signer_identity}" --source-digest "${commit}" --source-ref "${source_ref}" ||
      status=$?
    # The shared exit numbering (docs/reference.md "Exit codes"): only 4 is a refusal of this
    # bundle, after which another stored one may still vouch for the binary; any other failure
    # means nothing could be judged, and trying more bundles would only hide why.
    case "${status}" in
      0) return 0 ;;
      4) ;;
      78) fail "${name}: the pinned trusted root ${trusted_root} is unusable (verify-provenance exit 78)" ;;
      *) fail "${name}: verify-provenance could not judge its provenance (exit ${status})" ;;
    esac
  done
  fail "${name}: its build provenance does not verify against the pinned trusted root (signer ${signer_identity}, commit ${commit})"
}
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
  if [[ "${verify_mode}" == 1 ]]; then
    verify_provenance "${name}" "${file}" "${actual}"
  fi
done

# Installed only once every binary checked out.
mkdir -p "${dest}"
for name in "$@"; do
  install -m 0755 "${work}/files/${name}" "${dest}/${name}"
  summary "\`${name}\` sha256 \`$(sha256sum "${dest}/${name}" | cut -d' ' -f1)\` (release ${commit})"
  echo "installed ${dest}/${name}"
done
