# shellcheck shell=bash
# The preamble the benchmark scripts share (scripts/bench-*.sh): the checks of their tools and
# settings, the build, and the work directory and its removal. Sourced from the repository root
# (each script changes there first), never executed.
#
# Each check takes the script's name first, for its message, and exits the script as it always
# has: 1 for a missing tool, 2 for a bad setting. Messages go to stderr, so stdout stays the
# benchmark's table.

# bench_need NAME TOOL...: every TOOL is a command on PATH or an executable path.
bench_need() {
    local name=$1 tool
    shift
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$name: missing $tool" >&2; exit 1; }
    done
}

# bench_positive NAME SETTINGS VALUE...: every VALUE is a whole number above 0; SETTINGS names
# them all in the one message.
bench_positive() {
    local name=$1 settings=$2 n
    shift 2
    for n in "$@"; do
        [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "$name: $settings must be positive numbers" >&2; exit 2; }
    done
}

# bench_profile NAME: PROFILE is one of the two builds cargo makes here, release or debug.
bench_profile() {
    case "$PROFILE" in
        release | debug) ;;
        *) echo "$1: PROFILE must be release or debug" >&2; exit 2 ;;
    esac
}

# bench_serve_build WHAT CARGO-ARG...: the services the serve benchmarks run against (the
# engine and the local registry with the busybox image; not the language images), then the
# PROFILE build of the worker and the platform stand-in bench_feed with CARGO-ARGs added (more
# examples); WHAT says what is built. Sets BIN and FEED, the two built programs. After
# bench_profile.
bench_serve_build() {
    local what=$1 build_flags=()
    shift
    if [[ "$PROFILE" == release ]]; then build_flags=(--release); fi
    scripts/services.sh --no-python --no-rust --no-node >&2
    echo "building $what ($PROFILE)" >&2
    cargo build -q "${build_flags[@]}" -p worker --bin worker --example bench_feed "$@" >&2
    # shellcheck disable=SC2034 # read by the script that sourced this file
    BIN=$(pwd)/target/$PROFILE/worker
    # shellcheck disable=SC2034 # likewise
    FEED=$(pwd)/target/$PROFILE/examples/bench_feed
}

# bench_sandbox_work NAME: WORK, a new directory NAME.XXXXXX under TMPDIR (/tmp when unset),
# open to the sandbox's user, another uid, which reads the trees staged below it.
bench_sandbox_work() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    chmod 755 "$WORK"
}

# bench_stop PID...: ends and reaps each of the script's own background processes; an empty
# PID (one not started yet) is skipped.
bench_stop() {
    local pid
    for pid in "$@"; do
        [[ -n "$pid" ]] || continue
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}

# bench_unseal DIR: staged trees are sealed read-only; make them writable so they can be removed.
bench_unseal() {
    chmod -R u+w "$1" 2>/dev/null || true
}

# bench_remove_work: removes WORK, the script's work directory, staged trees and all.
bench_remove_work() {
    bench_unseal "$WORK"
    rm -rf "$WORK"
}

# bench_finish NAME PID...: a serve benchmark's EXIT cleanup: stops its own processes, then keeps
# WORK (made writable, its path said under NAME) when KEEP is set, else removes it.
bench_finish() {
    local name=$1
    shift
    bench_stop "$@"
    if [[ -n "${KEEP:-}" ]]; then
        bench_unseal "$WORK"
        echo "$name: kept $WORK" >&2
    else
        bench_remove_work
    fi
}

# bench_serve_work NAME: WORK as bench_sandbox_work makes it, and a serve benchmark's traps: on
# EXIT bench_serve_cleanup, on INT and TERM exit 130 (so EXIT's trap runs). The script keeps its
# own processes' pids in serve_pid and feed_pid, empty until started.
bench_serve_work() {
    bench_sandbox_work "$1"
    bench_name=$1
    # shellcheck disable=SC2034 # set here for the sourcing script, read by bench_serve_cleanup
    feed_pid="" serve_pid=""
    trap bench_serve_cleanup EXIT
    trap 'exit 130' INT TERM
}

# bench_serve_cleanup: bench_finish over serve_pid and feed_pid, under the name bench_serve_work
# was given.
bench_serve_cleanup() {
    bench_finish "$bench_name" "$serve_pid" "$feed_pid"
}

# bench_rotated COUNT WORD FN: COUNT rounds over the modes in MODES, each round starting one mode
# further on, so that no mode always runs first (on a colder host) or last; calls FN ROUND MODE
# for each, ROUND counted from 0. WORD names a round in the progress line.
bench_rotated() {
    local count=$1 word=$2 fn=$3 r mode
    local -a all order
    read -ra all <<<"$MODES"
    for ((r = 0; r < count; r++)); do
        order=("${all[@]:r%${#all[@]}}" "${all[@]:0:r%${#all[@]}}")
        echo "$word $((r + 1))/$count: ${order[*]}" >&2
        for mode in "${order[@]}"; do
            "$fn" "$r" "$mode"
        done
    done
}

# bench_tree_work NAME: the release build of the worker the tree benchmarks time, then WORK, a
# new directory NAME.XXXXXX under TMPDIR, removed when the script exits. /var/tmp when TMPDIR
# is unset: on disk, where their largest trees fit and a tmpfs /tmp would not hold them.
bench_tree_work() {
    cargo build -q --release -p worker --bin worker >&2
    WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/$1.XXXXXX")
    trap bench_remove_work EXIT
}

# bench_example_request ROOT IMAGE REQUEST: stages the bundled example's benchmark and passing
# source in the store ROOT with BIN (the benchmark's limits: 64 MiB and 10,000 files; the
# source's: 512 MiB and 50,000), then writes the request for its busybox `cmp` job over them,
# made by MAKE_JOB with IMAGE, to REQUEST.
bench_example_request() {
    local root=$1 image=$2 request=$3 benchmark source
    benchmark=$("$BIN" --quiet --stage-regression-input benchmark fixtures/example/benchmark "$root" 67108864 10000 | bench_digest)
    source=$("$BIN" --quiet --stage-regression-input source fixtures/example/source-pass "$root" 536870912 50000 | bench_digest)
    "$MAKE_JOB" "$image" "$source" "$benchmark" /bin/cmp /benchmark/expected.txt /workspace/result.txt >"$request"
}

# bench_digest: the snapshot digest from the worker's staging answer on stdin.
bench_digest() {
    python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshot"]["digest"])'
}

# The serve benchmarks' (bench-serve.sh, bench-fleet.sh) platform stand-in and candidates.

# bench_feed_start NAME: starts FEED (bench_feed) serving JOBS jobs of `image` (several,
# comma-separated, taken in turn) from WORK/feed, its log WORK/feed.log, and waits (10 s at
# most) for it to answer; sets feed_pid, api (its base URL) and verifier. Exits the script (1)
# when it does not start or lists another number of jobs.
bench_feed_start() {
    local name=$1
    mkdir -p "$WORK/feed"
    "$FEED" "$(pwd)" "$image" "$JOBS" "$WORK/feed" 2>"$WORK/feed.log" &
    # shellcheck disable=SC2034 # read by the script that sourced this file (its cleanup)
    feed_pid=$!
    for _ in $(seq 100); do [[ -s "$WORK/feed/base" ]] && break; sleep 0.1; done
    [[ -s "$WORK/feed/base" ]] || { echo "$name: the feed stand-in did not start" >&2; cat "$WORK/feed.log" >&2; exit 1; }
    # shellcheck disable=SC2034 # likewise
    api=$(cat "$WORK/feed/base")
    # shellcheck disable=SC2034 # likewise
    verifier=$(cat "$WORK/feed/verifier")
    [[ "$(jq length "$WORK/feed/all-jobs.json")" == "$JOBS" ]] || { echo "$name: the feed has the wrong number of jobs" >&2; exit 1; }
}

# bench_candidate_ids DIR...: the job id of each candidate file under the DIRs (not the in-toto
# statements written beside them), one a line.
bench_candidate_ids() {
    find "$@" -name 'candidate-*.json' ! -name '*.intoto.json' -exec jq -r .job.job_id {} +
}

# bench_last_candidate DIR...: when the last candidate file under the DIRs was written (its
# mtime, seconds since the epoch): where a measurement's clock stops, not when a loop next
# looked.
bench_last_candidate() {
    find "$@" -name 'candidate-*.json' ! -name '*.intoto.json' -printf '%T@\n' | sort -n | tail -1
}

# bench_watch NAME LABEL DEADLINE LOG... -- PID...: one look while measurement LABEL waits for
# its candidates. A PID that has exited ends the script (1) with the tail of each LOG, and so
# does DEADLINE passed (seconds since the epoch, TIMEOUT after the start); else a 0.2 s pause.
# No fork but the sleep, so the watch loads the cores no more than the measured processes'.
bench_watch() {
    local name=$1 label=$2 deadline=$3 tails=() pid
    shift 3
    while (($#)) && [[ "$1" != -- ]]; do
        tails+=("$1")
        shift
    done
    (($#)) && shift
    for pid in "$@"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "$name: worker serve of $label exited early; its log:" >&2
            tail -n 20 "${tails[@]}" >&2
            exit 1
        fi
    done
    if ((${EPOCHREALTIME%.*} > deadline)); then
        echo "$name: $label took longer than ${TIMEOUT}s" >&2
        exit 1
    fi
    sleep 0.2
}
