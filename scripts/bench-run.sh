#!/usr/bin/env bash
# Benchmarks one whole `worker --run-regression` of the bundled example (a trivial passing
# command) against a plain `docker run --rm` of the same image, argv, flags and mounts:
#   worker --run-regression request.json   vs   docker run --rm <same profile> image /bin/cmp …
# and reports hyperfine medians and their ratio (worker / docker run). The worker's number is
# the full command: request parse, job validation, engine connect, stale-container sweep,
# input re-verification before and after, create + inspect + start + wait + remove, evidence.
#
# Needs the services (Docker daemon, local registry with the busybox image; brought up here
# through scripts/services.sh --no-python), hyperfine and python3. Release build.
#
# Usage: scripts/bench-run.sh          (RUNS=20 ROUNDS=4 WARMUP=1 to change the defaults)
set -euo pipefail

RUNS=${RUNS:-20}
WARMUP=${WARMUP:-1}
ROUNDS=${ROUNDS:-4}

cd "$(dirname "$0")/.."
for tool in hyperfine python3 docker; do
    command -v "$tool" >/dev/null || { echo "bench-run: missing $tool" >&2; exit 1; }
done
[ "$RUNS" -ge 10 ] || { echo "bench-run: RUNS must be at least 10" >&2; exit 2; }
[ "$ROUNDS" -ge 1 ] || { echo "bench-run: ROUNDS must be at least 1" >&2; exit 2; }

scripts/services.sh --no-python >&2
cargo build -q --release -p worker --bin worker --example example_job >&2
BIN=$(pwd)/target/release/worker
MAKE_JOB=$(pwd)/target/release/examples/example_job
image=$(python3 -c 'import json; print(json.load(open(".work/images.json"))["busybox"])')

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-run.XXXXXX")
chmod 755 "$WORK"
# Staged trees are sealed read-only; make them writable so they can be removed.
cleanup() { chmod -R u+w "$WORK" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
root=$WORK/staging
mkdir -p "$root"
export REGRESSION_SANDBOX_STAGING_ROOT=$root

digest() { python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshot"]["digest"])'; }
benchmark=$("$BIN" --quiet --stage-regression-input benchmark fixtures/example/benchmark "$root" 67108864 10000 | digest)
source=$("$BIN" --quiet --stage-regression-input source fixtures/example/source-pass "$root" 536870912 50000 | digest)
request=$WORK/request.json
"$MAKE_JOB" "$image" "$source" "$benchmark" /bin/cmp /benchmark/expected.txt /workspace/result.txt >"$request"

# The raw baseline takes its limits and tmpfs options from the worker's own plan, so both
# sides run the identical profile.
plan=$("$BIN" plan "$request")
field() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]); exec("print(" + sys.argv[2] + ")")' "$plan" "$1"; }
cpus=$(field 'v["container"]["nano_cpus"] / 1e9')
memory=$(field 'v["container"]["memory"]')
pids=$(field 'v["container"]["pids_limit"]')
shm=$(field 'v["container"]["shm_size"]')
tmp_opts=$(field 'v["container"]["tmpfs"]["/tmp"]')
home_opts=$(field 'v["container"]["tmpfs"]["/tmp/home"]')
src_dir=$(field 'v["source"]["path"]')
bench_dir=$(field 'v["benchmark"]["path"]')

docker_cmd=(docker run --rm --network none --read-only --user 65532:65532 --cap-drop ALL
    --security-opt no-new-privileges --init --pids-limit "$pids"
    --memory "$memory" --memory-swap "$memory" --cpus "$cpus"
    --ipc private --shm-size "$shm" --hostname sandbox --log-driver none
    --ulimit nofile=4096:4096 --ulimit core=0:0
    -e HOME=/tmp/home -e LANG=C.UTF-8 -e LC_ALL=C.UTF-8 -e TZ=UTC -e SOURCE_DATE_EPOCH=0
    -e AGENT_BOUNTIES_TEST_SEED=1
    --tmpfs "/tmp:$tmp_opts" --tmpfs "/tmp/home:$home_opts"
    -v "$src_dir:/workspace:ro" -v "$bench_dir:/benchmark:ro" -w /workspace
    --entrypoint /bin/cmp "$image" /benchmark/expected.txt /workspace/result.txt)
worker_cmd=("$BIN" --run-regression "$request")

# Both must succeed before they are timed (hyperfine fails on a non-zero exit anyway).
"${worker_cmd[@]}" >&2
"${docker_cmd[@]}" >&2

quote() { printf '%q ' "$@"; }
echo "worker:      $(quote "${worker_cmd[@]}")" >&2
echo "docker run:  $(quote "${docker_cmd[@]}")" >&2
# hyperfine runs all of one command before the other, so on a shared, noisy machine a load
# change between the two blocks would land on one side only. Split the runs into ROUNDS
# hyperfine invocations that alternate the order, and pool every timing for the medians.
for round in $(seq 1 "$ROUNDS"); do
    per=$(( (RUNS + ROUNDS - 1) / ROUNDS ))
    w=(-n worker "$(quote "${worker_cmd[@]}")")
    d=(-n "docker run" "$(quote "${docker_cmd[@]}")")
    if [ $((round % 2)) -eq 1 ]; then order=("${w[@]}" "${d[@]}"); else order=("${d[@]}" "${w[@]}"); fi
    hyperfine --style basic --warmup "$WARMUP" --runs "$per" \
        --export-json "$WORK/hyperfine-$round.json" "${order[@]}" >&2
done

python3 - "$WORK"/hyperfine-*.json <<'PY'
import json, statistics, sys
times = {"worker": [], "docker run": []}
for path in sys.argv[1:]:
    for r in json.load(open(path))["results"]:
        times[r["command"]] += r["times"]
w, d = times["worker"], times["docker run"]
print(f"rounds: {len(sys.argv) - 1}, runs: {len(w)} worker, {len(d)} docker run (pooled)")
for name, t in (("worker --run-regression", w), ("docker run --rm", d)):
    print(f"{name:24} median {statistics.median(t)*1000:8.1f} ms   min {min(t)*1000:8.1f} ms   max {max(t)*1000:8.1f} ms")
ratio = statistics.median(w) / statistics.median(d)
print(f"ratio worker/docker-run (medians): {ratio:.3f}  -> {'met' if ratio <= 1 else 'MISSED'} (target <= 1.0)")
PY
