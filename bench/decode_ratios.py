#!/usr/bin/env python3
"""Cached vs full-prefix decoding on a whole test set, side by side in one run: `tfmc translate`
with the K/V cache (decode_step) and with --no-cache (decode over the whole prefix every step),
greedy and beam, alternating rounds. Checks that both write identical translations and prints
time, sentences/s, BLEU, the speed-up (of the medians, and each round's own) and the load average.

  python3 bench/decode_ratios.py --model small-x.tfmx --checkpoint small.ckpt --tokenizer m30k.spm \
      [--data ../shared/data/multi30k] [--split test_2016_flickr] [--beams 1,4] [--rounds 2] [--batch N] \
      [--workers N] [--bf16-model small-x-bf16.tfmx] [--int8-model small-x-int8.tfmx]

--workers N passes `tfmc translate --workers N` to every translation (both decoders): N
translators on their own threads, --threads then per worker.

Also prints the GEMM FLOPs of both paths (from `translate --profile`'s work counts and the
spec's dims, --spec) and so the speed-up if both ran at the same FLOP rate. With gemm_bench
(--gemm-bench, default build/bin/gemm_bench when built; every round, between the translations)
it also prints a floor under the cached run's time: its GEMM work alone at the rates gemm_bench
measures for the same products on their own (the 19 GEMMs of a decode step at 128 rows, or
256 / 512 when --batch x beam is nearer those, and the 15 of `encode` at 1024 positions, nothing
else running) -- no attention, softmax,
search or cache update -- and the speed-up that floor would allow against the full-prefix run;
and the same at the box's FMA peak (fma_peak). The bound assumes the small spec's dims.

With --bf16-model (the same spec compiled with --precision=bf16) and --int8-model (with
--precision=int8), every round also translates with them (cached, right after the f32 cached
run) and their speed-up over f32 (of the medians, and each round's own), both BLEU scores and how
many translations differ are printed.
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


# Issue 7's targets: cached vs full prefix on test_2016 with a trained small checkpoint.
TARGETS = {1: 4.5, 4: 7.0}


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
    cmd += ["--workers", str(args.workers)]  # explicit: tfmc translate's default is one per core
    if args.batch:
        cmd += ["--batch", str(args.batch)]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    secs = float(re.search(r", ([0-9.]+) s \(", text).group(1))
    calls = int(re.search(r"([0-9]+) decoder calls", text).group(1))
    bleu = float(re.search(r"BLEU = ([0-9.]+)", text).group(1))
    return secs, calls, bleu


def work(args, beam, cache, out):
    """The decoder's work counts of one (untimed) --profile run."""
    cmd = [args.tfmc, "translate", args.model, "--checkpoint", args.checkpoint, "--tokenizer", args.tokenizer,
           "--data", args.data, "--split", args.split, "--beam", str(beam), "--output", out, "--profile"]
    if not cache:
        cmd.append("--no-cache")
    if args.batch:
        cmd += ["--batch", str(args.batch)]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"work: (\d+) source positions encoded, (\d+) decoder rows, (\d+) decoder positions, "
                  r"(\d+) memory positions", text)
    return [int(x) for x in m.groups()]


def spec_dims(path):
    dims = {}
    for key in ("d_model", "d_ff", "encoder_layers", "decoder_layers", "tgt_vocab_size"):
        m = re.search(r"^\s*" + key + r":\s*(\d+)", open(path, encoding="utf-8").read(), re.M)
        dims[key] = int(m.group(1))
    return dims


STEP_ROWS = (128, 256, 512)  # gemm_bench's decoder_step rows this script picks from


def step_rows(args, beam):
    """gemm_bench's decode-step rows nearest the hypotheses a translator keeps in flight
    (`tfmc translate`'s default: 128; with --batch N, N sentences x beam)."""
    rows = args.batch * beam if args.batch else 128
    return min(STEP_ROWS, key=lambda m: abs(m - rows))


def gemm_rates(path, rows):
    """GFLOP/s of gemm_bench's decode-step sequence (`rows` rows), encode sequence (1024
    positions) and FMA peak, measured now."""
    step = f"decoder_step/panel/M:{rows}"
    text = subprocess.run([path, f"--benchmark_filter=^({step}|encoder_block/panel/M:1024|fma_peak)",
                           "--benchmark_min_time=0.2"], check=True, capture_output=True, text=True).stdout
    rate = {}
    for key, name in (("step", step), ("encode", "encoder_block/panel/M:1024"), ("peak", "fma_peak")):
        m = re.search(re.escape(name) + r"\S*\s.*GFLOP/s=([0-9.]+)", text)
        if not m:
            sys.exit(f"gemm_bench printed no {name} rate:\n{text}")
        rate[key] = float(m.group(1))
    return rate


def encoder_macs(dims, counts):
    """The part of gemm_macs() that the cached decoder's `encode` does (memory and cross K/V)."""
    d, ff, E, L = (dims[k] for k in ("d_model", "d_ff", "encoder_layers", "decoder_layers"))
    return counts[0] * (E * (4 * d * d + 2 * d * ff) + L * 2 * d * d)


def gemm_macs(dims, counts):
    """GEMM multiply-adds of a run from its work counts: encoder layers and the cross-attention
    K/V projections per source position; per decoder position the decoder layers' projections
    (self Q/K/V and output, cross Q and output) and FFN; the vocabulary per row; the full-prefix
    decoder re-projects the memory's cross K/V per memory position instead (its `encode` computes
    the memory only). Attention's own products are left out (under 1 % here)."""
    d, ff, E, L, V = (dims[k] for k in ("d_model", "d_ff", "encoder_layers", "decoder_layers", "tgt_vocab_size"))
    encoded, rows, positions, memory = counts
    cross = L * 2 * d * d if memory == 0 else 0  # memory positions re-projected: the full-prefix decoder
    return (encoded * (E * (4 * d * d + 2 * d * ff) + cross) + positions * L * (6 * d * d + 2 * d * ff)
            + rows * d * V + memory * L * 2 * d * d)


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
    p.add_argument("--workers", type=int, default=1, help="tfmc translate --workers N, both paths (default 1)")
    p.add_argument("--batch", type=int, default=0, help="sentences in flight, both paths (default: tfmc's, 128 / beam)")
    p.add_argument("--bf16-model", default="")
    p.add_argument("--int8-model", default="")
    default_bench = os.path.join(ROOT, "build", "bin", "gemm_bench")
    p.add_argument("--gemm-bench", default=default_bench if os.path.exists(default_bench) else "",
                   help="gemm_bench, for the floor under the cached time ('' to skip)")
    p.add_argument("--spec", default=os.path.join(ROOT, "models", "small.yaml"),
                   help="the model's spec, for the FLOP bound")
    args = p.parse_args()
    print(f"load average at start: {loadavg()}" + (f"; {args.workers} workers" if args.workers > 1 else ""))
    rows = []
    others = {k: v for k, v in (("bf16", args.bf16_model), ("int8", args.int8_model)) if v}
    with tempfile.TemporaryDirectory() as tmp:
        for beam in [int(b) for b in args.beams.split(",")]:
            times = {True: [], False: [], **{k: [] for k in others}}
            info = {}
            rates = []
            for r in range(args.rounds):
                # bf16 and int8 right after the f32 cached run they are compared with, so each
                # round's pairs share the machine's state.
                for cache in (True,) + tuple(others) + (False,):
                    out = os.path.join(tmp, f"b{beam}-{cache}.txt")
                    if cache in others:
                        secs, calls, bleu = translate(args, beam, True, out, others[cache])
                    else:
                        secs, calls, bleu = translate(args, beam, cache, out)
                    times[cache].append(secs)
                    info[cache] = (calls, bleu, open(out, encoding="utf-8").read())
                if args.gemm_bench:
                    rates.append(gemm_rates(args.gemm_bench, step_rows(args, beam)))
            same = info[True][2] == info[False][2]
            n = info[True][2].count("\n")
            c, f = statistics.median(times[True]), statistics.median(times[False])
            rows.append((beam, c, f, n, info[True][1], info[False][1], info[True][0], same))
            # Each round's full-prefix time over its own cached time (measured back to back): the
            # spread the machine's noise puts on the ratio.
            paired = sorted(x / y for x, y in zip(times[False], times[True]))
            print(f"beam {beam}: cached {c:.2f} s ({n / c:.0f} sentences/s, {info[True][0]} decoder calls), "
                  f"full prefix {f:.2f} s ({n / f:.0f} sentences/s), speed-up {f / c:.2f}x "
                  f"(per round {paired[0]:.2f}-{paired[-1]:.2f}x, median {statistics.median(paired):.2f}x); "
                  f"BLEU {info[True][1]:.2f} / {info[False][1]:.2f}; translations "
                  f"{'identical' if same else 'DIFFERENT'} ({n} sentences); rounds {times[True]} vs {times[False]}")
            dims = spec_dims(args.spec)
            counts = {cache: work(args, beam, cache, os.path.join(tmp, "w.txt")) for cache in (True, False)}
            mc, mf = gemm_macs(dims, counts[True]), gemm_macs(dims, counts[False])
            print(f"beam {beam}: GEMM work cached {2 * mc / 1e9:.1f} GFLOP, full prefix {2 * mf / 1e9:.1f} GFLOP: "
                  f"FLOP ratio {mf / mc:.2f}x (the speed-up if both ran at the same FLOP rate; not a bound: the full-prefix "
                  f"run also has more work that is not a GEMM); rates cached {2 * mc / c / 1e9:.0f}, "
                  f"full prefix {2 * mf / f / 1e9:.0f} GFLOP/s")
            target = TARGETS.get(beam)
            if target:
                # speed-up = FLOP ratio x (cached FLOP rate / full-prefix FLOP rate): the rate the
                # cached run needs for the target, everything in it (attention over the cache, search,
                # encode) included, against the full-prefix run's measured rate.
                need = target / (mf / mc) * 2 * mf / f / 1e9
                print(f"beam {beam}: the target {target}x needs the cached run's whole time at >= {need:.0f} GFLOP/s of GEMM "
                      f"work ({target}x / FLOP ratio {mf / mc:.2f}x = {target / (mf / mc):.2f} x the full-prefix run's "
                      f"{2 * mf / f / 1e9:.0f} GFLOP/s); it runs at {2 * mc / c / 1e9:.0f}"
                      + (f"; its GEMMs alone run at {statistics.median(r['step'] for r in rates):.0f} (decode step) and "
                         f"{statistics.median(r['encode'] for r in rates):.0f} (encode), the FMA peak is "
                         f"{statistics.median(r['peak'] for r in rates):.0f}" if rates else ""))
            if rates:
                me = encoder_macs(dims, counts[True])
                # Per round: that round's full-prefix time over the floor from that round's rates.
                floors = [2 * (mc - me) / (r["step"] * 1e9) + 2 * me / (r["encode"] * 1e9) for r in rates]
                peaks = [2 * mc / (r["peak"] * 1e9) for r in rates]
                allowed = sorted(x / y for x, y in zip(times[False], floors))
                at_peak = sorted(x / y for x, y in zip(times[False], peaks))
                med = {k: statistics.median(r[k] for r in rates) for k in ("step", "encode", "peak")}
                print(f"beam {beam}: GEMMs alone (gemm_bench, per round: decode step at {step_rows(args, beam)} rows "
                      f"{med['step']:.0f}, encode "
                      f"{med['encode']:.0f}, FMA peak {med['peak']:.0f} GFLOP/s): the cached run's GEMM work takes >= "
                      f"{statistics.median(floors):.2f} s, so its speed-up is <= {allowed[0]:.2f}-{allowed[-1]:.2f}x "
                      f"with nothing but its GEMMs; at the FMA peak (>= {statistics.median(peaks):.2f} s) "
                      f"<= {at_peak[0]:.2f}-{at_peak[-1]:.2f}x; the rest of its {c:.2f} s (what is not a GEMM, and "
                      f"its GEMMs running below their rates alone): {c - statistics.median(floors):.2f} s")
            for name in others:
                b = statistics.median(times[name])
                changed = sum(x != y for x, y in zip(info[name][2].splitlines(), info[True][2].splitlines()))
                paired = sorted(x / y for x, y in zip(times[True], times[name]))
                print(f"beam {beam}: {name} cached {b:.2f} s vs f32 cached {c:.2f} s, speed-up {c / b:.2f}x "
                      f"(per round {paired[0]:.2f}-{paired[-1]:.2f}x, median {statistics.median(paired):.2f}x); "
                      f"BLEU {info[name][1]:.2f} vs {info[True][1]:.2f}; {changed} of {n} translations differ; "
                      f"rounds {times[name]}")
    print(f"load average at end: {loadavg()}")
    if not all(r[-1] for r in rows):
        sys.exit("cached and full-prefix translations differ")


if __name__ == "__main__":
    main()
