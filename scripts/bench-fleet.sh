#!/usr/bin/env bash
# What the fleet's coordination costs (issue #45 item 6): the same batch of cheap jobs through
#   A   today's single host: one `worker serve` on its SQLite ledger
#   P1  `worker serve --ledger postgres://…` alone on a fresh database
#   P2  two such hosts on one fresh database
#   P3  three
# every host with --parallel 1 and --poll-interval 1, on this one machine, so P<n> against A
# is what the leases cost and what n hosts on one engine gain; it is not a fleet of machines.
#
# Same conditions for every mode: the same feed stand-in and jobs (crates/worker/examples/
# bench_feed.rs: the bundled example's busybox `cmp`, alternately passing and failing, so the
# measurement is of the coordination and the sandbox, not of a test suite), fresh output,
# state, staging and work directories and, for P<n>, a fresh database, all created before the
# clock starts; the clock starts when the first host is started and stops at the mtime of the
# last candidate file; nothing is deleted while a clock runs. The modes are interleaved: round
# r plays them rotated by r (A P1 P2 P3, P1 P2 P3 A, …), so a drift of the machine's load over
# the run falls on every mode alike.
#
# The lease's own cost per job comes from the database's own statistics for the mode's
# database (pg_stat_database, read after its hosts stopped, when their sessions' figures are
# flushed): transactions committed, time executing statements (active_time) and time inside
# a transaction between statements (idle_in_transaction_time, the round trips of the claim,
# renew and record transactions), each per job. That is every ledger statement of the run
# (sightings, claims, renewals, heartbeats, the fenced record), not only the claim; A has no
# such figure (its ledger is a file), so the jobs/hour ratio is the comparison there.
#
# Needs the services (Docker Engine, the local registry with the busybox image, the Postgres
# cluster of scripts/services.sh), psql, python3 and jq. Release build (PROFILE=debug for the
# debug build). Cleans up its processes, files and databases on exit.
#
# Usage: scripts/bench-fleet.sh    (JOBS=50 ROUNDS=3 TIMEOUT=1800 to change; MODES="A P1 P2 P3"
#        to run only some; KEEP=1 keeps the run directories and databases; WORKER_BIN=path
#        FEED_BIN=path to use binaries built beforehand instead of building)
set -euo pipefail

JOBS=${JOBS:-50}
ROUNDS=${ROUNDS:-3}
TIMEOUT=${TIMEOUT:-1800}
PROFILE=${PROFILE:-release}
MODES=${MODES:-A P1 P2 P3}

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
bench_need bench-fleet python3 jq psql bc docker
bench_positive bench-fleet "JOBS, ROUNDS and TIMEOUT" "$JOBS" "$ROUNDS" "$TIMEOUT"
for mode in $MODES; do
    case "$mode" in
        A | P[1-9]) ;;
        *) echo "bench-fleet: unknown mode $mode (A, P<n> with n hosts)" >&2; exit 2 ;;
    esac
done
bench_profile bench-fleet
if [[ -n "${WORKER_BIN:-}" && -n "${FEED_BIN:-}" ]]; then
    # Binaries built (and copied aside) beforehand: a tree others keep editing is not rebuilt
    # between the build and the run.
    scripts/services.sh --no-python --no-rust --no-node >&2
    BIN=$WORKER_BIN
    FEED=$FEED_BIN
else
    bench_serve_build "worker and bench_feed"
fi
image=$(jq -r .busybox .work/images.json)
admin=$(cat .work/postgres.url)
# The password goes to a worker that takes --ledger-password-file in a file (it refuses one in
# the URL), to an older one in the URL.
pg_user_host=${admin#*://}
pg_password=""
if [[ "${pg_user_host%%@*}" == *:* ]]; then
    pg_password=${pg_user_host%%@*}
    pg_password=${pg_password#*:}
fi
bare_base="${admin%%://*}://${pg_user_host%%:*}@${pg_user_host#*@}"
bare_base=${bare_base%/*}
base=${admin%/*}

bench_sandbox_work bench-fleet
feed_pid=""
host_pids=()
databases=()
psql_admin() { psql "$admin" -v ON_ERROR_STOP=1 -Atqc "$1"; }
cleanup() {
    bench_stop "${host_pids[@]}" "$feed_pid"
    if [[ -n "${KEEP:-}" ]]; then
        bench_unseal "$WORK"
        echo "bench-fleet: kept $WORK and the databases ${databases[*]}" >&2
    else
        local db
        for db in "${databases[@]}"; do psql_admin "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" || true; done
        bench_remove_work
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

password_flags=()
if "$BIN" serve --help | grep -q -- --ledger-password-file && [[ -n "$pg_password" ]]; then
    (umask 077 && printf '%s' "$pg_password" >"$WORK/ledger-password")
    password_flags=(--ledger-password-file "$WORK/ledger-password")
    ledger_base=$bare_base
else
    ledger_base=$base
fi

bench_feed_start bench-fleet

now() { date +%s.%N; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
count_candidates() { find "$@" -name 'candidate-*.json' ! -name '*.intoto.json' 2>/dev/null | wc -l; }
results=$WORK/results.tsv
: >"$results"

# One measurement: hosts (0 for A, the SQLite host), until every job has a candidate.
measure() { # label hosts run-dir
    local label=$1 n=$2 dir=$3 db="" start end before after i outs=() flags
    local k=$((n > 0 ? n : 1))
    for ((i = 0; i < k; i++)); do
        mkdir -p "$dir/h$i/out" "$dir/h$i/state" "$dir/h$i/work" "$dir/h$i/staging"
        outs+=("$dir/h$i/out")
    done
    if ((n > 0)); then
        db="bench_fleet_$$_${label}_$(basename "$dir" | tr -c 'a-z0-9' _)"
        databases+=("$db")
        psql_admin "CREATE DATABASE \"$db\""
    fi
    before=$(load)
    start=$(now)
    host_pids=()
    for ((i = 0; i < k; i++)); do
        flags=()
        ((n == 0)) || flags=(--ledger "$ledger_base/$db" "${password_flags[@]}" --fleet-host "h$i" --lease 30)
        WORKER_LOG=warn,worker_serve=info NO_COLOR=1 \
            "$BIN" serve --api "$api" --verifier "$verifier" --out "$dir/h$i/out" --state "$dir/h$i/state" \
            --work-dir "$dir/h$i/work" --staging-root "$dir/h$i/staging" --archive-base "$api" \
            --parallel 1 --poll-interval 1 --pull "${flags[@]}" 2>"$dir/h$i/serve.log" &
        host_pids+=("$!")
    done
    local deadline=$((${EPOCHREALTIME%.*} + TIMEOUT))
    while (($(count_candidates "${outs[@]}") < JOBS)); do
        bench_watch bench-fleet "$label" "$deadline" "$dir"/h*/serve.log -- "${host_pids[@]}"
    done
    end=$(bench_last_candidate "${outs[@]}")
    after=$(load)
    bench_stop "${host_pids[@]}"
    host_pids=()
    # Every job once across the hosts: the candidates' own job ids are the feed's, once each.
    if [[ "$(bench_candidate_ids "${outs[@]}" | sort)" != "$(jq -r '.[].job_id' "$WORK/feed/all-jobs.json" | sort)" ]]; then
        echo "bench-fleet: $label did not produce exactly one candidate per job" >&2
        exit 1
    fi
    local xacts=- active=- idle=-
    if ((n > 0)); then
        # The stopped hosts' sessions flush their figures as they end; give the last a moment.
        sleep 1
        IFS='|' read -r xacts active idle < <(psql_admin \
            "SELECT xact_commit + xact_rollback, active_time, idle_in_transaction_time FROM pg_stat_database WHERE datname = '$db'")
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$start" "$end" "$before" "$after" "$xacts" "$active" "$idle" >>"$results"
    echo "  $label: $(echo "$end - $start" | bc) s (load $before -> $after; transactions $xacts, active $active ms, idle in transaction $idle ms)" >&2
}

measure_mode() { # round mode
    local r=$1 mode=$2
    case "$mode" in
        A) measure A 0 "$WORK/run-$r-A" ;;
        P*) measure "$mode" "${mode#P}" "$WORK/run-$r-$mode" ;;
    esac
}
bench_rotated "$ROUNDS" round measure_mode

python3 - "$results" "$JOBS" "$ROUNDS" "$PROFILE" <<'PY'
import statistics
import sys

path, jobs, rounds, profile = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = [l.rstrip("\n").split("\t") for l in open(path) if l.strip()]
rates, loads, cost = {}, {}, {}
for mode, start, end, before, after, xacts, active, idle in rows:
    rates.setdefault(mode, []).append(jobs * 3600 / (float(end) - float(start)))
    loads.setdefault(mode, []).append(f"{before.split()[0]}->{after.split()[0]}")
    if xacts != "-":
        cost.setdefault(mode, []).append((int(xacts) / jobs, float(active) / jobs, float(idle) / jobs))
order = lambda m: (m[0] != "A", int(m[1:]) if m[1:] else 0)
names = {"A": "SQLite, 1 host"}
base = statistics.median(rates["A"]) if "A" in rates else None
print(f"{jobs} jobs, {rounds} round(s), modes interleaved (rotated each round), {profile} build")
print(f"{'mode':<24} {'jobs/hour median':>16} {'min-max':>15} {'vs A median (min-max)':>22}  load 1-min before->after")
for mode in sorted(rates, key=order):
    r = rates[mode]
    med = statistics.median(r)
    rel = f"{med / base:.2f} ({min(r) / base:.2f}-{max(r) / base:.2f})" if base else "-"
    name = names.get(mode, f"Postgres, {mode[1:]} host(s)")
    print(f"{mode + ' ' + name:<24} {med:>16.0f} {min(r):>7.0f}-{max(r):<7.0f} {rel:>22}  {' '.join(loads[mode])}")
if cost:
    print()
    print("the fleet ledger's own cost per job (pg_stat_database of the mode's database; median, min-max over rounds)")
    print(f"{'mode':<6} {'transactions/job':>20} {'executing ms/job':>22} {'in transaction, between statements ms/job':>44}")
    for mode in sorted(cost, key=order):
        c = cost[mode]
        cell = lambda i, f: f"{statistics.median(x[i] for x in c):{f}} ({min(x[i] for x in c):{f}}-{max(x[i] for x in c):{f}})"
        print(f"{mode:<6} {cell(0, '.1f'):>20} {cell(1, '.2f'):>22} {cell(2, '.2f'):>44}")
    print("(every statement of the run: sightings each poll, claims, renewals, heartbeats, records; the")
    print(" server's time, not the round trips outside a transaction)")
PY
