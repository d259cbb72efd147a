#!/usr/bin/env python3
"""Predicted data-parallel efficiency of `mpirun -np N tfmc train` on N machines.

    bench/scaling_model.py small=TOK_PER_S base=TOK_PER_S big=TOK_PER_S [--latency-us 30]
                           [--batch-log train.log] [--update-freq F]

TOK_PER_S is the training throughput of one machine (source + target tokens per second, as
`tfmc train` prints them), measured with bench/data_parallel.sh or `tfmc train --batch ...`.
The model, per training step of one machine:

  compute   T_c = 2 x batch_tokens / TOK_PER_S     (a batch of batch_tokens holds at most that
                                                   many padded source and as many target tokens)
  gradient  G   = 4 bytes x parameters             (f32, counted from the spec below)
  allreduce T_a = 2 (N-1)/N x G / bandwidth + 2 (N-1) x latency     (ring: reduce-scatter +
                                                   allgather; each byte crosses the link twice)
  no overlap:   efficiency = T_c / (T_c + T_a)     (tfmc today: the sum starts after backward)
  overlap:      efficiency = T_c / (T_c + max(T_a - T_bwd, T_a x bucket / G))
                where T_bwd = 2/3 T_c is the backward pass the buckets can hide behind and the
                last bucket (25 MB) can never be hidden.

  stragglers:   a step waits for the slowest rank. Token-budget batches differ in cost (padding,
                sentence lengths, attention's quadratic part) and shared machines add noise, so
                the step takes E[max of N ranks' compute] = T_c (1 + s_N). s_N is bootstrapped
                from per-batch times (--batch-log: a `tfmc train --log-every 1` log, one batch
                per step, one thread, batches of --log-batch-tokens, default 2048), each rank
                summing F x batch_tokens / log-batch-tokens of them (F = --update-freq).
                efficiency = T_c / (T_c (1 + s_N) + exposed allreduce)

Weak scaling: every machine keeps the spec's batch_tokens per step (the global batch grows with N).
"""
import math
import os
import re
import sys

SPECS = {"small": "models/small.yaml", "base": "models/transformer-base.yaml", "big": "models/transformer-big.yaml"}


def spec_numbers(path):
    text = open(path).read()
    get = lambda key: int(re.search(r"^\s*%s:\s*(\d+)" % key, text, re.M).group(1))
    flag = lambda key: re.search(r"^\s*%s:\s*true" % key, text, re.M) is not None
    d, ff, enc, dec = get("d_model"), get("d_ff"), get("encoder_layers"), get("decoder_layers")
    vs, vt = get("src_vocab_size"), get("tgt_vocab_size")
    attention = 4 * d * d + 4 * d             # Q, K, V, O with biases
    ffn = 2 * d * ff + ff + d
    norm = 2 * d
    params = enc * (attention + ffn + 2 * norm) + dec * (2 * attention + ffn + 3 * norm)
    params += vs * d                            # source embedding
    if not flag("tie_src_tgt_embeddings"):
        params += vt * d
    if not flag("tie_output_projection"):
        params += vt * d
    return params, get("batch_tokens")


def straggle(times, n, f, rounds=4000):
    """E[max over n ranks of a sum of f batch times] / E[sum of f batch times] - 1, bootstrapped."""
    import random
    rng = random.Random(1)
    mean = sum(times) / len(times) * f
    total = 0.0
    for _ in range(rounds):
        total += max(sum(rng.choice(times) for _ in range(f)) for _ in range(n))
    return total / rounds / mean - 1


def main():
    args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a and not a.startswith("--"))
    latency = 30e-6
    if "--latency-us" in sys.argv:
        latency = float(sys.argv[sys.argv.index("--latency-us") + 1]) * 1e-6
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    nodes = [2, 4, 8, 16, 32, 64]
    bucket = 25e6
    f = int(sys.argv[sys.argv.index("--update-freq") + 1]) if "--update-freq" in sys.argv else 1
    log_tokens = int(sys.argv[sys.argv.index("--log-batch-tokens") + 1]) if "--log-batch-tokens" in sys.argv else 2048
    times = None
    if "--batch-log" in sys.argv:
        log = sys.argv[sys.argv.index("--batch-log") + 1]
        times = [float(re.search(r"([0-9.]+) ms$", l).group(1)) for l in open(log) if re.match(r"step\s+\d+\s+loss", l)]
        times = times[1:]  # the first step creates primitives and arenas
        print("stragglers: %d batch times of %d-token batches from %s (mean %.0f ms)"
              % (len(times), log_tokens, log, sum(times) / len(times)))
    print("latency %.0f us per message; efficiency = compute / (compute + exposed allreduce), weak scaling" % (latency * 1e6))
    for name, rel in SPECS.items():
        if name not in args:
            continue
        params, batch_tokens = spec_numbers(os.path.join(root, rel))
        rate = float(args[name])
        t_c = 2 * batch_tokens / rate
        grad = 4 * params
        strag = [0.0] * len(nodes)
        if times:
            per_rank = f * max(1, round(batch_tokens / log_tokens))
            strag = [straggle(times, n, per_rank, rounds=max(200, 4000 // per_rank)) for n in nodes]
        print("\n%s: %.1fM parameters, %.0f MB of gradients per step; %d-token batches at %.0f tokens/s "
              "= %.2f s compute per step per machine" % (name, params / 1e6, grad / 1e6, batch_tokens, rate, t_c))
        if times:
            print("  stragglers (%d logged batches per rank and step): the slowest of N ranks takes" % per_rank +
                  "".join(" N=%d +%.1f%%" % (n, g * 100) for n, g in zip(nodes, strag)))
        print("  %-9s %-8s" % ("link", "") + "".join("%9s" % ("N=%d" % n) for n in nodes))
        for gbps in (10, 25, 100):
            bw = gbps * 1e9 / 8
            t_a = [2 * (n - 1) / n * grad / bw + 2 * (n - 1) * latency for n in nodes]
            plain = [t_c / (t_c * (1 + g) + a) for a, g in zip(t_a, strag)]
            hidden = [t_c / (t_c * (1 + g) + max(a - 2 * t_c / 3, a * min(1.0, bucket / grad)))
                      for a, g in zip(t_a, strag)]
            print("  %-9s %-8s" % ("%d Gb/s" % gbps, "T_a ms") + "".join("%9.0f" % (a * 1e3) for a in t_a))
            print("  %-9s %-8s" % ("", "no ovl") + "".join("%8.1f%%" % (e * 100) for e in plain))
            print("  %-9s %-8s" % ("", "overlap") + "".join("%8.1f%%" % (e * 100) for e in hidden))


if __name__ == "__main__":
    main()
