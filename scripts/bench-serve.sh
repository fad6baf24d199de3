#!/usr/bin/env bash
# Jobs per hour for a batch of small jobs, several ways, in one run under the same conditions
# (issue 14's benchmark, with issue 29's Engine-API anchor):
#   A  `worker serve --parallel 1` until every job of the batch has a candidate
#   B  `worker serve --parallel 2`, the same
#   C  the scheduled runner's equivalent: cycles of a cold `worker feed` as
#      .github/workflows/regression-verifier-runner.yml runs it (`--max-jobs` MAX_JOBS, default
#      10 as the workflow's, `--pull --json`, a fresh staging root and work dir each cycle, the
#      result cache kept between cycles as the workflow restores it), back to back, until every
#      job has a candidate. Between cycles the feed drops the jobs that have a candidate, as the
#      platform does once they are settled; otherwise each cycle would pick the same earliest
#      expiring jobs again.
#   D  `worker serve` with the default --parallel (what the engine and the manifests allow,
#      crates/worker-serve/src/capacity.rs), the same
#   S<n>  `worker serve --parallel n` (not in the default set; for finding the best n)
#   E1, E2, E4  the raw Engine-API anchor (crates/worker/examples/engine_anchor.rs): the same
#      jobs with the same create request (the worker's own create body for the same manifest)
#      as create / start / wait / remove through bollard, with 1, 2 and 4 in flight: the
#      engine's own throughput, nothing of the worker around the container (E<n>: n in flight)
#   W<n>  the anchor with the worker's other engine calls around each container (not in the
#      default set): the container read back after create and after the stop, its output
#      attached, its events followed (ANCHOR_ADD=inspect,attach,events); W<n> beside E<n> is
#      what those calls cost the engine's throughput, apart from everything else serve does
# The table gives each serve mode's ratio to the anchor's best in-flight count, and for each
# serve mode the p50/p99 time from the job appearing in the feed (the whole batch appears at
# once, when the clock starts) to its candidate file (its mtime). The serve runs log at info
# with the executor's timing split (WORKER_LOG below); the second table is the breakdown of
# serve's per-job work from those lines: archive download and extraction, staging, the
# sandbox run (the lifecycle around the container and the container itself), the evidence
# write, and the rest of the runner (judging, cache, candidate write), each as a mean and as
# a share of the job's total; plus the time from the clock's start to the first run (start-up
# and the first poll) and, for a fixed --parallel, the share of each slot's time outside the
# runner. The third splits the sandbox run by the evidence's own timestamps.
#
# The jobs are the bundled example (busybox `cmp` of the benchmark's expected output with the
# solver's result), alternately on its passing and its failing source, each with its own job
# id, served with their archives by a local platform stand-in
# (crates/worker/examples/bench_feed.rs, the `worker serve` tests' feed).
#
# What C leaves out, so it is a lower bound on the runner's cost per cycle: the VM start, the
# checkout, the binary download and verification, the artifact upload and download, the image
# pull (the image stays in this engine; the Actions VM starts without it), and the 15-minute
# schedule itself. The schedule caps the real runner at MAX_JOBS x 4 jobs per hour whatever
# its speed; the table prints that cap beside the measurement.
#
# The order of the modes rotates across repeats; each measurement gets fresh output, state,
# staging and work directories created before its clock starts, and nothing is deleted while a
# clock runs. The load average is recorded before and after each measurement.
#
# Needs the services (Docker Engine and the local registry with the busybox image, brought up
# here through scripts/services.sh --no-python --no-rust --no-node), python3 and jq. Release build (PROFILE=debug
# to use the debug build instead). Cleans up its processes and files on exit.
#
# Usage: scripts/bench-serve.sh    (JOBS=50 REPEATS=3 MAX_JOBS=10 TIMEOUT=3600 to change;
#        MODES="A B D C E1 E2 E4" to run only some; KEEP=1 keeps the run directories;
#        WORKER_BIN=path to measure another worker binary)
set -euo pipefail

JOBS=${JOBS:-50}
REPEATS=${REPEATS:-3}
MAX_JOBS=${MAX_JOBS:-10}
TIMEOUT=${TIMEOUT:-3600}
PROFILE=${PROFILE:-release}
MODES=${MODES:-A B D C E1 E2 E4}

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
bench_need bench-serve python3 jq bc docker
bench_positive bench-serve "JOBS, REPEATS, MAX_JOBS and TIMEOUT" "$JOBS" "$REPEATS" "$MAX_JOBS" "$TIMEOUT"
for mode in $MODES; do
    case "$mode" in
        A | B | C | D) ;;
        E[1-9] | E[1-9][0-9] | W[1-9] | W[1-9][0-9] | S[1-9] | S[1-9][0-9]) ;;
        *) echo "bench-serve: unknown mode $mode (A B C D, E<n> the anchor with n in flight, W<n> the anchor with the worker's calls, S<n> serve --parallel n)" >&2; exit 2 ;;
    esac
done
bench_profile bench-serve

bench_serve_build "worker, bench_feed and engine_anchor" --example engine_anchor
ANCHOR=$(pwd)/target/$PROFILE/examples/engine_anchor
# WORKER_BIN=path measures another build of the worker (say, a copy of the one before a change)
# against the same anchor, feed and jobs.
BIN=${WORKER_BIN:-$BIN}
image=$(jq -r .busybox .work/images.json)

bench_serve_work bench-serve

bench_feed_start bench-serve
# The anchor's trees: the example's, readable by the sandbox user (as staging makes them).
mkdir -p "$WORK/anchor"
cp -r fixtures/example/source-pass fixtures/example/source-fail fixtures/example/benchmark "$WORK/anchor/"
chmod -R a+rX "$WORK/anchor"

now() { date +%s.%N; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# Candidate files only, not the in-toto statements written beside them.
candidates_in() { find "$@" -name 'candidate-*.json' ! -name '*.intoto.json' 2>/dev/null | wc -l; }
# The same count into $counted without a fork (a command substitution would be one): the
# candidate-*.json names less the statements among them.
count_candidates() {
    local all statements
    all=("$1"/candidate-*.json)
    statements=("$1"/candidate-*.intoto.json)
    [[ -e "${all[0]}" ]] || all=()
    [[ -e "${statements[0]}" ]] || statements=()
    counted=$((${#all[@]} - ${#statements[@]}))
}
results=$WORK/results.tsv
latencies=$WORK/latencies.tsv
logs=$WORK/serve-logs
: >"$results"
: >"$latencies"
mkdir -p "$logs"

# METER=1: each measurement also goes through scripts/engine-meter.py, a counting proxy in
# front of the engine's socket (DOCKER_HOST) that also reads the engine's own CPU time
# (dockerd, containerd, the shims and their runc) over the measurement. The engine's work per
# job does not depend on the machine's load, so this comparison holds where the jobs/hour do
# not; the proxy slows every client, so the jobs/hour of a metered run are not comparable to
# an unmetered one's.
METER=${METER:-}
meters=$WORK/meters
mkdir -p "$meters"
meter_pid=""
meter_env=()
meter_start() { # label
    [[ -n "$METER" ]] || return 0
    local sock=$meters/engine.sock n
    n=$(find "$meters" -name "$1-*.json" | wc -l)
    touch "$meters/engine.start"
    python3 scripts/engine-meter.py "$sock" "$meters/$1-$n.json" &
    meter_pid=$!
    for _ in $(seq 100); do [[ -S "$sock" ]] && break; sleep 0.05; done
    [[ -S "$sock" ]] || { echo "bench-serve: the engine meter did not start" >&2; exit 1; }
    meter_env=(DOCKER_HOST="unix://$sock")
}
meter_stop() { # [client CPU ticks]
    [[ -n "$meter_pid" ]] || return 0
    kill -TERM "$meter_pid"
    wait "$meter_pid" || true
    meter_pid=""
    meter_env=()
    local f
    f=$(find "$meters" -name '*.json' -newer "$meters/engine.start" | head -1)
    if [[ -n "${1:-}" && -n "$f" ]]; then
        jq --argjson t "$1" --argjson hz "$(getconf CLK_TCK)" '.client_cpu_s = $t / $hz' "$f" >"$f.new" && mv "$f.new" "$f"
    fi
}
# utime + stime + reaped children's of process $1, in clock ticks.
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13 + $14 + $15}'; }
trap 'meter_stop; bench_serve_cleanup' EXIT

# Every job once: the candidates' job ids (from the files themselves) are the feed's, once each.
check_batch() { # label dirs...
    local label=$1 ids
    shift
    ids=$(bench_candidate_ids "$@" | sort)
    if [[ "$ids" != "$(jq -r '.[].job_id' "$WORK/feed/all-jobs.json" | sort)" ]]; then
        echo "bench-serve: $label did not produce exactly one candidate per job" >&2
        exit 1
    fi
}

# A and B: one `worker serve` until the batch is done.
measure_serve() { # label parallel run-dir
    local label=$1 parallel=$2 dir=$3 start end before after
    mkdir -p "$dir/out" "$dir/state" "$dir/work" "$dir/staging"
    cp "$WORK/feed/all-jobs.json" "$WORK/feed/feed.json"
    meter_start "$label"
    before=$(load)
    start=$(now)
    local flags=()
    [[ "$parallel" == default ]] || flags=(--parallel "$parallel")
    env "${meter_env[@]}" WORKER_LOG=warn,worker_serve=info,worker_jobs::feed::sandbox_executor=debug NO_COLOR=1 \
        "$BIN" serve --api "$api" --verifier "$verifier" --out "$dir/out" --state "$dir/state" \
        --work-dir "$dir/work" --staging-root "$dir/staging" --archive-base "$api" \
        "${flags[@]}" --poll-interval 1 --pull 2>"$dir/serve.log" &
    serve_pid=$!
    # Watched without a fork per look but the sleep (globs, builtins, the shell's own clock),
    # so the watch loads the two cores no more than the anchor's wait for its own process.
    local deadline=$((${EPOCHREALTIME%.*} + TIMEOUT))
    local counted=0
    while count_candidates "$dir/out" && ((counted < JOBS)); do
        bench_watch bench-serve "$label" "$deadline" "$dir/serve.log" -- "$serve_pid"
    done
    # The clock stops when the last candidate was written (its mtime), not when this loop
    # next looked: the look's 0.2 s step would add 0.1 s on average to a run of a few
    # seconds, where the anchor's clock stops the moment its process exits.
    end=$(bench_last_candidate "$dir/out")
    after=$(load)
    local client=""
    [[ -z "$METER" ]] || client=$(cpu_ticks "$serve_pid")
    kill -TERM "$serve_pid"
    wait "$serve_pid" || true
    serve_pid=""
    meter_stop "$client"
    check_batch "$label" "$dir/out"
    printf '%s\t%s\t%s\t%s\t%s\n' "$label" "$start" "$end" "$before" "$after" >>"$results"
    # Feed to candidate: every job appeared when the clock started; its candidate's mtime.
    find "$dir/out" -name 'candidate-*.json' ! -name '*.intoto.json' -printf '%T@\n' |
        while read -r t; do printf '%s\t%s\n' "$label" "$(echo "$t - $start" | bc)"; done >>"$latencies"
    printf '%s\n' "$start" >"$logs/$label-$(basename "$dir").start"
    find "$dir/out" -name 'candidate-*.json' ! -name '*.intoto.json' -exec jq -r \
        '.evidence.timestamps | [.begin_ms, .create_ms, .start_ms, .finish_ms, .remove_ms, .engine_started, .engine_finished] | @tsv' {} + \
        >"$logs/$label-$(basename "$dir").stamps"
    cp "$dir/serve.log" "$logs/$label-$(basename "$dir").log"
    echo "  $label: $(echo "$end - $start" | bc) s (load $before -> $after)" >&2
}

# E1, E2, E4: the raw Engine-API anchor with K in flight; W<n>, the same with the worker's
# other engine calls added (ADD, the anchor's ANCHOR_ADD).
measure_anchor() { # label in-flight [add]
    local label=$1 k=$2 add=${3:-} start end before after client
    meter_start "$label"
    # The anchor runs in the foreground: its CPU is this shell's reaped children's growth.
    client=$(cpu_ticks $$)
    before=$(load)
    start=$(now)
    env "${meter_env[@]}" ANCHOR_ADD="$add" "$ANCHOR" "$image" "$WORK/anchor/source-pass" "$WORK/anchor/source-fail" "$WORK/anchor/benchmark" \
        "$JOBS" "$k" >"$WORK/anchor-$label.out" || {
        echo "bench-serve: the anchor ($label) failed" >&2
        exit 1
    }
    end=$(now)
    after=$(load)
    meter_stop "$(($(cpu_ticks $$) - client))"
    printf '%s\t%s\t%s\t%s\t%s\n' "$label" "$start" "$end" "$before" "$after" >>"$results"
    echo "  $label: $(echo "$end - $start" | bc) s (load $before -> $after)" >&2
}

# C: cold `worker feed` cycles, back to back, in the runner workflow's argument shape.
measure_cycles() { # run-dir
    local dir=$1 start end before after cycle=0 cycles status
    cycles=$(((JOBS + MAX_JOBS - 1) / MAX_JOBS + 2))
    mkdir -p "$dir/cache"
    for ((k = 0; k < cycles; k++)); do mkdir -p "$dir/cycle-$k/candidates" "$dir/cycle-$k/tmp/regression-staging"; done
    cp "$WORK/feed/all-jobs.json" "$WORK/feed/feed.json"
    before=$(load)
    start=$(now)
    while (($(candidates_in "$dir"/cycle-*/candidates) < JOBS)); do
        if ((cycle >= cycles)); then
            echo "bench-serve: C needed more than $cycles cycles" >&2
            exit 1
        fi
        status=0
        "$BIN" feed --api "$api" --network base-mainnet --verifier "$verifier" \
            --out "$dir/cycle-$cycle/candidates" --max-jobs "$MAX_JOBS" \
            --staging-root "$dir/cycle-$cycle/tmp/regression-staging" \
            --work-dir "$dir/cycle-$cycle/tmp" --cache-dir "$dir/cache" \
            --archive-base "$api" --pull --json \
            >"$dir/cycle-$cycle/feed-report.json" 2>"$dir/cycle-$cycle/feed.log" || status=$?
        if ((status != 0 && status != 3)); then
            echo "bench-serve: worker feed (C, cycle $cycle) exited with $status; its log:" >&2
            tail -20 "$dir/cycle-$cycle/feed.log" >&2
            exit 1
        fi
        # The platform settles what has a candidate: those jobs leave the feed.
        bench_candidate_ids "$dir"/cycle-*/candidates |
            jq -R . | jq -s . >"$dir/done.json"
        jq --slurpfile settled "$dir/done.json" '[.[] | select(.job_id as $id | $settled[0] | index($id) | not)]' \
            "$WORK/feed/all-jobs.json" >"$WORK/feed/feed.json.new"
        mv "$WORK/feed/feed.json.new" "$WORK/feed/feed.json"
        cycle=$((cycle + 1))
    done
    end=$(now)
    after=$(load)
    check_batch C "$dir"/cycle-*/candidates
    printf '%s\t%s\t%s\t%s\t%s\n' C "$start" "$end" "$before" "$after" >>"$results"
    echo "  C: $(echo "$end - $start" | bc) s in $cycle cycles (load $before -> $after)" >&2
}

measure_mode() { # repeat mode
    local mode=$2 dir="$WORK/run-$1-$2"
    case "$mode" in
        A) measure_serve A 1 "$dir" ;;
        B) measure_serve B 2 "$dir" ;;
        C) measure_cycles "$dir" ;;
        D) measure_serve D default "$dir" ;;
        E*) measure_anchor "$mode" "${mode#E}" ;;
        W*) measure_anchor "$mode" "${mode#W}" inspect,attach,events ;;
        S*) measure_serve "$mode" "${mode#S}" "$dir" ;;
    esac
}
bench_rotated "$REPEATS" repeat measure_mode

python3 - "$results" "$latencies" "$logs" "$JOBS" "$REPEATS" "$MAX_JOBS" "$PROFILE" <<'PY'
import datetime
import glob
import os
import re
import statistics
import sys

path, lat_path, logs, jobs, repeats, max_jobs, profile = sys.argv[1:8]
jobs, max_jobs = int(jobs), int(max_jobs)
rows = [line.rstrip("\n").split("\t") for line in open(path) if line.strip()]
def name(mode):
    if mode in names:
        return names[mode]
    if mode.startswith("S"):
        return f"worker serve --parallel {mode[1:]}"
    if mode.startswith("W"):
        return f"Engine API + the worker's calls, {mode[1:]} in flight"
    return f"Engine API, {mode[1:]} in flight"


order = lambda m: ("ABDSCEW".index(m[0]), int(m[1:]) if m[1:] else 0)
names = {
    "A": "worker serve --parallel 1",
    "B": "worker serve --parallel 2",
    "D": "worker serve (default --parallel)",
    "C": f"cold worker feed cycles (--max-jobs {max_jobs})",
    "E1": "Engine API, 1 in flight",
    "E2": "Engine API, 2 in flight",
    "E4": "Engine API, 4 in flight",
}
rates, loads = {}, {}
for mode, start, end, before, after in rows:
    rates.setdefault(mode, []).append(jobs * 3600 / (float(end) - float(start)))
    loads.setdefault(mode, []).append(f"{before.split()[0]}->{after.split()[0]}")
lat = {}
for line in open(lat_path):
    mode, seconds = line.split("\t")
    lat.setdefault(mode, []).append(float(seconds))


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * len(values) + 0.5) - 1))]


anchors = {m: statistics.median(r) for m, r in rates.items() if m.startswith("E")}
best = max(anchors, key=anchors.get) if anchors else None
print(f"{jobs} jobs, {repeats} repeat(s), order rotated, {profile} build")
print(f"{'mode':<48} {'jobs/hour median':>16} {'min-max':>15} {'vs best E':>9} {'feed->candidate p50/p99 s':>26}  load 1-min before->after")
for mode in sorted(rates, key=order):
    r = rates[mode]
    med = statistics.median(r)
    ratio = f"{med / anchors[best]:.2f}x" if best else "-"
    p = f"{pct(lat[mode], 0.5):.1f} / {pct(lat[mode], 0.99):.1f}" if mode in lat else "-"
    print(f"{mode + ' ' + name(mode):<48} {med:>16.0f} {min(r):>7.0f}-{max(r):<7.0f} {ratio:>9} {p:>26}  {' '.join(loads[mode])}")
if best:
    print(f"(best anchor: {best}; feed->candidate counts from the clock's start, when the whole batch appears in the feed)")
if "C" in rates:
    print(f"(the scheduled runner is also capped by its cron: {max_jobs} jobs x 4 cycles = {max_jobs * 4} jobs/hour)")

# The breakdown of serve's per-job work, from the serve logs.
field = lambda name, line: int(m.group(1)) if (m := re.search(rf"\b{name}=(\d+)", line)) else None
stamp = lambda line: datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp()
phases = ["download", "extract", "stage", "sandbox", "evidence", "runner rest", "total"]
print()
print("serve's per-job work (means over the mode's runs, ms; share of the job's total)")
print(f"{'mode':<6} {'first run s':>11} " + " ".join(f"{p:>17}" for p in phases) + f" {'slot/job, loop %':>17}")
serve_modes = sorted({os.path.basename(f).split("-")[0] for f in glob.glob(os.path.join(logs, "*.log"))}, key=order)
for mode in serve_modes:
    sums, n, first = {p: 0 for p in phases}, 0, []
    for log in sorted(glob.glob(os.path.join(logs, f"{mode}-*.log"))):
        start = float(open(log[: -len(".log")] + ".start").read())
        executed = []
        lines = open(log).read().splitlines()
        running = [stamp(l) for l in lines if l.split()[1:2] == ["INFO"] and " running" in l]
        if running:
            first.append(min(running) - start)
        for l in lines:
            if l.rstrip().endswith("executed") or " executed " in l:
                executed.append((field("stage_ms", l), field("sandbox_ms", l), field("evidence_ms", l)))
        ended = [l for l in lines if "run ended" in l and "total_ms=" in l]
        for l, (st, sb, ev) in zip(ended, executed):
            d, x, e, t = (field(k, l) for k in ("download_ms", "extract_ms", "execute_ms", "total_ms"))
            for p, v in zip(phases, (d, x, st, sb, ev, t - d - x - e, t)):
                sums[p] += v
            n += 1
    if n == 0:
        continue
    total = sums["total"] / n
    cells = " ".join(f"{sums[p] / n:>8.0f} {100 * sums[p] / n / total:>6.1f}% " for p in phases)
    # Slot time per job (wall x jobs at once / jobs) against the runner's own total: the rest
    # is the loop's (the ledger's run start and end, scheduling). Only for a fixed --parallel.
    k = {"A": 1, "B": 2}.get(mode) or (int(mode[1:]) if mode.startswith("S") else None)
    walls = [float(e) - float(b) for m, b, e, _, _ in rows if m == mode]
    slot = statistics.median(walls) * 1000 * k / jobs if k else None
    outside = f"{slot:>8.0f} {100 * (slot - total) / slot:>6.1f}%" if slot else f"{'-':>15}"
    print(f"{mode:<6} {statistics.median(first):>11.2f} {cells} {outside}")

print("(slot/job: wall x --parallel / jobs; loop %: its share outside the runner (ledger, scheduling,")
print(" idle slots at the batch's end); not for D, whose --parallel changes during the batch)")
print("(runner rest: total - download - extract - the executor: judging, the cache, the candidate")
print(" write; stage + sandbox + evidence is the executor less its digest comparisons. Sums over")
print(" all of a mode's jobs, so the order the lines interleave in at --parallel > 1 does not matter)")

# The sandbox run split by the evidence's own timestamps.
def iso(t):
    head, _, frac = t.rstrip("Z").partition(".")
    return datetime.datetime.fromisoformat(head + "+00:00").timestamp() + float("0." + (frac or "0"))


steps = ["image+create", "checks+attach+start", "command", "wait latency", "teardown"]
print()
print("the sandbox run by the evidence's timestamps (means, ms; share of begin..remove)")
print(f"{'mode':<6} " + " ".join(f"{p:>25}" for p in steps))
for mode in serve_modes:
    sums, n = [0.0] * len(steps), 0
    for f in sorted(glob.glob(os.path.join(logs, f"{mode}-*.stamps"))):
        for line in open(f):
            b, c, s0, fi, r, es, ef = line.rstrip("\n").split("\t")
            b, c, s0, fi, r = map(float, (b, c, s0, fi, r))
            command = max(0.0, (iso(ef) - iso(es)) * 1000)
            for i, v in enumerate((c - b, s0 - c, command, fi - s0 - command, r - fi)):
                sums[i] += v
            n += 1
    if n:
        whole = sum(sums) / n
        print(f"{mode:<6} " + " ".join(f"{v / n:>16.0f} {100 * v / n / whole:>6.1f}% " for v in sums))
print("(command: the engine's StartedAt..FinishedAt; wait latency: the rest of start..observed stopped;")
print(" teardown: observed stopped..removal confirmed, the output and the post-run inspect included)")
PY

[[ -n "$METER" ]] || exit 0
python3 - "$meters" "$JOBS" <<'PY'
import glob
import json
import os
import statistics
import sys

meters, jobs = sys.argv[1], int(sys.argv[2])
runs = {}
for f in sorted(glob.glob(os.path.join(meters, "*.json"))):
    runs.setdefault(os.path.basename(f).rsplit("-", 1)[0], []).append(json.load(open(f)))
order = lambda m: ("ABDSCEW".index(m[0]), int(m[1:]) if m[1:] else 0)
print()
print("the engine's work per job (scripts/engine-meter.py; medians over the mode's runs)")
print(f"{'mode':<6} {'calls/job':>9} {'engine CPU ms/job':>17} {'dockerd':>8} {'containerd':>10} {'shims':>6} {'client CPU ms/job':>17}")
for mode in sorted(runs, key=order):
    rs = runs[mode]
    med = lambda f: statistics.median(f(r) for r in rs)
    print(f"{mode:<6} {med(lambda r: r['calls_total']) / jobs:>9.1f} {1000 * med(lambda r: r['cpu_total_s']) / jobs:>17.1f}"
          f" {1000 * med(lambda r: r['cpu_s'].get('dockerd', 0)) / jobs:>8.1f} {1000 * med(lambda r: r['cpu_s'].get('containerd', 0)) / jobs:>10.1f}"
          f" {1000 * med(lambda r: r['cpu_s']['shims']) / jobs:>6.1f} {1000 * med(lambda r: r.get('client_cpu_s', 0)) / jobs:>17.1f}")
for mode in sorted(runs, key=order):
    kinds = {}
    for r in runs[mode]:
        for call, n in r["calls"].items():
            kinds.setdefault(call, []).append(n)
    print(f"{mode}: " + ", ".join(f"{call} {statistics.median(ns) / jobs:.2f}" for call, ns in sorted(kinds.items())))
print("(calls: request lines sent to the engine, a stream counted once; CPU: utime+stime and reaped")
print(" children's, dockerd and containerd over the measurement, each shim to its last poll (a lower")
print(" bound); client: worker serve's own CPU, or the anchor's; the proxy slows every client, so a")
print(" metered run's jobs/hour are not comparable to an unmetered run's)")
PY
