#!/usr/bin/env bash
# The Rust toolchain the tests need, on top of what rustup gives: the channel that
# rust-toolchain.toml pins, with rustfmt and clippy, cargo-nextest (scripts/test.sh runs the
# suite with it) and cargo-auditable (release builds). Idempotent: a second run checks and installs nothing. scripts/test.sh runs it,
# so README's test command works on a machine that has only rustup (issue #41 item 10).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib/host.sh
source scripts/lib/host.sh

command -v rustup >/dev/null 2>&1 ||
  die "rustup is not installed; it is needed to provide the toolchain pinned in rust-toolchain.toml"
channel="$(sed -n 's/^channel[[:space:]]*=[[:space:]]*"\(.*\)"[[:space:]]*$/\1/p' rust-toolchain.toml)"
[[ -n "$channel" ]] || die "no channel found in rust-toolchain.toml"
if ! rustup run "$channel" rustc --version >/dev/null 2>&1; then
  echo "installing toolchain $channel" >&2
  rustup toolchain install "$channel" --profile minimal --component rustfmt,clippy
fi
installed="$(rustup component list --installed --toolchain "$channel")"
for component in rustfmt clippy; do
  if ! grep -q "^$component" <<<"$installed"; then
    echo "adding $component to $channel" >&2
    rustup component add --toolchain "$channel" "$component"
  fi
done
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "installing cargo-nextest from crates.io" >&2
  cargo install --locked cargo-nextest
fi
# cargo-auditable (issue #49): release builds embed their dependency list with it
# (scripts/reproduce-build.sh, the release workflow). Pinned, so a new release cannot change
# the bytes of a rebuilt binary.
CARGO_AUDITABLE_VERSION=0.7.7
if ! cargo install --list | grep -qx "cargo-auditable v${CARGO_AUDITABLE_VERSION}:"; then
  echo "installing cargo-auditable ${CARGO_AUDITABLE_VERSION} from crates.io" >&2
  cargo install --locked cargo-auditable --version "${CARGO_AUDITABLE_VERSION}"
fi
rustc --version >&2
cargo nextest --version >&2
