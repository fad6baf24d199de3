#!/usr/bin/env python3
"""Side-by-side benchmark of the worker's tree snapshot and staging against plain tools.

    worker --snapshot-directory       vs  openssl dgst -sha256 over the same bytes as one file
    worker --stage-regression-input   vs  cp -a of the same tree

Both sides run under the same conditions, in pairs (A B, then B A, alternating so a drift in
the machine's state favours neither), and the figure reported is the per-pair ratio
worker/baseline: its median and its min-max over all pairs.

What is kept out of the timed window, because it favours one side or measures the machine:
  * deletions: every destination directory is fresh (created as a new, never-used name under
    a parent made before the timed runs) and nothing is deleted until all pairs are done; on
    ext4, creating files right after deleting many makes the allocator scan the freed inodes,
    which slowed whichever side ran after a deletion;
  * writeback: one `sync` and a pause before the timed runs start, and a `sync` before
    each timed run, so that no run writes back the previous run's copy;
  * cold cache: both inputs are read once before timing.
The load average is recorded before and after each table; a run with a load above the
number of cores is marked as such, not silently reported.

Usage: scripts/bench_tree.py BIN --work DIR [--pairs N] [--mib M ...] [--files F] [--fs disk|tmpfs ...]
                             [--shape mixed|large|tiny]
(scripts/bench-staging.sh builds the release binary and calls this with the defaults.)
"""

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import time


SHAPES = ("mixed", "large", "tiny")


def file_sizes(rng, files, mib, shape="mixed"):
    """The deterministic sizes of a bench tree.

    mixed: `files` files, most of them small (log-uniform in 64 B..64 KiB), one in 500 large,
           the large ones holding the rest of `mib`;
    large: 64 small files and 40 large ones holding the rest of `mib` (`files` is ignored):
           the large-file path, where the copy costs per byte, not per file;
    tiny:  `files` files log-uniform in 64 B..4 KiB and no large one (`mib` is ignored):
           the per-file cost, with as few bytes as a file count allows."""
    target = mib * 1024 * 1024
    if shape == "tiny":
        return [int(64 * 2 ** (rng.random() * 6)) for _ in range(files)]
    if shape == "large":
        small, large = 64, 40
    else:
        large = max(1, files // 500)
        small = files - large
    sizes = [int(64 * 2 ** (rng.random() * 10)) for _ in range(small)]
    rest = max(0, target - sum(sizes))
    weights = [rng.random() ** 3 + 0.01 for _ in range(large)]
    sizes += [int(rest * w / sum(weights)) for w in weights]
    return sizes


def generate(tree, concat, files, mib, shape="mixed"):
    """Writes the bench tree (see `file_sizes`), spread over 37 x 11 folders; plus, unless
    `concat` is None, the same bytes in digest order as one file for the openssl baseline."""
    rng = random.Random(20240601)
    sizes = file_sizes(rng, files, mib, shape)
    width = max(5, len(str(len(sizes) - 1)))
    rng.shuffle(sizes)
    paths = []
    for i, size in enumerate(sizes):
        rel = f"d{i % 37:02}/s{(i * 7) % 11:02}/f{i:0{width}}.bin"
        path = os.path.join(tree, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            # Written in pieces so a 4 GiB tree never holds a large file in memory.
            left = size
            while left > 0:
                piece = min(left, 64 << 20)
                f.write(rng.randbytes(piece))
                left -= piece
        paths.append(rel)
    if concat is not None:
        paths.sort(key=lambda p: p.encode())
        with open(concat, "wb") as out:
            for rel in paths:
                with open(os.path.join(tree, rel), "rb") as f:
                    while chunk := f.read(64 << 20):
                        out.write(chunk)
    return len(sizes), sum(sizes)


def warm(paths):
    for top in paths:
        if os.path.isfile(top):
            with open(top, "rb") as f:
                while f.read(1 << 20):
                    pass
            continue
        for root, _, names in os.walk(top):
            for name in names:
                with open(os.path.join(root, name), "rb") as f:
                    while f.read(1 << 20):
                        pass


def timed(argv):
    """Wall, user and system seconds of one child, its output discarded.

    Each run starts with no dirty pages: `sync` first, outside the timed window. Without it
    the run after a copy started with that copy's 1 GiB still dirty and wrote it back inside
    its own window (/proc/vmstat nr_dirty 0.6-2.1 GiB at the start, nr_written 0-2.2 GiB
    during a run, depending on the order in the pair), so one side could pay for the other's
    writeback. It did not steady the large-file rows on its own (session 11's quiet run still
    spread 0.38-4.23x); see BENCHMARKS.md, "The large-file path"."""
    subprocess.run(["sync"], check=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"bench: {argv[0]} failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def pairs(name, worker, baseline, count):
    """`count` pairs, the order alternating; worker(i)/baseline(i) give the i-th argv."""
    rows = []
    for i in range(count + 1):  # pair 0 is a warm-up, not reported
        order = [("w", worker), ("b", baseline)] if i % 2 == 0 else [("b", baseline), ("w", worker)]
        got = {side: timed(make(i)) for side, make in order}
        if i > 0:
            rows.append((got["w"], got["b"]))
    ratios = [w[0] / b[0] for w, b in rows]
    return {
        "name": name,
        "worker": statistics.median(w[0] for w, _ in rows),
        "baseline": statistics.median(b[0] for _, b in rows),
        "ratio": statistics.median(ratios),
        "min": min(ratios),
        "max": max(ratios),
        "worker_cpu": (statistics.median(w[1] for w, _ in rows), statistics.median(w[2] for w, _ in rows)),
        "baseline_cpu": (statistics.median(b[1] for _, b in rows), statistics.median(b[2] for _, b in rows)),
    }


def peak_rss_mib(argv):
    """Peak RSS of one extra run, measured by GNU time: a child forked from this Python
    process would report Python's own high-water mark, which survives exec."""
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, check=True)
    return int(done.stderr.decode().strip().splitlines()[-1]) / 1024


def settle():
    subprocess.run(["sync"], check=True)
    time.sleep(3)


def bench_fs(args, fs, base):
    tree, concat = os.path.join(base, "tree"), os.path.join(base, "concat.bin")
    results = []
    for mib in args.mib:
        for p in (tree, concat):
            subprocess.run(["rm", "-rf", p], check=True)
        files, size = generate(tree, concat, args.files, mib, args.shape)
        # The small files alone come to about 181 MiB at 20,000 files, so a smaller request
        # cannot be met: label each row with the bytes the tree really holds.
        label = f"{size / 2**20:.0f} MiB" + ("" if args.shape == "mixed" else f" ({args.shape})")
        limit_bytes, limit_files = str(size * 4), str(files * 2)
        dst = os.path.join(base, f"dst-{mib}")
        os.makedirs(dst)
        warm([tree, concat])
        settle()
        load0 = os.getloadavg()[0]
        snap = pairs(
            f"snapshot vs openssl, {label}",
            lambda i: [args.bin, "--snapshot-directory", tree, limit_bytes, limit_files],
            lambda i: ["openssl", "dgst", "-sha256", concat],
            args.pairs,
        )
        # Fresh, never-used destinations for both sides; nothing is deleted until the end.
        stage = pairs(
            f"stage vs cp -a, {label}",
            lambda i: [args.bin, "--stage-regression-input", "source", tree,
                       os.path.join(dst, f"root-{i}"), limit_bytes, limit_files],
            lambda i: ["cp", "-a", tree, os.path.join(dst, f"cp-{i}")],
            args.pairs,
        )
        load1 = os.getloadavg()[0]
        probe = os.path.join(dst, "rss-root")
        rss = (
            peak_rss_mib([args.bin, "--snapshot-directory", tree, limit_bytes, limit_files]),
            peak_rss_mib([args.bin, "--stage-regression-input", "source", tree, probe,
                          limit_bytes, limit_files]),
        )
        for r in (snap, stage):
            r.update(fs=fs, files=files, bytes=size, load=(load0, load1))
        snap["rss"], stage["rss"] = rss
        results += [snap, stage]
        subprocess.run(["chmod", "-R", "u+w", dst], check=True)
        subprocess.run(["rm", "-rf", dst], check=True)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--work", required=True)
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--mib", type=int, nargs="+", default=[64, 512])
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--fs", nargs="+", default=["disk", "tmpfs"])
    ap.add_argument("--shape", choices=SHAPES, default="mixed")
    args = ap.parse_args()
    if args.pairs < 3:
        sys.exit("bench: --pairs must be at least 3")
    cores = os.cpu_count() or 1
    results = []
    for fs in args.fs:
        if fs == "disk":
            base = os.path.join(args.work, "disk")
        elif fs == "tmpfs":
            base = os.path.join("/dev/shm", f"bench-tree-{os.getpid()}")
        else:
            sys.exit(f"bench: unknown --fs {fs}")
        os.makedirs(base)
        try:
            results += bench_fs(args, fs, base)
        finally:
            subprocess.run(["chmod", "-R", "u+w", base])
            subprocess.run(["rm", "-rf", base])
    print(f"{cores} cores; {args.pairs} pairs per row (A B / B A alternating, one warm-up pair"
          " not counted); ratio = worker / baseline per pair")
    print()
    print("| fs | comparison | worker median | baseline median | ratio median | ratio min–max"
          " | worker user/sys | baseline user/sys | peak RSS | load before → after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        busy = " (busy)" if max(r["load"]) > cores else ""
        print(f"| {r['fs']} | {r['name']} | {r['worker']:.3f} s | {r['baseline']:.3f} s"
              f" | {r['ratio']:.2f} | {r['min']:.2f}–{r['max']:.2f}"
              f" | {r['worker_cpu'][0]:.2f}/{r['worker_cpu'][1]:.2f} s"
              f" | {r['baseline_cpu'][0]:.2f}/{r['baseline_cpu'][1]:.2f} s"
              f" | {r['rss']:.1f} MiB | {r['load'][0]:.2f} → {r['load'][1]:.2f}{busy} |")


if __name__ == "__main__":
    main()
