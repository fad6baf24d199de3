#!/usr/bin/env bash
# Benchmarks the two OCI runtimes side by side in one run: for each of ROUNDS rounds, one
# `worker --run-regression` of the bundled example (busybox `cmp`, a trivial passing command)
# and one `worker rehearse` of the Python bounty (fixtures/python-bounty, the good solution,
# its harness `run_tests.py 6`: snapshot, staging and one run), each under runc and under runsc,
# the order of the two runtimes alternating per round. Each timing is the whole command's wall
# time, and the 1-minute load average is read before and after each; every run must pass.
#
# Needs the services with runsc registered (scripts/services.sh --runsc) and python3. Uses the
# worker at WORKER_BIN (default: the debug build, built here if missing; a release build moves
# only the worker's own few ms, the container runtime dominates).
#
# Usage: scripts/bench-runsc.sh   (ROUNDS=6 to change the default)
set -euo pipefail

ROUNDS=${ROUNDS:-6}
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
[ "$ROUNDS" -ge 2 ] || { echo "bench-runsc: ROUNDS must be at least 2" >&2; exit 2; }
docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' ||
    { echo "bench-runsc: the engine has no runsc runtime (scripts/services.sh --runsc)" >&2; exit 1; }
if [ -z "${WORKER_BIN:-}" ]; then
    cargo build -q -p worker --bin worker --example example_job >&2
fi
BIN=${WORKER_BIN:-$(pwd)/target/debug/worker}
MAKE_JOB=${MAKE_JOB:-$(pwd)/target/debug/examples/example_job}

bench_sandbox_work bench-runsc
trap bench_remove_work EXIT
root=$WORK/staging
mkdir -p "$root"
chmod 700 "$root"
export REGRESSION_SANDBOX_STAGING_ROOT=$root

image() { python3 -c 'import json,sys; print(json.load(open(".work/images.json"))[sys.argv[1]])' "$1"; }
request=$WORK/request.json
bench_example_request "$root" "$(image busybox)" "$request"
manifest=$WORK/python.json
python3 - "$(image python)" "$manifest" <<'PY'
import json, sys
m = json.load(open("manifests/python-unittest.json"))
m["image"] = sys.argv[1]
m["command"] = ["python3", "-I", "-B", "/benchmark/run_tests.py", "6"]
json.dump(m, open(sys.argv[2], "w"))
PY

python3 - "$BIN" "$request" "$manifest" "$root" "$ROUNDS" <<'PY'
import json, subprocess, sys, time

sys.path.insert(0, "scripts/lib")
from bench_ab import load_line, ratio_header, ratio_row

bin_, request, manifest, root, rounds = sys.argv[1:6]
rounds = int(rounds)

def load():
    return float(open("/proc/loadavg").read().split()[0])

def run(kind, runtime):
    if kind == "run":
        argv = [bin_, "--run-regression", request, "--oci-runtime", runtime]
    else:
        argv = [bin_, "rehearse", "--source", "fixtures/python-bounty/solution-good",
                "--benchmark", "fixtures/python-bounty/benchmark", "--manifest", manifest,
                "--staging-root", root, "--json", "--quiet", "--oci-runtime", runtime]
    before = load()
    start = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True)
    took = time.monotonic() - start
    after = load()
    verdict = json.loads(out.stdout).get("verdict") if out.stdout.strip().startswith("{") else None
    if out.returncode != 0 or verdict != "passed":
        sys.exit(f"bench-runsc: {kind} under {runtime}: exit {out.returncode}, verdict {verdict}: {out.stderr[-2000:]}")
    return took, before, after

times = {(k, r): [] for k in ("run", "python") for r in ("runc", "runsc")}
loads = []
print(f"load before: {open('/proc/loadavg').read().strip()}")
for rnd in range(rounds):
    order = ("runc", "runsc") if rnd % 2 == 0 else ("runsc", "runc")
    for kind in ("run", "python"):
        for runtime in order:
            took, before, after = run(kind, runtime)
            times[(kind, runtime)].append(took)
            loads += [before, after]
            print(f"round {rnd + 1} {kind:6} {runtime:5} {took * 1000:8.1f} ms  load {before:.2f} -> {after:.2f}", flush=True)
print(f"load after: {open('/proc/loadavg').read().strip()}")
print()
print(ratio_header("runc", "runsc"))
names = {"run": "one `--run-regression` (busybox `cmp`)", "python": "Python bounty `rehearse` (6 tests + canary)"}
for kind in ("run", "python"):
    print(ratio_row(names[kind], times[(kind, "runc")], times[(kind, "runsc")], "ms", 1000, 0))
print()
print(load_line(loads))
PY
