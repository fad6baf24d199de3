#!/usr/bin/env bash
# Builds verify-provenance (crates/provenance) from this checkout for the workflows' download
# steps, copies it to OUT (default verifier/) and writes its sha256 as the step output `sha256`.
#
# Run by the `verifier` job of the runner, signer and keeper workflows, which checks out the
# same commit as the jobs that download release binaries (their .github/scripts and the
# Sigstore root pinned in deploy/sigstore): the verifier that judges a release's provenance is
# then the reviewed source of the commit those jobs already trust, compiled with the toolchain
# rust-toolchain.toml pins and the crates Cargo.lock pins by checksum (--locked), with no
# cache anyone else could have written. It is not fetched as a binary: no binary of it exists
# that something other than its own provenance could vouch for, and checking the verifier with
# itself proves nothing. The job holds no key and no environment, so no dependency's build
# script ever runs on a VM that later holds the signer's or keeper's key; the download steps run
# exactly these bytes (fetch-binaries.sh PROVENANCE_VERIFIER_SHA256).
#
# Env: OUT (default verifier), GITHUB_OUTPUT, GITHUB_STEP_SUMMARY.
set -euo pipefail
# shellcheck source=.github/scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

channel="$(sed -n 's/^channel[[:space:]]*=[[:space:]]*"\(.*\)"[[:space:]]*$/\1/p' rust-toolchain.toml)"
[[ "${channel}" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  { echo "::error::rust-toolchain.toml pins no exact toolchain (channel '${channel}')"; exit 1; }
if ! rustup run "${channel}" rustc --version >/dev/null 2>&1; then
  rustup toolchain install "${channel}" --profile minimal --no-self-update
fi
cargo "+${channel}" build --release --locked -p provenance --bin verify-provenance
target="$(cargo "+${channel}" metadata --format-version 1 --no-deps --locked | jq -r .target_directory)"
out="${OUT:-verifier}"
mkdir -p "${out}"
install -m 0755 "${target}/release/verify-provenance" "${out}/verify-provenance"
digest="$(sha256sum "${out}/verify-provenance" | cut -d' ' -f1)"
output sha256 "${digest}"
summary "\`verify-provenance\` built from $(git rev-parse HEAD 2>/dev/null || echo 'this checkout') with ${channel}: sha256 \`${digest}\`"
echo "built ${out}/verify-provenance, sha256 ${digest}"
