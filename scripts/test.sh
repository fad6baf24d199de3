#!/usr/bin/env bash
# The project's test command; README and .ci/run both point here so there is
# exactly one definition. Installs what the tests need that rustup alone does
# not give (scripts/toolchain.sh: the pinned channel, cargo-nextest), brings up
# the real services with every Debian package a test uses, gVisor's runsc
# registered (the suite runs some sandboxes under it; idempotent, about a second
# when they already run) and installs the Python packages some tests
# use as independent implementations (scripts/python-deps.sh), then runs every
# test against them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/toolchain.sh
scripts/services.sh --runsc
scripts/python-deps.sh
cargo nextest run --workspace --no-fail-fast
cargo test --workspace --doc
