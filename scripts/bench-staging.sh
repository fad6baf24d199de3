#!/usr/bin/env bash
# Benchmarks the worker's tree snapshot and staging against plain tools on the same bytes:
#   worker --snapshot-directory       vs  openssl dgst -sha256 over the files concatenated
#   worker --stage-regression-input   vs  cp -a of the tree
# in alternating pairs, on disk and on tmpfs, at 64 and 512 MiB; prints one table with the
# per-pair ratios (median and min–max), CPU, peak RSS and the load around each row.
# scripts/bench_tree.py says what is kept out of the timed window and why.
#
# Self-contained: builds the release binary, generates the deterministic tree under a
# temporary folder (and /dev/shm for tmpfs), removes everything at the end.
# Needs openssl, python3 and GNU time (Debian package `time`).
#
# Usage: scripts/bench-staging.sh    (PAIRS=7 MIB="64 512" FILES=20000 FS="disk tmpfs" SHAPE=mixed)
#        SHAPE=large MIB=1024 scripts/bench-staging.sh   the large-file path (64 small + 40 large files)
set -euo pipefail

PAIRS=${PAIRS:-7}
MIB=${MIB:-64 512}
FILES=${FILES:-20000}
FS=${FS:-disk tmpfs}
SHAPE=${SHAPE:-mixed}

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
bench_need bench-staging openssl python3 /usr/bin/time
bench_tree_work bench-staging

# shellcheck disable=SC2086 # MIB and FS are lists
python3 scripts/bench_tree.py "$(pwd)/target/release/worker" --work "$WORK" \
    --pairs "$PAIRS" --mib $MIB --files "$FILES" --fs $FS --shape "$SHAPE"
