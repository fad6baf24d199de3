#!/usr/bin/env bash
# The project's test command; README and .ci/run both point here so there is
# exactly one definition. Brings up the real services first (idempotent,
# about a second when they already run) and installs the Python packages some
# tests use as independent implementations (scripts/python-deps.sh), then runs
# every test against them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/services.sh
scripts/python-deps.sh
cargo nextest run --workspace --no-fail-fast
cargo test --workspace --doc
