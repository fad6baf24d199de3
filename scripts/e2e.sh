#!/usr/bin/env bash
# Plays a whole bounty on the local services (issue 7): brings up Docker, the registry with
# the digest-pinned python image and the Hardhat chain, builds worker, signer, keeper and the
# bounty-e2e driver, then runs two scenarios on fresh contracts:
#   settled  — fixtures/python-bounty/solution-good passes the unittest benchmark; two
#              verifiers sign; the keeper's transaction emits BountySettled and pays the solver
#   rejected — solution-bad fails one test; the same path ends in SubmissionRejected
# Work files go to .work/e2e/ (cleaned at the start of each scenario). Rerunnable.
#
#   scripts/e2e.sh [settled|rejected]...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

step "services (Docker Engine, local registry, python image, local chain)"
scripts/services.sh

# Debug builds: the run itself takes seconds, and a debug build of the workspace (deps
# already optimised by [profile.dev.package."*"]) is far quicker than a release one.
step "building worker, signer, keeper and bounty-e2e (debug)"
cargo build -q -p worker -p signer -p keeper -p e2e

step "target/debug/bounty-e2e $*"
exec target/debug/bounty-e2e --repo . --bin-dir target/debug --work-dir .work/e2e "$@"
