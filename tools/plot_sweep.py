#!/usr/bin/python3
"""Plot a `bitsim sweep --csv` file: tok/s and the per-component time stack against the
swept key (the first column). Usage: tools/plot_sweep.py SWEEP.csv OUT.png|OUT.svg [--title T]
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv")
    ap.add_argument("out")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        # "# ..." lines: a partial sweep's marker (stopped by a signal), not a row
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    if not rows:
        sys.exit(f"{a.csv}: no rows")
    key = list(rows[0].keys())[0]
    for need in ("tok_s", "matmul_ms", "attention_ms", "cpu_ms", "timing"):
        if need not in rows[0]:
            sys.exit(f"{a.csv}: column '{need}' missing (not a bitsim sweep CSV?)")
    x = [float(r[key]) for r in rows]
    tok = [float(r["tok_s"]) for r in rows]
    mm = [float(r["matmul_ms"]) for r in rows]
    at = [float(r["attention_ms"]) for r in rows]
    cpu = [float(r["cpu_ms"]) for r in rows]
    fails = [r["timing"].startswith("fails") for r in rows]

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
    ax1.plot(x, tok, "o-", color="tab:blue", label="simulated tok/s")
    for xi, ti, f in zip(x, tok, fails):
        if f:
            ax1.plot([xi], [ti], "x", color="tab:red", markersize=10)
    ax1.plot([], [], "x", color="tab:red", label="fails timing (board)")
    ax1.set_ylabel("tokens per second (simulated)")
    ax1.grid(alpha=0.3)
    ax1.legend(loc="lower right")
    ax1.set_title(a.title or f"bitsim sweep over {key}")
    width = (max(x) - min(x)) / max(1, len(x)) * 0.6 if len(x) > 1 else 1.0
    ax2.bar(x, mm, width, label="matmul", color="tab:blue")
    ax2.bar(x, at, width, bottom=mm, label="attention", color="tab:orange")
    ax2.bar(x, cpu, width, bottom=[m + t for m, t in zip(mm, at)], label="CPU", color="tab:gray")
    ax2.set_ylabel("ms per token (simulated)")
    ax2.set_xlabel(key)
    ax2.grid(alpha=0.3)
    ax2.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
