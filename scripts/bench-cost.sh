#!/usr/bin/env bash
# What one verification costs (issue #50 item 5): CPU-seconds and peak memory per job of the
# bundled Python bounty (fixtures/python-bounty: its unittest harness in the Debian+python3
# image, alternately on the passing and the failing solution, each its own job), through
#   feed   one cold `worker feed` cycle as the runner workflow runs it (`--max-jobs` the whole
#          batch, `--pull --json`, fresh staging root, work dir and result cache)
#   serve  `worker serve` with the default --parallel until every job has its candidate
# each from a fresh set of directories made before its clock starts, the order alternating
# per repeat (feed serve, then serve feed). Per job, the mean over the batch:
#   wall        the run's wall time / jobs
#   worker CPU  the worker process's user + system time (GNU time) / jobs
#   container   the sandboxed command's own CPU time (each candidate's evidence,
#               resources.cpu_time_ns), and its peak memory (resources.peak_memory_bytes, max)
#   host CPU    every core's busy time over the run (/proc/stat), less what the same host
#               spends idle over as long (measured before the repeats with nothing running):
#               the worker, the engine (dockerd, containerd, the shims, runc), the container
#               and the platform stand-in together, which is what a host pays for a job
#   worker RSS  the worker process's peak resident memory (GNU time)
# and then what 1,000 verifications cost:
#   GitHub-hosted runners: the runner workflow verifies MAX_JOBS jobs a cycle, each cycle a
#     job GitHub bills in whole minutes; cycles x ceil(minutes) x PRICE_PER_MIN. The cycle's
#     time is this host's feed wall per job x MAX_JOBS plus RUNNER_OVERHEAD_S (the VM start,
#     checkout, binary download and check, image pull and artifact upload, none measured
#     here; default 0, so the figure is a lower bound)
#   a dedicated host: 1,000 x the host CPU per job of serve, in CPU-hours, and the wall hours
#     at the measured serve pace
#
# Needs the services (Docker Engine, the local registry with the python image: brought up
# here through scripts/services.sh --no-rust --no-node), python3, jq and GNU time.
#
# Usage: scripts/bench-cost.sh   (JOBS=20 REPEATS=3 MAX_JOBS=10 IDLE_S=10 PRICE_PER_MIN=0.006
#        RUNNER_OVERHEAD_S=0 to change; PROFILE=debug for the debug build; KEEP=1 keeps the run
#        directories)
set -euo pipefail

JOBS=${JOBS:-20}
REPEATS=${REPEATS:-3}
MAX_JOBS=${MAX_JOBS:-10}
IDLE_S=${IDLE_S:-10}
TIMEOUT=${TIMEOUT:-1800}
# USD a minute for a Linux 2-core GitHub-hosted runner, docs.github.com/en/billing/reference/
# actions-runner-pricing as read for this script; an input, not a measurement.
PRICE_PER_MIN=${PRICE_PER_MIN:-0.006}
RUNNER_OVERHEAD_S=${RUNNER_OVERHEAD_S:-0}
PROFILE=${PROFILE:-release}

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
bench_need bench-cost python3 jq docker /usr/bin/time
bench_positive bench-cost "JOBS, REPEATS, MAX_JOBS, IDLE_S and TIMEOUT" "$JOBS" "$REPEATS" "$MAX_JOBS" "$IDLE_S" "$TIMEOUT"
bench_profile bench-cost

scripts/services.sh --no-rust --no-node >&2
build_flags=()
[[ "$PROFILE" == release ]] && build_flags=(--release)
echo "building worker and bench_feed ($PROFILE)" >&2
cargo build -q "${build_flags[@]}" -p worker --bin worker --example bench_feed >&2
BIN=$(pwd)/target/$PROFILE/worker
# shellcheck disable=SC2034 # read by bench_feed_start (scripts/lib/bench.sh)
FEED=$(pwd)/target/$PROFILE/examples/bench_feed
image=$(jq -r '.python // empty' .work/images.json)
[[ -n "$image" ]] || { echo "bench-cost: no python image in .work/images.json" >&2; exit 1; }

bench_serve_work bench-cost

export BENCH_FEED_FIXTURE=python-bounty
bench_feed_start bench-cost

now() { date +%s.%N; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# Busy clock ticks of every core so far: user, nice, system, irq, softirq, steal.
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
results=$WORK/results.tsv
: >"$results"

# The host's own busy rate with nothing of ours running (the chain, the registry, the
# daemons' timers), subtracted from each run's busy time over its wall time.
b0=$(busy_ticks)
t0=$(now)
sleep "$IDLE_S"
idle_rate=$(python3 -c "import sys; print(($(busy_ticks) - $b0) / ($(now) - $t0))")
echo "idle: $idle_rate busy ticks a second (load $(load))" >&2

# Sums what the candidates' evidence says the containers used: CPU seconds, and the
# largest peak memory in bytes.
container_use() {
    find "$1" -name 'candidate-*.json' ! -name '*.intoto.json' -exec jq -r \
        '.evidence.resources | [.cpu_time_ns, .peak_memory_bytes] | @tsv' {} + |
        awk '{cpu += $1; if ($2 > peak) peak = $2} END {printf "%.6f\t%d\n", cpu / 1e9, peak}'
}

check_batch() { # label dir
    local ids
    ids=$(bench_candidate_ids "$2" | sort)
    if [[ "$ids" != "$(jq -r '.[].job_id' "$WORK/feed/all-jobs.json" | sort)" ]]; then
        echo "bench-cost: $1 did not produce exactly one candidate per job" >&2
        exit 1
    fi
    # Half the jobs run the passing solution: a batch whose verdicts are not half and half
    # measured something else than the bounty.
    local passed
    passed=$(find "$2" -name 'candidate-*.json' ! -name '*.intoto.json' -exec jq -r .outcome.verdict {} + | grep -c '^passed$' || true)
    if ((passed != (JOBS + 1) / 2)); then
        echo "bench-cost: $1 passed $passed of $JOBS jobs, not the $(((JOBS + 1) / 2)) with the good solution" >&2
        exit 1
    fi
}

record() { # label dir start end busy-before busy-after time-file load-before load-after
    local use
    use=$(container_use "$2/out")
    # GNU time's line: elapsed, user, system, max RSS (KiB).
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$3" "$4" "$5" "$6" "$(tail -1 "$7")" "$use" "$8" "$9" >>"$results"
    echo "  $1: $(python3 -c "print(round($4 - $3, 2))") s (load $8 -> $9)" >&2
}

measure_feed() { # dir
    local dir=$1 start end b_before b_after before after status=0
    mkdir -p "$dir/out" "$dir/work" "$dir/staging" "$dir/cache"
    before=$(load)
    b_before=$(busy_ticks)
    start=$(now)
    /usr/bin/time -f '%e %U %S %M' -o "$dir/time" \
        "$BIN" feed --api "$api" --network base-mainnet --verifier "$verifier" \
        --out "$dir/out" --max-jobs "$MAX_JOBS_FEED" --staging-root "$dir/staging" \
        --work-dir "$dir/work" --cache-dir "$dir/cache" --archive-base "$api" --pull --json \
        >"$dir/report.json" 2>"$dir/feed.log" || status=$?
    end=$(now)
    b_after=$(busy_ticks)
    after=$(load)
    if ((status != 0 && status != 3)); then
        echo "bench-cost: worker feed exited with $status; its log:" >&2
        tail -20 "$dir/feed.log" >&2
        exit 1
    fi
    check_batch feed "$dir/out"
    record feed "$dir" "$start" "$end" "$b_before" "$b_after" "$dir/time" "$before" "$after"
}

measure_serve() { # dir
    local dir=$1 start end b_before b_after before after time_pid counted=0
    mkdir -p "$dir/out" "$dir/state" "$dir/work" "$dir/staging"
    before=$(load)
    b_before=$(busy_ticks)
    start=$(now)
    /usr/bin/time -f '%e %U %S %M' -o "$dir/time" \
        "$BIN" serve --api "$api" --verifier "$verifier" --out "$dir/out" --state "$dir/state" \
        --work-dir "$dir/work" --staging-root "$dir/staging" --archive-base "$api" \
        --poll-interval 1 --pull 2>"$dir/serve.log" &
    time_pid=$!
    for _ in $(seq 50); do
        serve_pid=$(pgrep -P "$time_pid" || true)
        [[ -n "$serve_pid" ]] && break
        sleep 0.1
    done
    [[ -n "$serve_pid" ]] || { echo "bench-cost: worker serve did not start" >&2; exit 1; }
    local deadline=$((${EPOCHREALTIME%.*} + TIMEOUT))
    while counted=$(find "$dir/out" -name 'candidate-*.json' ! -name '*.intoto.json' | wc -l) && ((counted < JOBS)); do
        bench_watch bench-cost serve "$deadline" "$dir/serve.log" -- "$serve_pid"
    done
    # The clock and the busy count stop at the last candidate, before serve's shutdown.
    b_after=$(busy_ticks)
    end=$(bench_last_candidate "$dir/out")
    after=$(load)
    kill -TERM "$serve_pid"
    wait "$time_pid" || true
    serve_pid=""
    check_batch serve "$dir/out"
    record serve "$dir" "$start" "$end" "$b_before" "$b_after" "$dir/time" "$before" "$after"
}

MAX_JOBS_FEED=$JOBS
for ((r = 0; r < REPEATS; r++)); do
    if ((r % 2 == 0)); then order=(feed serve); else order=(serve feed); fi
    echo "repeat $((r + 1))/$REPEATS: ${order[*]}" >&2
    for mode in "${order[@]}"; do
        cp "$WORK/feed/all-jobs.json" "$WORK/feed/feed.json"
        "measure_$mode" "$WORK/run-$r-$mode"
    done
done

python3 - "$results" "$JOBS" "$idle_rate" "$(getconf CLK_TCK)" "$MAX_JOBS" "$PRICE_PER_MIN" \
    "$RUNNER_OVERHEAD_S" "$PROFILE" "$(git rev-parse --short HEAD)" <<'PY'
import math
import statistics
import sys

path, jobs, idle_rate, hz, max_jobs, price, overhead, profile, commit = sys.argv[1:10]
jobs, idle_rate, hz, max_jobs = int(jobs), float(idle_rate), int(hz), int(max_jobs)
price, overhead = float(price), float(overhead)
rows = {}
loads = []
for line in open(path):
    label, start, end, b0, b1, timeline, cpu, peak, l0, l1 = line.rstrip("\n").split("\t")
    elapsed, user, system, rss_kib = timeline.split()
    wall = float(end) - float(start)
    host = (int(b1) - int(b0) - idle_rate * wall) / hz
    rows.setdefault(label, []).append({
        "wall": wall / jobs,
        "worker": (float(user) + float(system)) / jobs,
        "container": float(cpu) / jobs,
        "host": host / jobs,
        "rss": int(rss_kib) / 1024,
        "peak": int(peak) / 2**20,
    })
    loads.append((label, l0.split()[0], l1.split()[0]))

def med(label, key):
    values = [r[key] for r in rows[label]]
    return statistics.median(values), min(values), max(values)

def cell(label, key, fmt):
    m, lo, hi = med(label, key)
    return f"{fmt.format(m)} ({fmt.format(lo)}–{fmt.format(hi)})"

print(f"\nCost per verification: the Python bounty, {jobs} jobs a run, "
      f"{len(next(iter(rows.values())))} runs a mode ({profile} build, {commit})")
print("| path | wall per job, s | worker CPU per job, s | container CPU per job, s | host CPU per job, s | worker peak RSS, MiB | container peak memory, MiB |")
print("|---|---|---|---|---|---|---|")
for label in ("feed", "serve"):
    print(f"| {label} | {cell(label, 'wall', '{:.3f}')} | {cell(label, 'worker', '{:.3f}')} | "
          f"{cell(label, 'container', '{:.3f}')} | {cell(label, 'host', '{:.3f}')} | "
          f"{cell(label, 'rss', '{:.1f}')} | {cell(label, 'peak', '{:.1f}')} |")
print("1-minute load before -> after each run: " + ", ".join(f"{l} {a}->{b}" for l, a, b in loads))

feed_wall = med("feed", "wall")[0]
cycle_s = feed_wall * max_jobs + overhead
cycles = math.ceil(1000 / max_jobs)
billed = cycles * math.ceil(cycle_s / 60)
serve_host = med("serve", "host")[0]
serve_wall = med("serve", "wall")[0]
print(f"\n1,000 verifications of this bounty")
print("| where | what is paid | figure |")
print("|---|---|---|")
print(f"| GitHub-hosted runners (scheduled runner, --max-jobs {max_jobs}) | {cycles} cycles x "
      f"{math.ceil(cycle_s / 60)} billed minute(s) (cycle {cycle_s:.1f} s: {max_jobs} x "
      f"{feed_wall:.3f} s + {overhead:.0f} s overhead) | {billed} runner-minutes = "
      f"${billed * price:.2f} at ${price}/min (lower bound) |")
print(f"| GitHub-hosted runners, the schedule's cap | {max_jobs} jobs x 4 cycles an hour | "
      f"{1000 / (max_jobs * 4):.0f} hours for 1,000 |")
print(f"| a dedicated host (worker serve) | host CPU {serve_host:.3f} s a job | "
      f"{1000 * serve_host / 3600:.3f} CPU-hours; {1000 * serve_wall / 3600:.3f} wall hours "
      f"on this 2-core host |")
PY
