#!/usr/bin/python3
"""Plot numacoll-bench results (one CSV) into one PNG, or summarise several CSVs.

    plot.py --csv results.csv --out results.png [--title TEXT] [--stat max|avg|min] [--ref LABEL]
    plot.py --summary a.csv b.csv ... [--stat max|avg|min]

CSV columns: collective,impl,p,bytes,iterations,t_min_us,t_avg_us,t_max_us
(collective bcast, barrier, reduce, allreduce or one of the gather family; impl
"memcpy": one core's memcpy of the same bytes; "reduce-kernel" (reductions): one core's
numacoll_reduce_local on the same bytes; "cma-copy" (bcast, the gather family): every
rank's blocks by process_vm_readv, all ranks at once, nothing else; "flag-sync" (every
sized collective): the collective's waits alone, a word per rank, timed like it;
"flag": one-way cache-line latency between ranks 0 and 1). Panels, per collective found in the CSV:

  bcast, reduce, allreduce, the gather family
           latency vs size (log-log) per implementation, memcpy, reduce-kernel,
           cma-copy, flag-sync and flag drawn as the limits; ratio to native vs size
           (cma-copy's and flag-sync's too); multiple of memcpy vs
           size (with the reduce-kernel's own); with a sweep (impls numacoll:KEY=V
           for one KEY): time normalised to the first value vs size (the paper's
           figures 7 and 10), and for a numeric KEY time vs the value at a few sizes
           (figure 12's saw-tooth in f)
  barrier  time per implementation, with the flag latency

--summary prints, per CSV, sized collective (bcast, reduce, allreduce) and numacoll
implementation, the geometric mean of the ratio to the native MPI of the same run
per size range (0-256 B, 512 B-64 KiB, 128-512 KiB, >= 1 MiB), and on the bcast row
the barrier's; the same against the best native time of all the CSVs with the same
p (e.g. Open MPI and MPICH); and the multiples of the in-run limits (flag for
<= 256 B and the barrier, memcpy for >= 1 MiB, reduce-kernel for >= 1 MiB). It
needs no matplotlib.

Plots use Debian's python3-matplotlib (Agg backend, no display). Exit status 77
when matplotlib is missing, so a test can be skipped rather than failed.
"""
import argparse
import csv
import math
import sys
import textwrap
from collections import OrderedDict, defaultdict

plt = FuncFormatter = None


def need_matplotlib():
    global plt, FuncFormatter
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
        from matplotlib.ticker import FuncFormatter as formatter
    except ImportError:
        sys.stderr.write("plot.py: matplotlib is missing (Debian: apt-get install python3-matplotlib;"
                         " run it with /usr/bin/python3)\n")
        sys.exit(77)
    plt, FuncFormatter = pyplot, formatter

HEADER = ["collective", "impl", "p", "bytes", "iterations", "t_min_us", "t_avg_us", "t_max_us"]
ZERO_X = 0.5  # where size 0 sits on a log axis
# the in-run references, not implementations ("cma-copy": bcast and the gather family, each
# rank's blocks by process_vm_readv, all ranks at once, nothing else; "flag-sync": the
# collective's waits alone, one cache line per rank)
LIMITS = ("memcpy", "reduce-kernel", "cma-copy", "flag-sync", "flag")
# the references timed like a collective, drawn as dashed lines in the latency and ratio panels
TIMED_LIMITS = (("cma-copy", "--", "cma-copy (single copy, nothing else)"),
                ("flag-sync", "-.", "flag-sync (the waits, nothing else)"))
SIZED = ("bcast", "reduce", "allreduce", "gather", "gatherv", "scatter", "scatterv", "allgather",
         "allgatherv", "alltoall", "alltoallv")  # collectives measured over message sizes


def load(path, stat):
    col = "t_%s_us" % stat
    data = OrderedDict()  # collective -> impl -> {bytes: time}
    with open(path, newline="") as f:
        rd = csv.reader(f)
        head = next(rd, None)
        if head != HEADER:
            sys.exit("plot.py: %s: header is %r, expected %s" % (path, head, ",".join(HEADER)))
        ix = HEADER.index(col)
        for row in rd:
            if not row:
                continue
            coll, impl, b = row[0], row[1], int(row[3])
            data.setdefault(coll, OrderedDict()).setdefault(impl, {})[b] = float(row[ix])
    return data


def size_label(b, _pos=None):
    if b < 1:
        return "0"
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= (1 << shift):
            v = b / (1 << shift)
            return ("%d%s" % (v, unit)) if v == int(v) else ("%.1f%s" % (v, unit))
    return "%d" % b


def xs(sizes):
    return [s if s > 0 else ZERO_X for s in sizes]


def sweep_of(impls):
    """KEY and [(value, label)] when the numacoll impls are numacoll:KEY=V for one KEY."""
    key, vals = None, []
    for name in impls:
        if not name.startswith("numacoll:") or "," in name:
            continue
        k, _, v = name[len("numacoll:"):].partition("=")
        if key is None:
            key = k
        if k == key:
            vals.append((v, name))
    return (key, vals) if key and len(vals) >= 2 else (None, [])


def numeric(v):
    try:
        return float(v)
    except ValueError:
        return None


def style(ax, logy=True):
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlabel("message size (bytes)")


def sized_panels(coll, impls, stat, ref="native"):
    panels = []
    flag = impls.get("flag", {}).get(0)
    memcpy = impls.get("memcpy")
    kernel = impls.get("reduce-kernel")
    native = impls.get(ref)
    real = [k for k in impls if k not in LIMITS]

    def latency(ax):
        for name in real:
            d = impls[name]
            sz = sorted(d)
            ax.plot(xs(sz), [max(d[s], 1e-3) for s in sz], marker="o", ms=3, label=name)
        if memcpy:
            sz = sorted(b for b in memcpy if b > 0)
            ax.plot(sz, [memcpy[s] for s in sz], "k--", lw=1, label="memcpy (one core)")
        if kernel:
            sz = sorted(b for b in kernel if b > 0)
            ax.plot(sz, [kernel[s] for s in sz], "k-.", lw=1, label="reduce-kernel (one core)")
        for name, ls, label in TIMED_LIMITS:
            d = impls.get(name)
            if d:
                sz = sorted(d)
                ax.plot(xs(sz), [max(d[s], 1e-3) for s in sz], color="gray", ls=ls, lw=1,
                        label=label)
        if flag:
            ax.axhline(flag, color="gray", ls=":", lw=1, label="flag %.3f us" % flag)
        style(ax)
        ax.set_ylabel("t_%s (us)" % stat)
        ax.set_title("%s latency" % coll)
        ax.legend(fontsize=7)
    panels.append(latency)

    if native and len(real) > 1:
        def ratio(ax):
            for name in real:
                if name == ref:
                    continue
                d = impls[name]
                sz = [s for s in sorted(d) if s in native and native[s] > 0]
                ax.plot(xs(sz), [d[s] / native[s] for s in sz], marker="o", ms=3, label=name)
            for lname, ls, label in TIMED_LIMITS:
                d = impls.get(lname, {})
                sz = [s for s in sorted(d) if s in native and native[s] > 0]
                if sz:
                    ax.plot(xs(sz), [d[s] / native[s] for s in sz], color="gray", ls=ls, lw=1,
                            label=label)
            ax.axhline(1, color="k", lw=1)
            ax.axhline(0.5, color="gray", ls=":", lw=1)
            style(ax)  # log: one descheduled size must not flatten the rest
            ax.set_ylabel("t_%s / %s" % (stat, ref))
            ax.set_title("%s: ratio to %s (below 1: faster)" % (coll, ref))
            ax.legend(fontsize=7)
        panels.append(ratio)

    if memcpy:
        def limit(ax):
            for name in real:
                d = impls[name]
                sz = [s for s in sorted(d) if s > 0 and memcpy.get(s, 0) > 0]
                ax.plot(sz, [d[s] / memcpy[s] for s in sz], marker="o", ms=3, label=name)
            if kernel:
                sz = [s for s in sorted(kernel) if s > 0 and memcpy.get(s, 0) > 0]
                ax.plot(sz, [kernel[s] / memcpy[s] for s in sz], "k-.", lw=1,
                        label="reduce-kernel (one core)")
            ax.axhline(1, color="k", lw=1)
            ax.axhline(1.3, color="gray", ls=":", lw=1)
            style(ax)
            ax.set_ylabel("t_%s / memcpy" % stat)
            ax.set_title("%s: multiple of one core's memcpy" % coll)
            ax.legend(fontsize=7)
        panels.append(limit)

    key, vals = sweep_of(real)
    if key:
        base_v, base = vals[0]

        def normalised(ax):
            b = impls[base]
            for v, name in vals:
                d = impls[name]
                sz = [s for s in sorted(d) if b.get(s, 0) > 0]
                ax.plot(xs(sz), [d[s] / b[s] for s in sz], marker="o", ms=3, label="%s=%s" % (key, v))
            ax.axhline(1, color="k", lw=1)
            style(ax, logy=False)
            ax.set_ylabel("t_%s / t(%s=%s)" % (stat, key, base_v))
            ax.set_title("%s: sweep of %s, normalised to %s=%s" % (coll, key, key, base_v))
            ax.legend(fontsize=7)
        panels.append(normalised)

        nums = [(numeric(v), name) for v, name in vals]
        if all(x is not None for x, _ in nums):
            sizes = sorted(set.intersection(*[set(impls[n]) for _, n in nums]))
            big = [s for s in sizes if s >= 65536] or sizes
            pick = sorted(set(big[int(i * (len(big) - 1) / 3)] for i in range(4))) if big else []

            def versus(ax):
                for s in pick:
                    ax.plot([x for x, _ in nums], [impls[n][s] for _, n in nums], marker="o", ms=3,
                            label=size_label(s) + "B")
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.grid(True, alpha=0.3)
                ax.set_xlabel(key)
                ax.set_ylabel("t_%s (us)" % stat)
                ax.set_title("%s: time vs %s" % (coll, key))
                ax.legend(fontsize=7)
            panels.append(versus)
    return panels


def barrier_panels(coll, impls, stat):
    flag = impls.get("flag", {}).get(0)
    real = [k for k in impls if k not in LIMITS]

    def bars(ax):
        vals = [impls[n].get(0, float("nan")) for n in real]
        ax.bar(range(len(real)), vals, color=["C%d" % i for i in range(len(real))])
        ax.set_xticks(range(len(real)))
        ax.set_xticklabels(real, rotation=20, ha="right", fontsize=7)
        if flag:
            ax.axhline(flag, color="gray", ls=":", lw=1, label="flag %.3f us" % flag)
            ax.legend(fontsize=7)
        if vals and min(v for v in vals if v == v) > 0 and max(vals) / min(vals) > 30:
            ax.set_yscale("log")
        ax.set_ylabel("t_%s (us)" % stat)
        ax.set_title("%s" % coll)
        ax.grid(True, axis="y", alpha=0.3)
    return [bars]


RANGES = (("0-256 B", 0, 256), ("512 B-64 KiB", 257, 65536), ("128-512 KiB", 65537, 524288),
          (">= 1 MiB", 524289, 1 << 62))


def gmean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summary(paths, stat):
    import os
    runs = []  # (name, p, data)
    for path in paths:
        data = load(path, stat)
        p = None
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                p = int(row["p"])
                break
        runs.append((os.path.splitext(os.path.basename(path))[0], p, data))
    best = defaultdict(dict)  # (p, coll) -> bytes -> best native
    for _, p, data in runs:
        for coll, impls in data.items():
            for b, t in impls.get("native", {}).items():
                cur = best[(p, coll)].get(b)
                best[(p, coll)][b] = t if cur is None else min(cur, t)
    cols = [r[0] for r in RANGES] + ["barrier"]
    rw = max([len("run")] + [len(r[0]) for r in runs])
    cw = max(len(c) for c in ("coll",) + SIZED)
    iw = max([len("impl")] + [len(i) for r in runs for c in r[2].values() for i in c])
    head = "  %-*s  %-*s  %-*s" % (rw, "run", cw, "coll", iw, "impl")

    def row(name, coll, impl):
        return "  %-*s  %-*s  %-*s" % (rw, name, cw, coll, iw, impl)

    def fmt(v, w=14):
        return "%*s" % (w, "-" if v is None else "%.2f" % v)

    def rows(data, skip):
        """(sized collective, impl) of one CSV, bcast first; the barrier's impls ride on
        the bcast rows (or come alone when the CSV has no bcast)."""
        out = []
        for coll in [c for c in SIZED if c in data] or ["bcast"]:
            impls = [i for i in data.get(coll, {}) if i not in skip]
            if coll == "bcast":
                impls += [i for i in data.get("barrier", {}) if i not in skip and i not in impls]
            out += [(coll, i) for i in impls]
        return out

    def block(title, ref):
        print(title)
        print(head + "".join("%14s" % c for c in cols))
        for name, p, data in runs:
            for coll, impl in rows(data, ("native",) + LIMITS):
                d = data.get(coll, {})
                vals = [gmean([t / r for b, t in d.get(impl, {}).items()
                               for r in [ref(p, coll, d, b)] if lo <= b <= hi and r])
                        for _, lo, hi in RANGES]
                bar = None
                if coll == "bcast":
                    d = data.get("barrier", {})
                    t, r = d.get(impl, {}).get(0), ref(p, "barrier", d, 0)
                    bar = t / r if t and r else None
                vals.append(bar)
                print(row(name, coll, impl) + "".join(fmt(v) for v in vals))
        print()

    block("t_%s / native of the same run (geometric mean per size range; below 1: numacoll faster)"
          % stat, lambda p, coll, d, b: d.get("native", {}).get(b))
    block("t_%s / best native of all runs with the same p" % stat,
          lambda p, coll, d, b: best[(p, coll)].get(b))
    print("multiples of the in-run limits: t_%s / flag (<= 256 B, barrier), t_%s / memcpy and "
          "/ reduce-kernel (>= 1 MiB)" % (stat, stat))
    print(head + "%16s%16s%16s%16s" % ("x flag <=256 B", "x memcpy >=1MiB", "barrier x flag",
                                       "x kernel >=1MiB"))
    for name, p, data in runs:
        br = data.get("barrier", {})
        flag = next((data[c]["flag"].get(0) for c in data if "flag" in data[c]), None)
        for coll, impl in rows(data, LIMITS):
            d = data.get(coll, {})
            mc, kern = d.get("memcpy", {}), d.get("reduce-kernel", {})
            small = gmean([t / flag for b, t in d.get(impl, {}).items() if b <= 256 and flag])
            big = gmean([t / mc[b] for b, t in d.get(impl, {}).items() if b > 524288 and mc.get(b)])
            kbig = gmean([t / kern[b] for b, t in d.get(impl, {}).items()
                          if b > 524288 and kern.get(b)])
            bar = br.get(impl, {}).get(0) if coll == "bcast" else None
            bar = bar / flag if bar and flag else None
            print(row(name, coll, impl) + "".join(fmt(v, 16) for v in (small, big, bar, kbig)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv")
    ap.add_argument("--out")
    ap.add_argument("--title", default="numacoll-bench")
    ap.add_argument("--stat", choices=("min", "avg", "max"), default="max")
    ap.add_argument("--summary", nargs="+", metavar="CSV")
    ap.add_argument("--ref", default="native", help="implementation the ratio panel divides by")
    a = ap.parse_args()
    if a.summary:
        summary(a.summary, a.stat)
        return
    if not a.csv or not a.out:
        ap.error("--csv and --out are required (or --summary CSV...)")
    need_matplotlib()
    data = load(a.csv, a.stat)
    if not data:
        sys.exit("plot.py: %s has no rows" % a.csv)
    panels = []
    for coll, impls in data.items():
        if coll == "barrier":
            panels += barrier_panels(coll, impls, a.stat)
        else:
            if a.ref not in impls:
                sys.exit("plot.py: --ref %s: no such implementation in %s" % (a.ref, a.csv))
            panels += sized_panels(coll, impls, a.stat, a.ref)
    ncols = 2 if len(panels) > 1 else 1
    nrows = int(math.ceil(len(panels) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.5 * ncols, 4.2 * nrows), squeeze=False)
    for i, draw in enumerate(panels):
        draw(axes[i // ncols][i % ncols])
    for j in range(len(panels), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    fig.suptitle("\n".join(textwrap.wrap(a.title, 110)), fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(a.out, dpi=110)
    sys.stderr.write("plot.py: wrote %s\n" % a.out)


if __name__ == "__main__":
    main()
