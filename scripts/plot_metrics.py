#!/usr/bin/python3
"""Learning curves from `tfmc train --metrics run.jsonl` into a PNG.

    /usr/bin/python3 scripts/plot_metrics.py run.jsonl -o curve.png [--title "..."]

Panels: training and validation loss against steps; the same against wall time; validation BLEU
(when trained with --valid-bleu) against steps. A file that several runs appended to (a resumed
run) is read as one run: wall time continues where the previous run stopped. Needs Debian's
python3-matplotlib (installed by scripts/bootstrap.sh).
"""
import argparse
import json
import sys


def read_metrics(path):
    train, valid = [], []
    offset = 0.0
    last_elapsed = 0.0
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_metrics: error: {path}:{number}: not JSON ({e.msg})")
            if "step" not in record:
                sys.exit(f"plot_metrics: error: {path}:{number}: no 'step'")
            elapsed = record.get("elapsed_s")
            if elapsed is not None:
                if elapsed + 1e-9 < last_elapsed and "loss" in record:  # a new run appended
                    offset += last_elapsed
                last_elapsed = elapsed
                record["wall_min"] = (offset + elapsed) / 60.0
            (valid if "valid_loss" in record else train).append(record)
    if not train and not valid:
        sys.exit(f"plot_metrics: error: {path} has no metrics")
    return train, valid


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("metrics")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_metrics: error: needs python3-matplotlib (apt-get install python3-matplotlib; run it with /usr/bin/python3)")
    train, valid = read_metrics(args.metrics)
    has_bleu = any("valid_bleu" in r for r in valid)
    panels = 3 if has_bleu else 2
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4))

    def curve(ax, records, x, y, label, **style):
        points = [(r[x], r[y]) for r in records if x in r and y in r]
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], label=label, **style)

    for ax, x, xlabel in ((axes[0], "step", "step"), (axes[1], "wall_min", "wall time (min)")):
        curve(ax, train, x, "loss", "training loss", linewidth=1)
        curve(ax, valid, x, "valid_loss", "validation loss", marker="o")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("label-smoothed loss per target token")
        ax.grid(alpha=0.3)
        ax.legend()
    if has_bleu:
        curve(axes[2], valid, "step", "valid_bleu", "validation BLEU (greedy)", marker="o", color="C2")
        axes[2].set_xlabel("step")
        axes[2].set_ylabel("BLEU")
        axes[2].grid(alpha=0.3)
        axes[2].legend()
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.output, dpi=100)
    print(f"wrote {args.output}: {len(train)} training and {len(valid)} validation points")


if __name__ == "__main__":
    main()
