#!/usr/bin/python3
"""Plot tokens per second against tokens per joule for designs, one point (or several) per
`bitsim sweep --csv` file, and mark the Pareto front (no other design both faster and more
frugal). Usage: tools/plot_energy.py OUT.png|OUT.svg NAME=SWEEP.csv [NAME=SWEEP.csv ...]
Every figure is simulated (docs/energy.md: datasheet IDD currents, vendor power estimates).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def refuse(message):
    sys.stderr.write(f"plot_energy.py: {message}\n")
    sys.exit(2)


def points(name, path):
    try:
        f = open(path, newline="")
    except OSError as e:
        refuse(f"{path}: {e.strerror}")
    with f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    if not rows:
        refuse(f"{path}: no rows")
    for need in ("tok_s", "tokens_per_j"):
        if need not in rows[0]:
            refuse(f"{path}: column '{need}' missing (not a bitsim sweep CSV with energy?)")
    key = list(rows[0].keys())[0]
    label = (lambda r: name) if len(rows) == 1 else (lambda r: f"{name} {key}={r[key]}")
    return [(label(r), float(r["tok_s"]), float(r["tokens_per_j"])) for r in rows]


def main():
    if len(sys.argv) < 3 or any("=" not in a for a in sys.argv[2:]):
        refuse("usage: plot_energy.py OUT.png NAME=SWEEP.csv [NAME=SWEEP.csv ...]")
    pts = []
    for arg in sys.argv[2:]:
        name, path = arg.split("=", 1)
        pts += points(name, path)
    front = [p for p in pts if not any(q[1] >= p[1] and q[2] >= p[2] and (q[1], q[2]) != (p[1], p[2]) for q in pts)]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for label, tok_s, tok_j in pts:
        on = (label, tok_s, tok_j) in front
        ax.scatter(tok_s, tok_j, color="tab:red" if on else "tab:blue", zorder=3)
        ax.annotate(label, (tok_s, tok_j), textcoords="offset points", xytext=(4, 3), fontsize=7)
    front.sort(key=lambda p: p[1])
    ax.plot([p[1] for p in front], [p[2] for p in front], color="tab:red", lw=1, label="Pareto front")
    ax.set_xlabel("tokens per second (simulated)")
    ax.set_ylabel("tokens per joule (simulated: datasheet and vendor estimates)")
    ax.set_title("bitnet-large on the PYNQ-Z2 and its what-ifs: speed against energy")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=120)


if __name__ == "__main__":
    main()
