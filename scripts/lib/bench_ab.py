"""The tables of the A/B benchmarks (bench-rehearse.sh: base/head, bench-runsc.sh: runc/runsc),
imported by their Python parts (run from the repository root): one row per workload of the two
sides' run times, and the load the runs saw."""

import statistics


def ratio_header(a, b):
    """The table's two header lines for sides named `a` and `b`."""
    return (f"| | runs each | {a} median (min–max) | {b} median (min–max) | ratio of medians ({b}/{a}) | ratio per round min–max |\n"
            "|---|---|---|---|---|---|")


def ratio_row(name, a, b, unit="s", scale=1, digits=2):
    """A workload's row: the times `a` and `b` (seconds, round by round) shown times `scale` in
    `unit` with `digits` decimals, the ratio of their medians and its range per round."""
    ma, mb = statistics.median(a), statistics.median(b)
    per = [y / x for x, y in zip(a, b)]

    def shown(x):
        return f"{x * scale:.{digits}f}"

    return (f"| {name} | {len(a)} | {shown(ma)} {unit} ({shown(min(a))}–{shown(max(a))}) | "
            f"{shown(mb)} {unit} ({shown(min(b))}–{shown(max(b))}) | **{mb / ma:.2f}** | {min(per):.2f}–{max(per):.2f} |")


def load_line(loads):
    """The 1-minute load averages read before and after each run, summed up."""
    return (f"1-minute load average over the runs: min {min(loads):.2f}, "
            f"median {statistics.median(loads):.2f}, max {max(loads):.2f}")
