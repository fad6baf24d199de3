#!/usr/bin/env bash
# Cost growth of the worker's snapshot and staging: time, peak RSS and slope per step, from
# 64 MiB to 4 GiB (at 2,500 files) and from 2,500 to 100,000 files, with `cp -a` of the same
# tree in each step (issue #29 item 4). scripts/bench_growth.py says what each column means.
#
# On disk only (a 4 GiB tree and its copy do not both fit tmpfs here): the trees go under
# TMPDIR (default /var/tmp), one step at a time, deleted after each step. The largest step
# needs about 13 GiB free (the tree and two copies), plus 7 GiB for the files series, whose
# trees and copies stay until the end; the script checks before it starts. The files series
# runs first, after a wait of SETTLE_DELETED seconds (default 360): creating files on this VM's
# journal-less ext4 soon after deleting many costs in proportion to the deleted inodes
# (scripts/bench_growth.py's docs), and that wait lets earlier deletions age out.
# Run it on a quiet machine: between pairs it calls `sync`, which waits for every dirty page.
# Needs python3 and GNU time.
#
# Usage: scripts/bench-growth.sh     (RUNS=4 MIB="64 128 256 512 1024 2048 4096"
#                                     FILES="2500 5000 10000 25000 50000 100000")
#        RUNS=1 MIB="64 128" FILES="2500 5000" SETTLE_DELETED=0 scripts/bench-growth.sh
#                                                                         a quick check
set -euo pipefail

RUNS=${RUNS:-4}
SETTLE_DELETED=${SETTLE_DELETED:-360}
MIB=${MIB:-64 128 256 512 1024 2048 4096}
FILES=${FILES:-2500 5000 10000 25000 50000 100000}

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
source scripts/lib/bench.sh
bench_need bench-growth python3 /usr/bin/time
bench_tree_work bench-growth

# shellcheck disable=SC2086 # MIB and FILES are lists
python3 scripts/bench_growth.py "$(pwd)/target/release/worker" --work "$WORK" \
    --runs "$RUNS" --settle-deleted "$SETTLE_DELETED" --mib $MIB --files $FILES
