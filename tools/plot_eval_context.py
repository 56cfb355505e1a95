#!/usr/bin/python3
"""Plots `bitsim eval --json`'s figures by context: per row, the mean KL divergence of its
next-token distribution from float-ternary-head's (the float arithmetic with the board's
ternary lm_head, which every board row shares) and its perplexity, per bucket of positions.

    build/bitsim eval --model models/kjv-long --text models/kjv-long/test.txt --window 2048 --json > eval.json
    tools/plot_eval_context.py eval.json docs/kl-by-context.png

Every figure is `simulated` (golden references on the host), as the document says.
Needs python3-matplotlib (Debian).
"""
import json
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("plot_eval_context: needs python3-matplotlib (apt-get install python3-matplotlib)", file=sys.stderr)
    sys.exit(2)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, out = sys.argv[1], sys.argv[2]
    try:
        with open(src, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"plot_eval_context: {src}: {e}", file=sys.stderr)
        return 2
    if doc.get("schema") != "bitsim.eval/2":
        print(f"plot_eval_context: {src}: schema {doc.get('schema')!r}, expected bitsim.eval/2", file=sys.stderr)
        return 2
    fig, (ax_kl, ax_ppl) = plt.subplots(1, 2, figsize=(11, 4.4))
    for row in doc["rows"]:
        b = row["buckets"]
        x = [k["to"] for k in b]
        if row["arithmetic"] != "float-ternary-head":
            ax_kl.plot(x, [max(k["kl_float_ternary_head"], 1e-7) for k in b], "o-", ms=3, label=row["arithmetic"])
        ax_ppl.plot(x, [k["ppl"] for k in b], "o-", ms=3, label=row["arithmetic"])
    for ax in (ax_kl, ax_ppl):
        ax.set_xscale("log", base=2)
        ticks = [k["to"] for k in doc["rows"][0]["buckets"]]
        ax.set_xticks(ticks)
        ax.set_xticklabels([f'{k["from"]}-{k["to"]}' for k in doc["rows"][0]["buckets"]], fontsize=8)
        ax.set_xlabel("positions in the window (bucket)")
        ax.grid(alpha=0.3)
    ax_kl.set_yscale("log")
    ax_kl.set_ylabel("mean KL(float-ternary-head || row), nats")
    ax_ppl.set_ylabel("perplexity")
    ax_kl.legend(fontsize=7)
    name = doc["model"].rstrip("/").split("/")[-1]
    fig.suptitle(f"{name}, {doc['text'].split('/')[-1]}: {doc['windows']} windows of {doc['window']} positions, "
                 f"simulated (golden references)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
