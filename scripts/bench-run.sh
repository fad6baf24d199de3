#!/usr/bin/env bash
# Benchmarks one whole `worker --run-regression` of the bundled example (a trivial passing
# command) against a plain `docker run --rm` of the same image, argv, flags and mounts:
#   worker --run-regression request.json   vs   docker run --rm <same profile> image /bin/cmp …
# and reports hyperfine medians and their ratio (worker / docker run). The worker's number is
# the full command: request parse, job validation, engine connect, stale-container sweep,
# input re-verification before and after, create + inspect + start + wait + remove, evidence.
#
# Then the first run after idle: IDLE_REPEATS times, pause IDLE_SECS with nothing of ours
# running, time one run, pause again, time the other (the order alternates per repeat), and
# report both medians and their ratio, with the worker's phases read from its evidence record
# (process start -> begin -> create -> start -> finish -> remove -> exit) beside the same
# phases of a few warm runs. IDLE_TRACE=1 also keeps each idle worker run's debug log
# (WORKER_LOG=debug: one line per engine request) and prints its largest gaps.
#
# Needs the services (Docker daemon, local registry with the busybox image; brought up here
# through scripts/services.sh --no-python --no-rust --no-node), hyperfine and python3. Release build.
#
# Usage: scripts/bench-run.sh   (RUNS=20 ROUNDS=4 WARMUP=1 IDLE_SECS=60 IDLE_REPEATS=3
#                                to change the defaults; IDLE_REPEATS=0 skips the idle part;
#                                WORKER_BIN=path times that worker binary instead of a build)
set -euo pipefail

RUNS=${RUNS:-20}
WARMUP=${WARMUP:-1}
ROUNDS=${ROUNDS:-4}
IDLE_SECS=${IDLE_SECS:-60}
IDLE_REPEATS=${IDLE_REPEATS:-3}
IDLE_TRACE=${IDLE_TRACE:-0}
WARM_PHASES=${WARM_PHASES:-5}

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
bench_need bench-run hyperfine python3 docker
[ "$RUNS" -ge 10 ] || { echo "bench-run: RUNS must be at least 10" >&2; exit 2; }
[ "$ROUNDS" -ge 1 ] || { echo "bench-run: ROUNDS must be at least 1" >&2; exit 2; }
[ "$IDLE_REPEATS" -ge 0 ] && [ "$IDLE_SECS" -ge 0 ] \
    || { echo "bench-run: IDLE_REPEATS and IDLE_SECS must be numbers >= 0" >&2; exit 2; }

scripts/services.sh --no-python --no-rust --no-node >&2
cargo build -q --release -p worker --bin worker --example example_job >&2
BIN=${WORKER_BIN:-$(pwd)/target/release/worker}
MAKE_JOB=$(pwd)/target/release/examples/example_job
image=$(python3 -c 'import json; print(json.load(open(".work/images.json"))["busybox"])')

bench_sandbox_work bench-run
trap bench_remove_work EXIT
root=$WORK/staging
mkdir -p "$root"
export REGRESSION_SANDBOX_STAGING_ROOT=$root

request=$WORK/request.json
bench_example_request "$root" "$image" "$request"

# The raw baseline takes its limits and tmpfs options from the worker's own plan, so both
# sides run the identical profile.
plan=$("$BIN" plan "$request" --json)
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

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
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
print(f"warm: rounds: {len(sys.argv) - 1}, runs: {len(w)} worker, {len(d)} docker run (pooled)")
for name, t in (("worker --run-regression", w), ("docker run --rm", d)):
    print(f"{name:24} median {statistics.median(t)*1000:8.1f} ms   min {min(t)*1000:8.1f} ms   max {max(t)*1000:8.1f} ms")
ratio = statistics.median(w) / statistics.median(d)
print(f"ratio worker/docker-run (medians): {ratio:.3f}  -> {'met' if ratio <= 1 else 'MISSED'} (target <= 1.0)")
PY
echo "load after warm runs: $(cut -d' ' -f1-3 /proc/loadavg)"

# One timed run: "<which> <start ms> <end ms> <load> <evidence or ->" appended to $2. The
# evidence record is the one the run added (content-addressed, so found by the new name).
evidence_dir=$root/evidence/sha256
timed_run() {
    local which=$1 log=$2 trace=${3:-} t0 t1 load before after evidence=-
    load=$(cut -d' ' -f1 /proc/loadavg)
    before=$(ls "$evidence_dir" 2>/dev/null | sort)
    if [ "$which" = worker ]; then
        t0=$(date +%s%3N)
        if [ -n "$trace" ]; then
            WORKER_LOG=debug "${worker_cmd[@]}" >/dev/null 2>"$trace"
        else
            "${worker_cmd[@]}" >/dev/null
        fi
        t1=$(date +%s%3N)
        after=$(ls "$evidence_dir" | sort)
        evidence=$(comm -13 <(echo "$before") <(echo "$after") | head -1)
        evidence=${evidence:+$evidence_dir/$evidence}
        evidence=${evidence:--}
    else
        t0=$(date +%s%3N)
        "${docker_cmd[@]}" >/dev/null
        t1=$(date +%s%3N)
    fi
    echo "$which $t0 $t1 $load $evidence" >>"$log"
}

# Warm phases: the same timing as the idle runs, back to back, for the breakdown's baseline.
for _ in $(seq 1 "$WARM_PHASES"); do timed_run worker "$WORK/warm.txt"; done

if [ "$IDLE_REPEATS" -gt 0 ]; then
    echo "idle: $IDLE_REPEATS repeats, ${IDLE_SECS}s pause before each timed run" >&2
    for rep in $(seq 1 "$IDLE_REPEATS"); do
        if [ $((rep % 2)) -eq 1 ]; then order=(worker docker); else order=(docker worker); fi
        for which in "${order[@]}"; do
            sleep "$IDLE_SECS"
            trace=
            [ "$IDLE_TRACE" = 1 ] && [ "$which" = worker ] && trace=$WORK/idle-trace-$rep.log
            timed_run "$which" "$WORK/idle.txt" "$trace"
        done
    done
fi

python3 - "$WORK" "$IDLE_SECS" <<'PY'
import json, os, re, statistics, sys
from datetime import datetime
work, idle_secs = sys.argv[1], sys.argv[2]

def runs(name):
    path = os.path.join(work, name)
    if not os.path.exists(path):
        return []
    out = []
    for line in open(path):
        which, t0, t1, load, evidence = line.split()
        out.append({"which": which, "t0": int(t0), "t1": int(t1), "load": load,
                    "evidence": None if evidence == "-" else evidence})
    return out

PHASES = ["exec->begin", "begin->create", "create->start", "start->finish",
          "finish->remove", "remove->exit"]

def phases(run):
    ts = json.load(open(run["evidence"]))["timestamps"]
    marks = [run["t0"], ts["begin_ms"], ts["create_ms"], ts["start_ms"], ts["finish_ms"],
             ts["remove_ms"], run["t1"]]
    return [b - a for a, b in zip(marks, marks[1:])]

def med(values):
    return statistics.median(values) if values else float("nan")

warm = runs("warm.txt")
idle = runs("idle.txt")
iw = [r["t1"] - r["t0"] for r in idle if r["which"] == "worker"]
idd = [r["t1"] - r["t0"] for r in idle if r["which"] == "docker"]
if idle:
    print(f"first run after {idle_secs}s idle: {len(iw)} worker, {len(idd)} docker run (alternating which goes first)")
    for name, t in (("worker --run-regression", iw), ("docker run --rm", idd)):
        print(f"{name:24} median {med(t):8.1f} ms   min {min(t):8.1f} ms   max {max(t):8.1f} ms   all {t}")
    print(f"ratio worker/docker-run after idle (medians): {med(iw) / med(idd):.3f}")
    print("load at each idle run: " + ", ".join(f"{r['which']} {r['load']}" for r in idle))
rows = [("warm", [phases(r) for r in warm if r["evidence"]]),
        ("after idle", [phases(r) for r in idle if r["which"] == "worker" and r["evidence"]])]
print("worker phases, medians in ms (evidence timestamps; exec->begin includes engine connect,"
      " begin->create the image inspect, input digest and create, create->start the profile"
      " read-back, executable check, attach and start):")
print(f"{'':12}" + "".join(f"{p:>16}" for p in PHASES) + f"{'total':>10}")
for label, ps in rows:
    if not ps:
        continue
    cols = [med([p[i] for p in ps]) for i in range(len(PHASES))]
    total = med([sum(p) for p in ps])
    print(f"{label:12}" + "".join(f"{c:16.0f}" for c in cols) + f"{total:10.0f}")

# With IDLE_TRACE=1: the largest gaps between consecutive debug lines of each idle worker run.
stamp = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z\s+(\S+)\s+(.*)$")
for name in sorted(os.listdir(work)):
    if not name.startswith("idle-trace-"):
        continue
    lines = []
    for line in open(os.path.join(work, name), errors="replace"):
        m = stamp.match(line.strip())
        if m:
            t = datetime.fromisoformat(m.group(1)[:26])
            lines.append((t, m.group(3)[:150]))
    gaps = sorted(((b[0] - a[0]).total_seconds() * 1000, a[1], b[1])
                  for a, b in zip(lines, lines[1:]))[-8:]
    print(f"{name}: {len(lines)} log lines, largest gaps (ms, after -> before):")
    for ms, a, b in reversed(gaps):
        print(f"  {ms:7.1f}  {a}\n           -> {b}")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
