#!/usr/bin/env bash
# The main job on the bundled examples, end to end on local services:
#   1. fixtures/example: stage the benchmark and two solver snapshots and run each through
#      `worker --run-regression` in the sandbox (expect `passed`, then `failed`);
#   2. fixtures/python-bounty: play whole bounties on the local chain (scripts/e2e.sh): the
#      feed runner, two verifier signers (threshold 2) and the keeper, ending in a confirmed
#      BountySettled for the good solution and SubmissionRejected for the bad one.
# Brings up Docker, the local registry with digest-pinned images and the chain as needed.
# Rerunnable.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*" >&2; }
json_field() { python3 -c 'import json,sys; v=json.loads(sys.argv[1])
for k in sys.argv[2:]: v=v[k]
print(v)' "$@"; }

step "services (Docker Engine, local registry, test images, local chain)"
scripts/services.sh

# Debug builds: each run takes seconds, and dependencies are optimised even in debug
# ([profile.dev.package."*"]), so this is far quicker end to end than a release build.
step "building the worker"
cargo build -q -p worker --bin worker --example example_job
worker=target/debug/worker
make_job=target/debug/examples/example_job

image=$(json_field "$(cat .work/images.json)" busybox)
root="$PWD/.work/example-staging"
mkdir -p "$root"
export REGRESSION_SANDBOX_STAGING_ROOT="$root"

step "worker --stage-regression-input benchmark fixtures/example/benchmark"
benchmark=$("$worker" --quiet --stage-regression-input benchmark fixtures/example/benchmark "$root" 67108864 10000)
echo "$benchmark"
benchmark_digest=$(json_field "$benchmark" snapshot digest)

status=0
for case in pass fail; do
  step "worker --stage-regression-input source fixtures/example/source-$case"
  source=$("$worker" --quiet --stage-regression-input source "fixtures/example/source-$case" "$root" 536870912 50000)
  echo "$source"
  request="$root/request-$case.json"
  "$make_job" "$image" "$(json_field "$source" snapshot digest)" "$benchmark_digest" \
    /bin/cmp /benchmark/expected.txt /workspace/result.txt >"$request"
  step "worker --run-regression $request"
  set +e
  outcome=$("$worker" --run-regression "$request" --evidence "$root/evidence-$case.json")
  code=$?
  set -e
  echo "$outcome"
  verdict=$(json_field "$outcome" verdict 2>/dev/null || echo "?")
  want=$([ "$case" = pass ] && echo passed || echo failed)
  echo "exit code $code, verdict $verdict (expected $want)" >&2
  [ "$code" = 0 ] && [ "$verdict" = "$want" ] || status=1
done
[ "$status" = 0 ] || { echo "example: unexpected outcome" >&2; exit 1; }

step "whole bounties on the local chain (scripts/e2e.sh)"
exec scripts/e2e.sh
