#!/usr/bin/env python3
"""Cached vs full-prefix decoding on a whole test set, side by side in one run: `tfmc translate`
with the K/V cache (decode_step) and with --no-cache (decode over the whole prefix every step),
greedy and beam, alternating rounds. Checks that both write identical translations and prints
time, sentences/s, BLEU, the speed-up and the load average.

  python3 bench/decode_ratios.py --model small-x.tfmx --checkpoint small.ckpt --tokenizer m30k.spm \
      [--data ../shared/data/multi30k] [--split test_2016_flickr] [--beams 1,4] [--rounds 2] \
      [--bf16-model small-x-bf16.tfmx]

With --bf16-model (the same spec compiled with --precision=bf16), every round also translates
with it (cached) and the bf16 / f32 speed-up and both BLEU scores are printed.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def translate(args, beam, cache, out, model=None):
    cmd = [args.tfmc, "translate", model or args.model, "--checkpoint", args.checkpoint, "--tokenizer", args.tokenizer,
           "--data", args.data, "--split", args.split, "--beam", str(beam), "--output", out]
    if not cache:
        cmd.append("--no-cache")
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    secs = float(re.search(r", ([0-9.]+) s \(", text).group(1))
    calls = int(re.search(r"([0-9]+) decoder calls", text).group(1))
    bleu = float(re.search(r"BLEU = ([0-9.]+)", text).group(1))
    return secs, calls, bleu


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tfmc", default=os.path.join(ROOT, "build", "bin", "tfmc"))
    p.add_argument("--model", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "multi30k"))
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--beams", default="1,4")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--bf16-model", default="")
    args = p.parse_args()
    print(f"load average at start: {loadavg()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for beam in [int(b) for b in args.beams.split(",")]:
            times = {True: [], False: [], "bf16": []}
            info = {}
            for r in range(args.rounds):
                for cache in (True, False) + (("bf16",) if args.bf16_model else ()):
                    out = os.path.join(tmp, f"b{beam}-{cache}.txt")
                    if cache == "bf16":
                        secs, calls, bleu = translate(args, beam, True, out, args.bf16_model)
                    else:
                        secs, calls, bleu = translate(args, beam, cache, out)
                    times[cache].append(secs)
                    info[cache] = (calls, bleu, open(out, encoding="utf-8").read())
            same = info[True][2] == info[False][2]
            n = info[True][2].count("\n")
            c, f = statistics.median(times[True]), statistics.median(times[False])
            rows.append((beam, c, f, n, info[True][1], info[False][1], info[True][0], same))
            print(f"beam {beam}: cached {c:.2f} s ({n / c:.0f} sentences/s, {info[True][0]} decoder calls), "
                  f"full prefix {f:.2f} s ({n / f:.0f} sentences/s), speed-up {f / c:.2f}x; "
                  f"BLEU {info[True][1]:.2f} / {info[False][1]:.2f}; translations "
                  f"{'identical' if same else 'DIFFERENT'} ({n} sentences); rounds {times[True]} vs {times[False]}")
            if args.bf16_model:
                b = statistics.median(times["bf16"])
                changed = sum(x != y for x, y in zip(info["bf16"][2].splitlines(), info[True][2].splitlines()))
                print(f"beam {beam}: bf16 cached {b:.2f} s vs f32 cached {c:.2f} s, speed-up {c / b:.2f}x; "
                      f"BLEU {info['bf16'][1]:.2f} vs {info[True][1]:.2f}; {changed} of {n} translations differ; "
                      f"rounds {times['bf16']}")
    print(f"load average at end: {loadavg()}")
    if not all(r[-1] for r in rows):
        sys.exit("cached and full-prefix translations differ")


if __name__ == "__main__":
    main()
