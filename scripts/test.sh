#!/usr/bin/env bash
# The project's test command; README and .ci/run both point here so there is
# exactly one definition. Needs the services from scripts/services.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo nextest run --workspace --no-fail-fast
cargo test --workspace --doc
