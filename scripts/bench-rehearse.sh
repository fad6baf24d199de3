#!/usr/bin/env bash
# Rehearsal at the host's capacity (issue #50 item 1), side by side with its natural baseline in
# one run: the same commands under a worker built before the concurrency work (BASE_BIN, e.g.
# at 1f91eb2, which runs every container one after another) and under this tree's (HEAD_BIN,
# which runs a rehearsal's stubs, base and repeats, and a batch's tasks, side by side up to
# the engine's cpus and memory). Two workloads:
#
#   one  one `worker rehearse --adversarial --repeat 2 --base` of fixtures/python-bounty (the
#        good solution against the bad one, its harness `run_tests.py 6`, as bench-runsc.sh):
#        the solution twice, the base once and every stub, 14 containers
#   nine one `worker rehearse --batch --adversarial` of nine tasks built from this repository's
#        fixtures (the platform's nine are not in the repository): the Python, Node and Rust
#        bounties (good solution, --base the bad one) and the six weak benchmarks of
#        fixtures/weak-benchmarks with the commands the tests give them
#        (crates/worker/tests/it/docker/rehearse_stubs.rs). The base worker has --batch too
#        (its tasks one after another), so the baseline is the same command.
#
# Each round runs both sides of each workload, the side that goes first alternating per round.
# Each timing is the whole command's wall time, with a staging root of its own made before the
# clock starts (nothing staged is reused from another run; everything is removed at exit), and
# the 1-minute load average read before and after. Every run must give the same report as the
# first run of its workload, times, paths and digests of the staging root aside (verdict,
# answer, stability, discrimination, each run's, the base's and each stub's status, exit code
# and test counts, each task's in the batch's order) and the same exit code: a run that differs
# ends the script (exit 1), because the concurrency must not change results. A task answered
# no_answer or not_rehearsed ends it too: then nothing was measured.
#
# Needs the services (scripts/services.sh: the engine and the local registry with the python,
# node and rust images of .work/images.json) and python3. HEAD_BIN defaults to this tree's
# release build, built here; build BASE_BIN in release too, so the two differ only in code.
#
# Usage: BASE_BIN=/path/to/old/worker scripts/bench-rehearse.sh
#        (ROUNDS=3 to change the default; HEAD_BIN=path to measure another head worker;
#        WORKLOADS="one" or "nine" to time only that one, default both)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
WORKLOADS=${WORKLOADS:-one nine}
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
bench_positive bench-rehearse ROUNDS "$ROUNDS"
for w in $WORKLOADS; do
    [[ "$w" == one || "$w" == nine ]] || { echo "bench-rehearse: WORKLOADS holds one and/or nine, not $w" >&2; exit 2; }
done
[[ -n "${BASE_BIN:-}" ]] ||
    { echo "bench-rehearse: BASE_BIN must name a worker built before the concurrency work" >&2; exit 2; }
if [[ -z "${HEAD_BIN:-}" ]]; then
    cargo build -q --release -p worker --bin worker >&2
fi
HEAD_BIN=${HEAD_BIN:-$(pwd)/target/release/worker}
bench_need bench-rehearse python3 docker "$BASE_BIN" "$HEAD_BIN"
docker info >/dev/null 2>&1 || { echo "bench-rehearse: no Docker engine (scripts/services.sh)" >&2; exit 1; }

bench_sandbox_work bench-rehearse
trap bench_remove_work EXIT
root=$WORK/staging
mkdir -p "$root"
chmod 700 "$root"

python3 - "$BASE_BIN" "$HEAD_BIN" "$WORK" "$root" "$ROUNDS" "$WORKLOADS" <<'PY'
import json, os, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, "scripts/lib")
from bench_ab import load_line, ratio_header, ratio_row

base_bin, head_bin, work, root, rounds, chosen = sys.argv[1:7]
rounds = int(rounds)
repo = os.getcwd()
images = json.load(open(".work/images.json"))

def manifest(name, template, key, command=None):
    m = json.load(open(f"manifests/{template}"))
    m["image"] = images[key]
    if command:
        m["command"] = command
    path = os.path.join(work, f"{name}.json")
    json.dump(m, open(path, "w"))
    return path

python6 = manifest("python6", "python-unittest.json", "python",
                   ["python3", "-I", "-B", "/benchmark/run_tests.py", "6"])
check_py = manifest("check-py", "python-unittest.json", "python", ["python3", "/benchmark/check.py"])
node_test = manifest("node-test", "node-test.json", "node")
node_npm = manifest("node-npm", "node-test.json", "node", ["/benchmark/npm-test.sh"])
node_bin = manifest("node-bin", "node-test.json", "node", ["/benchmark/run.sh"])
rust = manifest("rust", "rust-cargo.json", "rust")

def fx(path):
    return os.path.join(repo, "fixtures", path)

def bounty(lang, m):
    return {"name": f"{lang}-bounty", "source": fx(f"{lang}-bounty/solution-good"),
            "benchmark": fx(f"{lang}-bounty/benchmark"), "manifest": m,
            "base": fx(f"{lang}-bounty/solution-bad")}

def weak(name, lang, benchmark, m):
    return {"name": name, "source": fx(f"weak-benchmarks/{lang}/solution"),
            "benchmark": fx(f"weak-benchmarks/{lang}/{benchmark}"), "manifest": m}

tasks = os.path.join(work, "tasks.json")
json.dump({"tasks": [
    bounty("python", python6), bounty("node", node_test), bounty("rust", rust),
    weak("weak-python-unittest", "python", "benchmark", check_py),
    weak("weak-python-pytest", "python", "benchmark-pytest", check_py),
    weak("weak-node-test", "node", "benchmark", node_test),
    weak("weak-node-npm", "node", "benchmark-npm", node_npm),
    weak("weak-node-bin", "node", "benchmark-bin", node_bin),
    weak("weak-rust", "rust", "benchmark", rust),
]}, open(tasks, "w"), indent=1)

workloads = {
    "one": ["--source", "fixtures/python-bounty/solution-good", "--benchmark", "fixtures/python-bounty/benchmark",
            "--manifest", python6, "--base", "fixtures/python-bounty/solution-bad", "--repeat", "2"],
    "nine": ["--batch", tasks],
}
workloads = {w: a for w, a in workloads.items() if w in chosen.split()}
names = {
    "one": "one rehearsal: python-bounty `--adversarial --repeat 2 --base`",
    "nine": "`--batch --adversarial` of nine fixture tasks",
}
bins = {"base": base_bin, "head": head_bin}

# What a run decided, without what depends on the clock or the staging root (times, headlines,
# evidence paths, the sandbox's mounts): the fields below at any depth, lists in their order.
KEEP = {"tasks", "runs", "base", "adversarial", "stubs", "tests", "test_count", "output", "mutants",
        "name", "run", "verdict", "answer", "status", "outcome", "reason", "exit_code", "stability",
        "discrimination", "bypassable", "count", "runs_agree", "comparison", "error"}
WHOLE = {"counts", "summary", "comparison", "culprit", "not_judged", "solver_tests"}

def decided(v):
    if isinstance(v, dict):
        return {k: (x if k in WHOLE else decided(x)) for k, x in v.items() if k in KEEP or k in WHOLE}
    if isinstance(v, list):
        return [decided(x) for x in v]
    return v

def differences(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from differences(a.get(k), b.get(k), f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{path}[{i}]")
    elif a != b:
        yield f"{path or '.'}: {json.dumps(a)[:200]} against {json.dumps(b)[:200]}"

def answers(report):
    return [(t["name"], t["answer"]) for t in report["tasks"]] if "tasks" in report else [("one", report["answer"])]

def load():
    return float(open("/proc/loadavg").read().split()[0])

HZ = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count()

def busy():
    # Every core's busy time so far, in seconds: user, nice, system, irq, softirq, steal. Over
    # a run it is what the worker, the engine and the containers used together: divided by
    # the cores, the shortest wall time that work could take on this host.
    f = open("/proc/stat").readline().split()
    return sum(int(f[i]) for i in (1, 2, 3, 6, 7, 8)) / HZ

reference = {}

def run(workload, side, label):
    store = tempfile.mkdtemp(dir=root)
    argv = [bins[side], "rehearse", *workloads[workload], "--adversarial", "--quiet", "--json",
            "--staging-root", store]
    before = load()
    cpu = busy()
    start = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True)
    took = time.monotonic() - start
    cpu = busy() - cpu
    after = load()
    try:
        report = json.loads(out.stdout)
    except ValueError:
        sys.exit(f"bench-rehearse: {label}: exit {out.returncode}, no JSON report: {out.stderr[-2000:]}")
    unmeasured = [f"{n} {a}" for n, a in answers(report) if a in ("no_answer", "not_rehearsed")]
    if out.returncode not in (0, 9) or unmeasured:
        sys.exit(f"bench-rehearse: {label}: exit {out.returncode}, {unmeasured}: {out.stderr[-2000:]}")
    got = (out.returncode, decided(report))
    if workload not in reference:
        reference[workload] = (label, got)
        print(f"  {workload}: exit {out.returncode}, " + ", ".join(f"{n} {a}" for n, a in answers(report)), flush=True)
    first, want = reference[workload]
    if got != want:
        diff = "\n  ".join(list(differences({"exit": want[0], "report": want[1]}, {"exit": got[0], "report": got[1]}))[:20])
        sys.exit(f"bench-rehearse: {label} decided otherwise than {first}:\n  {diff}")
    return took, cpu, before, after

times = {(w, s): [] for w in workloads for s in bins}
cpus = {(w, s): [] for w in workloads for s in bins}
loads = []
print(f"base: {base_bin} ({subprocess.run([base_bin, '--version'], capture_output=True, text=True).stdout.strip()})")
print(f"head: {head_bin} ({subprocess.run([head_bin, '--version'], capture_output=True, text=True).stdout.strip()})")
print(f"load before: {open('/proc/loadavg').read().strip()}", flush=True)
for rnd in range(rounds):
    order = ("base", "head") if rnd % 2 == 0 else ("head", "base")
    for workload in workloads:
        for side in order:
            label = f"round {rnd + 1} {workload} {side}"
            took, cpu, before, after = run(workload, side, label)
            times[(workload, side)].append(took)
            cpus[(workload, side)].append(cpu)
            loads += [before, after]
            print(f"round {rnd + 1} {workload:4} {side} {took:8.2f} s  host CPU {cpu:6.2f} s  load {before:.2f} -> {after:.2f}", flush=True)
print(f"load after: {open('/proc/loadavg').read().strip()}")
print()
print(ratio_header("base", "head"))
for workload in workloads:
    print(ratio_row(names[workload], times[(workload, "base")], times[(workload, "head")]))
print()
# What stops the ratio: the host CPU each side's run used. Split perfectly over the cores, the
# base's work would take base CPU / cores; over the base's wall time that is the best ratio any
# schedule of the same work reaches on this host (the floor), unless the work itself shrinks.
print(f"| | base host CPU median | head host CPU median | floor: base CPU / {CORES} cores / base wall | head wall / (head CPU / {CORES} cores) |")
print("|---|---|---|---|---|")
for workload in workloads:
    a, b = times[(workload, "base")], times[(workload, "head")]
    ca, cb = cpus[(workload, "base")], cpus[(workload, "head")]
    ma, mb, mca, mcb = (statistics.median(x) for x in (a, b, ca, cb))
    print(f"| {names[workload]} | {mca:.2f} s | {mcb:.2f} s | {mca / CORES / ma:.2f} | {mb / (mcb / CORES):.2f} |")
print()
print(load_line(loads))
print("every run decided as the first of its workload (verdicts, answers, stubs, exit code)")
PY
