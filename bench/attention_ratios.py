#!/usr/bin/env python3
"""Runs attention_bench (Google Benchmark, JSON output) and prints, per shape, fused vs unfused
time and peak memory (intermediates + kernel scratch) with their ratios, plus the load average before and after.

    python3 bench/attention_ratios.py [--bench build/bin/attention_bench] [--repetitions 3]
                                      [--filter REGEX] [extra benchmark flags...]

Fused and unfused of one shape run back to back (the bench registers them in pairs), so both see
the same machine load; with repetitions > 1 the medians are compared. Only the standard library.
"""
import argparse
import json
import os
import re
import subprocess
import sys


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_bench = os.path.join(here, "..", "build", "bin", "attention_bench")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=default_bench, help="attention_bench binary")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--filter", default="", help="--benchmark_filter regex")
    args, extra = ap.parse_known_args()

    cmd = [args.bench, "--benchmark_format=json", f"--benchmark_repetitions={args.repetitions}"]
    if args.repetitions > 1:
        cmd.append("--benchmark_report_aggregates_only=true")
    if args.filter:
        cmd.append(f"--benchmark_filter={args.filter}")
    cmd += extra
    before = loadavg()
    print(f"loadavg before: {before}", flush=True)
    print("running: " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    after = loadavg()
    if proc.returncode != 0:
        sys.exit(f"attention_bench failed with exit code {proc.returncode}")
    data = json.loads(proc.stdout)

    # name: Attention/{fused,unfused}/B{b}/S{s}/real_time[_median]
    rows = {}
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            continue
        if args.repetitions > 1 and b.get("aggregate_name") != "median":
            continue
        m = re.match(r"Attention/(fused_bf16|fused|unfused)/B(\d+)/S(\d+)", b["name"])
        if not m:
            continue
        kind, batch, seq = m.group(1), int(m.group(2)), int(m.group(3))
        unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
        rows.setdefault((batch, seq), {})[kind] = {
            "ms": b["real_time"] * unit,
            "peak": b.get("peak_bytes", 0),
            "tok": b.get("tokens/s", 0),
            "threads": b.get("threads", 0),
        }

    ctx = data.get("context", {})
    print(f"\nhost: {ctx.get('num_cpus', '?')} cpus, load average reported by benchmark: "
          f"{ctx.get('load_avg', '?')}")
    hdr = (f"{'B':>3} {'S':>5} | {'fused ms':>10} {'unfused ms':>11} {'speedup':>8} | "
           f"{'fused peak':>11} {'unfused peak':>13} {'mem ratio':>10} | {'fused tok/s':>12} | "
           f"{'bf16 ms':>9} {'bf16/unfused':>12} {'bf16/fused':>10}")
    print(hdr)
    print("-" * len(hdr))
    for (batch, seq) in sorted(rows):
        r = rows[(batch, seq)]
        f, u = r.get("fused"), r.get("unfused")

        def mib(x):
            return f"{x['peak'] / 2**20:9.2f}MB" if x else f"{'-':>11}"

        fms = f"{f['ms']:10.3f}" if f else f"{'-':>10}"
        ums = f"{u['ms']:11.3f}" if u else f"{'(skipped)':>11}"
        speed = f"{u['ms'] / f['ms']:7.2f}x" if f and u else f"{'-':>8}"
        mem = f"{u['peak'] / f['peak']:9.1f}x" if f and u and f["peak"] else f"{'-':>10}"
        tok = f"{f['tok']:12.0f}" if f else f"{'-':>12}"
        h = r.get("fused_bf16")
        hms = f"{h['ms']:9.3f}" if h else f"{'-':>9}"
        hu = f"{u['ms'] / h['ms']:11.2f}x" if h and u else f"{'-':>12}"
        hf = f"{f['ms'] / h['ms']:9.2f}x" if h and f else f"{'-':>10}"
        print(f"{batch:>3} {seq:>5} | {fms} {ums} {speed} | {mib(f):>11} {mib(u):>13} {mem} | {tok} | {hms} {hu} {hf}")
    print("\npeak = what Model::run allocated: arena of intermediates + kernel scratch (Model::lastMemoryPlan)")
    print(f"loadavg before: {before}   after: {after}")


if __name__ == "__main__":
    main()
