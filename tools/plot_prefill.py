#!/usr/bin/python3
"""Plot the time to first token against prefill.tokens_per_pass from `bitsim sweep --csv`
files of `--grid prefill.tokens_per_pass=... --grid host.walker=cpu,pl --prompt-tokens N`,
one file per prompt length; a point whose prefill engine does not fit the Zynq-7020 (the
`fit` column) is drawn hollow. Usage:
  tools/plot_prefill.py OUT.png|OUT.svg SWEEP_64.csv [SWEEP_512.csv ...] [--title T]
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from sweep_csv import read_sweep_rows  # noqa: E402


def fail(msg):
    """Bad input: the message (naming the thing at fault) on stderr, exit 2."""
    print(f"plot_prefill.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read(path):
    """A sweep CSV -> (prompt tokens, {walker: [(P, TTFT s, fits)]})."""
    rows = read_sweep_rows(path, ("prefill.tokens_per_pass", "host.walker", "ttft_ms", "prefill_tok_s", "fit"),
                           "expected a bitsim sweep CSV over prefill.tokens_per_pass and host.walker with "
                           "--prompt-tokens", fail)
    series = {}
    try:
        for r in rows:
            if not r["ttft_ms"]:
                fail(f"{path}: a row without ttft_ms (the sweep ran without --prompt-tokens)")
            series.setdefault(r["host.walker"], []).append(
                (int(r["prefill.tokens_per_pass"]), float(r["ttft_ms"]) / 1e3, r["fit"] == "fits"))
        # the prompt length, from the rate: prefill_tok_s = N / TTFT
        n = round(float(rows[0]["prefill_tok_s"]) * float(rows[0]["ttft_ms"]) / 1e3)
    except (TypeError, ValueError):
        fail(f"{path}: a 'prefill.tokens_per_pass', 'ttft_ms' or 'prefill_tok_s' value is not a number")
    return n, {w: sorted(v) for w, v in series.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    fig, ax = plt.subplots(figsize=(7, 5))
    styles = {"cpu": ("tab:blue", "o"), "pl": ("tab:orange", "s")}
    lines = ["-", "--", ":", "-."]
    data = [read(path) for path in a.csv]
    for i, (n, series) in enumerate(data):
        for walker, pts in sorted(series.items()):
            color, marker = styles.get(walker, ("tab:gray", "^"))
            label = f"{n}-token prompt, {'Cortex-A9 host' if walker == 'cpu' else 'PL walker'}"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], lines[i % len(lines)], color=color, label=label)
            for p, t, fits in pts:
                ax.plot([p], [t], marker, color=color, markerfacecolor=color if fits else "white")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("prefill.tokens_per_pass P (prompt tokens per weight pass)")
    ax.set_ylabel("time to first token, s (simulated)")
    ax.set_title(a.title or "bitnet-large: TTFT against P (simulated; hollow: does not fit the Zynq-7020)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
