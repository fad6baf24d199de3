#!/usr/bin/env bash
# Jobs per hour for a batch of small jobs, three ways, in one run under the same conditions
# (issue 14's benchmark):
#   A  `worker serve --parallel 1` until every job of the batch has a candidate
#   B  `worker serve --parallel 2`, the same
#   C  the scheduled runner's equivalent: cycles of a cold `worker feed` as
#      .github/workflows/regression-verifier-runner.yml runs it (`--max-jobs` MAX_JOBS, default
#      10 as the workflow's, `--pull --json`, a fresh staging root and work dir each cycle, the
#      result cache kept between cycles as the workflow restores it), back to back, until every
#      job has a candidate. Between cycles the feed drops the jobs that have a candidate, as the
#      platform does once they are settled; otherwise each cycle would pick the same earliest
#      expiring jobs again.
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
# The order of A, B and C rotates across repeats; each measurement gets fresh output, state,
# staging and work directories created before its clock starts, and nothing is deleted while a
# clock runs. The load average is recorded before and after each measurement.
#
# Needs the services (Docker Engine and the local registry with the busybox image, brought up
# here through scripts/services.sh --no-python --no-rust --no-node), python3 and jq. Release build (PROFILE=debug
# to use the debug build instead). Cleans up its processes and files on exit.
#
# Usage: scripts/bench-serve.sh    (JOBS=50 REPEATS=3 MAX_JOBS=10 TIMEOUT=3600 to change)
set -euo pipefail

JOBS=${JOBS:-50}
REPEATS=${REPEATS:-3}
MAX_JOBS=${MAX_JOBS:-10}
TIMEOUT=${TIMEOUT:-3600}
PROFILE=${PROFILE:-release}

cd "$(dirname "$0")/.."
for tool in python3 jq bc docker; do
    command -v "$tool" >/dev/null || { echo "bench-serve: missing $tool" >&2; exit 1; }
done
for n in "$JOBS" "$REPEATS" "$MAX_JOBS" "$TIMEOUT"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "bench-serve: JOBS, REPEATS, MAX_JOBS and TIMEOUT must be positive numbers" >&2; exit 2; }
done
case "$PROFILE" in
    release) build_flags=(--release) ;;
    debug) build_flags=() ;;
    *) echo "bench-serve: PROFILE must be release or debug" >&2; exit 2 ;;
esac

scripts/services.sh --no-python --no-rust --no-node >&2
echo "building worker and bench_feed ($PROFILE)" >&2
cargo build -q "${build_flags[@]}" -p worker --bin worker --example bench_feed >&2
BIN=$(pwd)/target/$PROFILE/worker
FEED=$(pwd)/target/$PROFILE/examples/bench_feed
image=$(jq -r .busybox .work/images.json)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-serve.XXXXXX")
chmod 755 "$WORK"
feed_pid=""
serve_pid=""
cleanup() {
    local pid
    for pid in $serve_pid $feed_pid; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    # Staged trees are sealed read-only; make them writable so they can be removed.
    chmod -R u+w "$WORK" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK/feed"
"$FEED" "$(pwd)" "$image" "$JOBS" "$WORK/feed" 2>"$WORK/feed.log" &
feed_pid=$!
for _ in $(seq 100); do [[ -s "$WORK/feed/base" ]] && break; sleep 0.1; done
[[ -s "$WORK/feed/base" ]] || { echo "bench-serve: the feed stand-in did not start" >&2; cat "$WORK/feed.log" >&2; exit 1; }
api=$(cat "$WORK/feed/base")
verifier=$(cat "$WORK/feed/verifier")
[[ "$(jq length "$WORK/feed/all-jobs.json")" == "$JOBS" ]] || { echo "bench-serve: the feed has the wrong number of jobs" >&2; exit 1; }

now() { date +%s.%N; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# Candidate files only, not the in-toto statements written beside them.
candidates_in() { find "$@" -name 'candidate-*.json' ! -name '*.intoto.json' 2>/dev/null | wc -l; }
candidate_ids() { find "$@" -name 'candidate-*.json' ! -name '*.intoto.json' -exec jq -r .job.job_id {} +; }
results=$WORK/results.tsv
: >"$results"

# Every job once: the candidates' job ids (from the files themselves) are the feed's, once each.
check_batch() { # label dirs...
    local label=$1 ids
    shift
    ids=$(candidate_ids "$@" | sort)
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
    before=$(load)
    start=$(now)
    "$BIN" serve --api "$api" --verifier "$verifier" --out "$dir/out" --state "$dir/state" \
        --work-dir "$dir/work" --staging-root "$dir/staging" --archive-base "$api" \
        --parallel "$parallel" --poll-interval 1 --pull 2>"$dir/serve.log" &
    serve_pid=$!
    while (($(candidates_in "$dir/out") < JOBS)); do
        if ! kill -0 "$serve_pid" 2>/dev/null; then
            echo "bench-serve: worker serve ($label) exited early; its log:" >&2
            tail -20 "$dir/serve.log" >&2
            exit 1
        fi
        if (($(printf '%.0f' "$(echo "$(now) - $start" | bc)") > TIMEOUT)); then
            echo "bench-serve: $label took longer than ${TIMEOUT}s" >&2
            exit 1
        fi
        sleep 0.2
    done
    end=$(now)
    after=$(load)
    kill -TERM "$serve_pid"
    wait "$serve_pid" || true
    serve_pid=""
    check_batch "$label" "$dir/out"
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
        candidate_ids "$dir"/cycle-*/candidates |
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

modes=(A B C)
for ((r = 0; r < REPEATS; r++)); do
    order=("${modes[@]:r%3}" "${modes[@]:0:r%3}")
    echo "repeat $((r + 1))/$REPEATS: ${order[*]}" >&2
    for mode in "${order[@]}"; do
        dir="$WORK/run-$r-$mode"
        case "$mode" in
            A) measure_serve A 1 "$dir" ;;
            B) measure_serve B 2 "$dir" ;;
            C) measure_cycles "$dir" ;;
        esac
    done
done

python3 - "$results" "$JOBS" "$REPEATS" "$MAX_JOBS" "$PROFILE" <<'PY'
import statistics
import sys

path, jobs, repeats, max_jobs, profile = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
rows = [line.rstrip("\n").split("\t") for line in open(path) if line.strip()]
names = {
    "A": "worker serve --parallel 1",
    "B": "worker serve --parallel 2",
    "C": f"cold worker feed cycles (--max-jobs {max_jobs})",
}
rates, loads = {}, {}
for mode, start, end, before, after in rows:
    rates.setdefault(mode, []).append(jobs * 3600 / (float(end) - float(start)))
    loads.setdefault(mode, []).append(f"{before.split()[0]}->{after.split()[0]}")
print(f"{jobs} jobs, {repeats} repeat(s), order rotated, {profile} build")
print(f"{'mode':<45} {'jobs/hour median':>16} {'min-max':>15} {'vs C':>6}  load 1-min before->after")
c = statistics.median(rates["C"])
for mode in "ABC":
    r = rates[mode]
    med = statistics.median(r)
    print(f"{mode + ' ' + names[mode]:<45} {med:>16.0f} {min(r):>7.0f}-{max(r):<7.0f} {med / c:>5.2f}x  {' '.join(loads[mode])}")
print(f"(the scheduled runner is also capped by its cron: {max_jobs} jobs x 4 cycles = {max_jobs * 4} jobs/hour)")
PY
