#!/usr/bin/python3
"""Plot tok/s (simulated) against the context T, one line per design, from CSVs of
`bitsim sweep` rows with the context prepended (first column `context`, then the sweep's
columns; docs/design-space.md shows the loop that writes them).
Usage: tools/plot_variants.py OUT.png|OUT.svg LABEL=CSV [LABEL=CSV ...] [--title T]
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from sweep_csv import read_sweep_rows  # noqa: E402


def fail(msg):
    """Bad input: the message (naming the thing at fault) on stderr, exit 2."""
    print(f"plot_variants.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read_design(spec):
    """LABEL=CSV -> (label, [T], [tok/s]), sorted by T."""
    label, eq, path = spec.partition("=")
    if not eq or not label or not path:
        fail(f"'{spec}': expected LABEL=CSV")
    rows = read_sweep_rows(path, ("context", "tok_s"), "expected a sweep CSV with the context prepended", fail)
    try:
        pts = sorted((int(r["context"]), float(r["tok_s"])) for r in rows)
    except (TypeError, ValueError):
        fail(f"{path}: a 'context' or 'tok_s' value is not a number")
    return label, [t for t, _ in pts], [v for _, v in pts]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="the image to write (.png or .svg)")
    ap.add_argument("designs", nargs="+", metavar="LABEL=CSV", help="one line per design")
    ap.add_argument("--title", default="tok/s against the context T, bitnet-large (simulated)")
    a = ap.parse_args()
    designs = [read_design(s) for s in a.designs]

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, t, tok in designs:
        ax.plot(t, tok, "o-", markersize=4, label=f"{label} (simulated)")
    ax.set_xlabel("context T (tokens in the KV cache)")
    ax.set_ylabel("tokens per second (simulated)")
    ax.set_title(a.title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
