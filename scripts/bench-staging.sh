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
for tool in openssl python3 /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "bench-staging: missing $tool" >&2; exit 1; }
done

cargo build -q --release -p worker --bin worker >&2
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/bench-staging.XXXXXX")
# Staged trees are read-only; make them writable so an unprivileged user can remove them too.
cleanup() { chmod -R u+w "$WORK" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

# shellcheck disable=SC2086 # MIB and FS are lists
python3 scripts/bench_tree.py "$(pwd)/target/release/worker" --work "$WORK" \
    --pairs "$PAIRS" --mib $MIB --files "$FILES" --fs $FS --shape "$SHAPE"
