#!/usr/bin/env bash
# Benchmarks the worker's tree snapshot and staging against plain tools on the same bytes:
#   worker --snapshot-directory       vs  openssl dgst -sha256 over the files concatenated
#   worker --stage-regression-input   vs  cp -a of the tree
# and reports hyperfine medians, their ratios and the worker's peak RSS.
#
# Self-contained: builds the release binary, generates a deterministic tree (default about
# 512 MiB in 20,000 files of skewed sizes) under a temporary folder, and removes it at the end.
# Needs hyperfine, openssl, python3 and GNU time (/usr/bin/time, Debian package `time`).
#
# Usage: scripts/bench-staging.sh            (RUNS=7 FILES=20000 MIB=512 to change the defaults)
set -euo pipefail

RUNS=${RUNS:-7}
FILES=${FILES:-20000}
MIB=${MIB:-512}

cd "$(dirname "$0")/.."
for tool in hyperfine openssl python3 /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "bench-staging: missing $tool" >&2; exit 1; }
done

cargo build --release -p worker >&2
BIN=$(pwd)/target/release/worker

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-staging.XXXXXX")
# Staged trees are read-only; make them writable so an unprivileged user can remove them too.
cleanup() { chmod -R u+w "$WORK" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
TREE=$WORK/tree
CONCAT=$WORK/concat.bin

echo "generating $FILES files, about $MIB MiB, in $TREE" >&2
python3 - "$TREE" "$CONCAT" "$FILES" "$MIB" <<'EOF'
import os, random, sys
tree, concat, files, mib = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(20240601)            # fixed seed: the same tree on every machine
target = mib * 1024 * 1024
large = max(1, files // 500)             # a few large files hold most of the bytes
small = files - large
# Many small files: log-uniform between 64 B and 64 KiB.
sizes = [int(64 * 2 ** (rng.random() * 10)) for _ in range(small)]
rest = max(0, target - sum(sizes))
weights = [rng.random() ** 3 + 0.01 for _ in range(large)]   # skewed among the large ones too
sizes += [int(rest * w / sum(weights)) for w in weights]
rng.shuffle(sizes)
paths = []
for i, size in enumerate(sizes):
    rel = f"d{i % 37:02}/s{(i * 7) % 11:02}/f{i:05}.bin"
    path = os.path.join(tree, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(rng.randbytes(size))
    paths.append(rel)
# The same bytes in digest order, as one file, for the openssl baseline.
paths.sort(key=lambda p: p.encode())
with open(concat, "wb") as out:
    for rel in paths:
        with open(os.path.join(tree, rel), "rb") as f:
            out.write(f.read())
print(f"{len(sizes)} files, {sum(sizes)} bytes", file=sys.stderr)
EOF
# Warm the page cache for both sides, so the comparison is of the tools, not the disk.
cat "$CONCAT" >/dev/null
find "$TREE" -type f -exec cat {} + >/dev/null

LIMIT_BYTES=$((MIB * 4 * 1024 * 1024))
LIMIT_FILES=$((FILES * 2))
ROOT=$WORK/root
CPDST=$WORK/cp-copy
RESET_ROOT="chmod -R u+w $ROOT 2>/dev/null || true; rm -rf $ROOT"

hyperfine --runs "$RUNS" --warmup 1 -N \
    --export-json "$WORK/snapshot.json" --export-markdown "$WORK/snapshot.md" \
    -n "worker --snapshot-directory" "$BIN --snapshot-directory $TREE $LIMIT_BYTES $LIMIT_FILES" \
    -n "openssl dgst -sha256 (concatenated)" "openssl dgst -sha256 $CONCAT" >&2

hyperfine --runs "$RUNS" --warmup 1 \
    --export-json "$WORK/stage.json" --export-markdown "$WORK/stage.md" \
    --prepare "$RESET_ROOT; rm -rf $CPDST; sync" \
    -n "worker --stage-regression-input" \
    "$BIN --stage-regression-input source $TREE $ROOT $LIMIT_BYTES $LIMIT_FILES" \
    -n "cp -a" "cp -a $TREE $CPDST" >&2
# (The prepare step needs a shell, so this group runs under one; it costs both sides alike.)

peak_rss_kib() {
    /usr/bin/time -v "$@" 2>&1 >/dev/null | awk -F': ' '/Maximum resident set size/ {print $2}'
}
SNAP_RSS=$(peak_rss_kib "$BIN" --snapshot-directory "$TREE" "$LIMIT_BYTES" "$LIMIT_FILES")
eval "$RESET_ROOT"
STAGE_RSS=$(peak_rss_kib "$BIN" --stage-regression-input source "$TREE" "$ROOT" "$LIMIT_BYTES" "$LIMIT_FILES")

python3 - "$WORK" "$SNAP_RSS" "$STAGE_RSS" <<'EOF'
import json, sys
work, snap_rss, stage_rss = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def medians(name):
    with open(f"{work}/{name}.json") as f:
        return [(r["command"], r["median"]) for r in json.load(f)["results"]]
(w1, s), (b1, o) = medians("snapshot")
(w2, t), (b2, c) = medians("stage")
print("| comparison | worker median | baseline median | ratio (worker/baseline) | target |")
print("|---|---|---|---|---|")
print(f"| snapshot vs openssl | {s:.3f} s | {o:.3f} s | {s/o:.2f} | <= 1.00 |")
print(f"| stage vs cp -a | {t:.3f} s | {c:.3f} s | {t/c:.2f} | <= 1.10 |")
print()
print(f"peak RSS: snapshot {snap_rss/1024:.1f} MiB, stage {stage_rss/1024:.1f} MiB (target < 64 MiB)")
EOF
echo
cat "$WORK/snapshot.md" "$WORK/stage.md"
