#!/usr/bin/env bash
# The main job on the bundled example (fixtures/example): brings up Docker and the local
# registry with the digest-pinned busybox image, stages the benchmark and two solver
# snapshots, builds a hash-consistent verification job for each, and runs it in the sandbox.
# The passing snapshot ends in verdict `passed`, the other in `failed`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

step "services (Docker Engine, local registry, test images)"
scripts/services.sh --no-python

step "building the worker"
cargo build -q --release -p worker --bin worker --example example_job
worker=target/release/worker
make_job=target/release/examples/example_job

image=$(python3 -c 'import json,sys; print(json.load(open(".work/images.json"))["busybox"])')
root="$PWD/.work/example-staging"
mkdir -p "$root"
export REGRESSION_SANDBOX_STAGING_ROOT="$root"

step "staging the benchmark"
benchmark=$("$worker" --quiet --stage-regression-input benchmark fixtures/example/benchmark "$root" 67108864 10000)
echo "$benchmark"
benchmark_digest=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["snapshot"]["digest"])' "$benchmark")

status=0
for case in pass fail; do
  step "solver snapshot source-$case"
  source=$("$worker" --quiet --stage-regression-input source "fixtures/example/source-$case" "$root" 536870912 50000)
  echo "$source"
  source_digest=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["snapshot"]["digest"])' "$source")
  request="$root/request-$case.json"
  "$make_job" "$image" "$source_digest" "$benchmark_digest" \
    /bin/cmp /benchmark/expected.txt /workspace/result.txt >"$request"
  step "worker --run-regression $request"
  set +e
  "$worker" --run-regression "$request" --evidence "$root/evidence-$case.json"
  code=$?
  set -e
  echo "exit code: $code" >&2
  verdict=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["outcome"]["status"])' "$root/evidence-$case.json" 2>/dev/null || echo "?")
  expected=$([ "$case" = pass ] && echo 0 || echo 0)
  [ "$code" = "$expected" ] || status=1
done
exit "$status"
