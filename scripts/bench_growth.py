#!/usr/bin/env python3
"""Cost growth of the worker's tree snapshot and staging (issue #29 item 4).

Two series, each step measured on its own freshly generated tree (scripts/bench_tree.py's
deterministic shapes), worker only, with `cp -a` of the same tree in the same step as the
machine's own cost of the same copy:

  bytes: 64 MiB .. 4 GiB at 2,500 files (the `mixed` shape: 2,495 small files, about 22 MiB,
         and 5 large ones holding the rest): the cost per MiB;
  files: 2,500 .. 100,000 files of 64 B..4 KiB (the `tiny` shape, about 1 KiB a file): the
         cost per file.

Per step: the median wall time of --runs runs (default 4, an even count so each side runs
first equally often) of `worker --snapshot-directory`, of
`worker --stage-regression-input` and of `cp -a`, the worker's peak RSS (GNU time, one extra
run each), the cost per MiB (or per file), and the slope: that cost relative to the previous
step's (1.00 = linear; above 1 the step cost more per MiB or per file than the one before).
A super-linear worker step with a matching `cp -a` slope is the machine (page cache,
writeback, the filesystem), not the worker.

Deleted inodes: on an ext4 without a journal (this VM's root file system), creating a file
skips every free inode of its group that was deleted less than 60 s ago (360 s while its inode
table block is dirty) and looks each one up in the buffer cache first (fs/ext4/ialloc.c,
`find_inode_bit` / `recently_deleted`), so a create right after many deletions costs in
proportion to the deleted inodes, up to a group's 8,192. That is not the worker's cost (cp -a
pays it too), so the files series runs first, waits --settle-deleted seconds (default 360)
before its first timed run, and deletes nothing until all its steps are done (about
(1 + 2 x runs) x 4 KiB a file on disk: 7 GiB at the defaults, kept until the end). The bytes
series (2,500 files a step) still deletes each pair's copies, so its small rows carry some of
that cost.

Kept affordable and fair: trees live on disk (--work; tmpfs would need the tree and its copy
in memory at 4 GiB); the worker's and cp's copies of one pair are deleted after the pair,
then `sync` and a pause, so neither the deletion nor the writeback of earlier copies lands in
a timed run (`sync` waits for every dirty page on the machine: run it on a quiet one); each
step's tree is deleted before the next is generated. At most one tree and two copies are on
disk at a time in the bytes series (about 13 GiB at 4 GiB, plus the files series' 7 GiB;
checked before the start).

Usage: scripts/bench_growth.py BIN --work DIR [--runs N] [--mib M ...] [--files F ...]
                               [--settle-deleted SECONDS]
(scripts/bench-growth.sh builds the release binary and calls this with the defaults.)
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tree import generate, peak_rss_mib, timed, warm  # noqa: E402


def remove(path):
    if os.path.lexists(path):
        subprocess.run(["chmod", "-R", "u+w", path], check=True)
        subprocess.run(["rm", "-rf", path], check=True)


def settle():
    subprocess.run(["sync"], check=True)
    time.sleep(2)


def measure(args, base, files, mib, shape, keep=False):
    """One step. With `keep`, nothing is deleted: the tree and the copies stay for the caller
    to remove (see the module docs on deleted inodes)."""
    tree = os.path.join(base, f"tree-{files}-{mib}" if keep else "tree")
    remove(tree)
    files, size = generate(tree, None, files, mib, shape)
    limit_bytes, limit_files = str(size * 2), str(files * 2)
    warm([tree])
    settle()
    load0 = os.getloadavg()[0]
    snap_argv = [args.bin, "--snapshot-directory", tree, limit_bytes, limit_files]
    snap = statistics.median(timed(snap_argv)[0] for _ in range(args.runs))
    stage, cp, stage_sys, cp_sys = [], [], [], []
    for i in range(args.runs):
        # A pair, the order alternating; both copies are removed and written back after the
        # pair, so the first of the next pair follows a deletion (on ext4 creating files
        # right after deleting many is slower), which the alternation shares between sides.
        root, copy = f"{tree}-root-{i}", f"{tree}-cp-{i}"
        runs = [
            (stage, stage_sys, [args.bin, "--stage-regression-input", "source", tree, root,
                                limit_bytes, limit_files]),
            (cp, cp_sys, ["cp", "-a", tree, copy]),
        ]
        for out, out_sys, argv in runs if i % 2 == 0 else runs[::-1]:
            wall, _, sys_s = timed(argv)
            out.append(wall)
            out_sys.append(sys_s)
        if not keep:
            remove(root)
            remove(copy)
        settle()
    rss_root = f"{tree}-rss-root"
    rss = (
        peak_rss_mib(snap_argv),
        peak_rss_mib([args.bin, "--stage-regression-input", "source", tree, rss_root,
                      limit_bytes, limit_files]),
    )
    load1 = os.getloadavg()[0]
    if not keep:
        remove(rss_root)
        remove(tree)
        settle()
    return {
        "files": files, "bytes": size, "snap": snap, "stage": statistics.median(stage),
        "cp": statistics.median(cp), "rss": rss, "load": (load0, load1),
        "stage_sys": statistics.median(stage_sys), "cp_sys": statistics.median(cp_sys),
    }


def table(title, unit, rows, per):
    """`per(row)` is the step's size in `unit`s (MiB or files)."""
    print(f"{title}")
    print()
    print(f"| tree | snapshot | per {unit} | slope | stage | per {unit} | slope | cp -a | per {unit}"
          " | slope | peak RSS snapshot/stage | load before → after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    scale = 1e6 if unit == "file" else 1e3
    suffix = "µs" if unit == "file" else "ms"
    prev = None
    for r in rows:
        n = per(r)
        cells = []
        for key in ("snap", "stage", "cp"):
            cost = r[key] / n
            slope = "—" if prev is None else f"{cost / (prev[key] / per(prev)):.2f}"
            cells += [f"{r[key]:.3f} s", f"{cost * scale:.2f} {suffix}", slope]
        print(f"| {r['bytes'] / 2**20:.0f} MiB, {r['files']} files | " + " | ".join(cells)
              + f" | {r['rss'][0]:.1f}/{r['rss'][1]:.1f} MiB"
              + f" | {r['load'][0]:.2f} → {r['load'][1]:.2f} |")
        prev = r
    print()


def system_table(title, unit, rows, per):
    """The copies' kernel CPU time (rusage, median of the runs) per MiB or per file: unlike
    the wall time it does not grow with the machine's load, and it is where the deleted-inode
    scan of the module docs shows up."""
    print(f"{title}: system CPU time of the copies")
    print()
    print(f"| tree | stage sys | per {unit} | slope | cp -a sys | per {unit} | slope |")
    print("|---|---|---|---|---|---|---|")
    scale = 1e6 if unit == "file" else 1e3
    suffix = "µs" if unit == "file" else "ms"
    prev = None
    for r in rows:
        cells = []
        for key in ("stage_sys", "cp_sys"):
            cost = r[key] / per(r)
            slope = "—" if prev is None or prev[key] == 0 else \
                f"{cost / (prev[key] / per(prev)):.2f}"
            cells += [f"{r[key]:.3f} s", f"{cost * scale:.2f} {suffix}", slope]
        print(f"| {r['bytes'] / 2**20:.0f} MiB, {r['files']} files | " + " | ".join(cells) + " |")
        prev = r
    print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--work", required=True)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--mib", type=int, nargs="*", default=[64, 128, 256, 512, 1024, 2048, 4096])
    ap.add_argument("--mib-files", type=int, default=2500)
    ap.add_argument("--files", type=int, nargs="*",
                    default=[2500, 5000, 10000, 25000, 50000, 100000])
    ap.add_argument("--settle-deleted", type=float, default=360,
                    help="seconds to wait before the files series (see the module docs)")
    args = ap.parse_args()
    if args.runs < 1:
        sys.exit("bench-growth: --runs must be at least 1")
    base = os.path.join(args.work, "growth")
    os.makedirs(base)
    # Each bytes step holds its tree and one copy at a time on disk; the files series keeps
    # all its trees and copies (4 KiB blocks) until the end.
    biggest = (max(args.mib, default=0) * 2**20 * 3.2
               + sum(args.files) * (1 + 2 * args.runs) * 4.5 * 2**10)
    free = shutil.disk_usage(args.work).free
    if biggest > free:
        sys.exit(f"bench-growth: {args.work} has {free / 2**30:.1f} GiB free, the largest step"
                 f" needs about {biggest / 2**30:.1f} GiB")
    try:
        by_files = []
        if args.files:
            files_base = os.path.join(base, "files")
            os.makedirs(files_base)
            settle()
            time.sleep(args.settle_deleted)
            # Removed at the end with the rest: deleting it here would put its inodes in
            # front of the bytes series' creates.
            by_files = [measure(args, files_base, files, 1, "tiny", keep=True)
                        for files in args.files]
        by_bytes = [measure(args, base, args.mib_files, mib, "mixed") for mib in args.mib]
    finally:
        remove(base)
    cores = os.cpu_count() or 1
    print(f"{cores} cores; on disk ({args.work}); median of {args.runs} runs per cell; per MiB"
          " / per file = the cell's time divided by the step's size; slope = that cost over the"
          " previous step's (1.00 = linear)")
    print()
    if by_bytes:
        table(f"Bytes ({args.mib_files} files, mixed shape)", "MiB", by_bytes,
              lambda r: r["bytes"] / 2**20)
    if by_files:
        table("Files (64 B..4 KiB each, tiny shape)", "file", by_files, lambda r: r["files"])
    if by_bytes:
        system_table(f"Bytes ({args.mib_files} files)", "MiB", by_bytes,
                     lambda r: r["bytes"] / 2**20)
    if by_files:
        system_table("Files", "file", by_files, lambda r: r["files"])


if __name__ == "__main__":
    main()
