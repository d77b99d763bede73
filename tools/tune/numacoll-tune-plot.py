#!/usr/bin/env python3
"""Draw numacoll-tune's pictures from the CSV files it wrote into DIR.

fig4_time_vs_f.png: the paper's figure 4 for this node: model time vs fragment size f at
a fixed queue budget b (s = b/f), with its two competing terms (queue turns grow with f,
notifications fall with f) and the measured points on top.
time_vs_s.png: model time vs queue length s at f*, measured points on top.
Needs python3-matplotlib (Debian). Usage: numacoll-tune-plot.py DIR
"""
import csv
import os
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    with open(path) as f:
        lines = [line for line in f if not line.startswith("#")]
    return list(csv.DictReader(lines))


def header(path):
    with open(path) as f:
        first = f.readline()
    text = first[1:].strip() if first.startswith("#") else ""
    return "\n".join(textwrap.wrap(text, 100))


def main(d):
    mf = rows(os.path.join(d, "fig4_model_f.csv"))
    xf = rows(os.path.join(d, "fig4_measured_f.csv"))
    us = 1e6
    fig, ax = plt.subplots(figsize=(7, 4.5))
    f = [float(r["f"]) / 1024 for r in mf]
    ax.plot(f, [float(r["total"]) * us for r in mf], label="model t(f)", color="black")
    ax.plot(f, [float(r["queue_term"]) * us for r in mf], "--",
            label="ceil(m/b)(t_WO + t_A + f t)")
    ax.plot(f, [float(r["notify_term"]) * us for r in mf], ":", label="ceil(m/f) t_W")
    ax.scatter([float(r["f"]) / 1024 for r in xf], [float(r["measured"]) * us for r in xf],
               color="red", zorder=3, label="measured")
    ax.set_xscale("log")
    ax.set_xlabel("fragment size f [KiB] (s = b / f)")
    ax.set_ylabel("broadcast time [us]")
    ax.set_title("numacoll: time vs f\n" + header(os.path.join(d, "fig4_model_f.csv")),
                 fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "fig4_time_vs_f.png"), dpi=120)

    ms = rows(os.path.join(d, "time_vs_s_model.csv"))
    xs = rows(os.path.join(d, "time_vs_s_measured.csv"))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot([float(r["s"]) for r in ms], [float(r["model"]) * us for r in ms], color="black",
            label="model t(s)")
    ax.scatter([float(r["s"]) for r in xs], [float(r["measured"]) * us for r in xs],
               color="red", zorder=3, label="measured")
    ax.set_xlabel("queue length s (f = f*)")
    ax.set_ylabel("broadcast time [us]")
    ax.set_title("numacoll: time vs s\n" + header(os.path.join(d, "time_vs_s_model.csv")),
                 fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "time_vs_s.png"), dpi=120)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: numacoll-tune-plot.py DIR\n")
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
