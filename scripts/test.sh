#!/usr/bin/env bash
# The project's test command; README and .ci/run both point here so there is
# exactly one definition. Brings up the real services first (idempotent,
# about a second when they already run), then runs every test against them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/services.sh
cargo nextest run --workspace --no-fail-fast
cargo test --workspace --doc
