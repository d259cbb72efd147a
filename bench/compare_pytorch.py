#!/usr/bin/env python3
"""Side-by-side forward-pass comparison: tfmc's fused and unfused builds (bin/forward_bench) and the
project's PyTorch reference (bench/pytorch_forward.py) on the same spec, shapes and weights,
alternating rounds in one run so machine noise hits all three. Prints tokens/s of each, the ratios
fused/unfused and tfmc/PyTorch, and the load average.

  python3 bench/compare_pytorch.py --build build [--spec transformer-base] [--rounds 3]
  python3 bench/compare_pytorch.py --mode train [--spec small] [--steps 6] [--pytorch idiomatic|reference] \
      [--precision f32|bf16|both]
  python3 bench/compare_pytorch.py --mode decode --spec small --checkpoint small.ckpt --tokenizer m30k.spm \
      [--data ../shared/data/multi30k] [--split test_2016_flickr] [--beams 1,4] [--precision f32|int8]

--mode train compares training steps instead: tfmc's compiled train_step (`tfmc train`, dropout +
forward + backward + Adam in one graph, fused build) against PyTorch's train-mode forward,
backward and torch.optim.Adam step, same shapes and initial weights, median step time of each
round. --pytorch idiomatic (the default) times bench/pytorch_train.py --adam, the same model as a
careful PyTorch user writes it (merged Q/K/V projections, nn.Dropout, F.cross_entropy with label
smoothing; `pytorch_train.py --check-against-reference` checks its loss, gradients and Adam step
against the reference); --pytorch reference times bench/pytorch_forward.py --adam, the op-by-op
golden reference tests/reference/transformer_ref.py (written for clarity, slower). --precision
bf16 compiles tfmc's step with `--precision=bf16` (bf16 GEMM operands, f32 masters, Adam and
loss); both times the f32 and the bf16 build in the same rounds and prints their ratio too.

--mode decode translates a test split with a trained checkpoint: `tfmc translate` (encode +
decode_step with the K/V cache) against bench/pytorch_decode.py (the reference modules run token by
token with an incremental K/V cache, same search rules), same weights, same source ids, batches of
32 sentences in length order; prints both times, the ratio, and how many outputs are identical.
--precision int8 compiles tfmc with `--precision=int8` and runs pytorch_decode.py --int8 (PyTorch's
dynamic int8 quantization of the linear layers and the vocabulary projection): int8 against int8.
"""
import argparse
import json
import re
import shutil
import tempfile
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas_env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHAPES = {"tiny": (4, 9, 8), "small": (32, 32, 32), "transformer-base": (32, 64, 64)}
# Training steps at the shape TOOLCHAIN.md's PyTorch figures use (32 x (32 + 32)).
TRAIN_SHAPES = {"tiny": (4, 9, 8), "small": (32, 32, 32), "transformer-base": (32, 32, 32)}


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def posix_escape(text):
    # Google Benchmark compiles filters as POSIX regexes: re.escape's "\-" is invalid there.
    return re.sub(r"([.+*?()\[\]^$|])", r"\\\1", text)


def run_tfmc(build, spec, shape, min_time, fusion):
    b, s, t = shape
    name = f"Forward/{spec}/{b}x{s}+{t}/fusion={fusion}/dnnl"
    out = subprocess.run(
        [os.path.join(build, "bin", "forward_bench"), f"--benchmark_filter=^{posix_escape(name)}(/real_time)?$",
         "--benchmark_format=json", f"--benchmark_min_time={min_time}"],
        check=True, capture_output=True, text=True).stdout
    runs = json.loads(out)["benchmarks"]
    if not runs:
        sys.exit(f"forward_bench has no benchmark {name}")
    if runs[0].get("error_occurred"):
        sys.exit(f"forward_bench failed: {runs[0].get('error_message')}")
    return runs[0]["tokens/s"]


def export_weights(build, spec, workdir):
    """The weights forward_bench uses (seed 1), saved through tfmc so PyTorch runs the same ones."""
    tfmc = os.path.join(build, "bin", "tfmc")
    artifact = os.path.join(workdir, spec + ".tfmx")
    weights = os.path.join(workdir, spec + ".safetensors")
    subprocess.run([tfmc, "compile", os.path.join(ROOT, "models", spec + ".yaml"), "-o", artifact,
                    "--quiet"], check=True)
    subprocess.run([tfmc, "run", artifact, "--seed", "1", "--batch", "1", "--src-len", "2",
                    "--tgt-len", "2", "--save-weights", weights], check=True,
                   stdout=subprocess.DEVNULL)
    return weights


def run_pytorch(spec, shape, iters, threads, weights):
    b, s, t = shape
    out = subprocess.run(
        ["/usr/bin/python3", os.path.join(HERE, "pytorch_forward.py"), "--spec",
         os.path.join(ROOT, "models", spec + ".yaml"), "--batch", str(b), "--src-len", str(s),
         "--tgt-len", str(t), "--iters", str(iters), "--warmup", "1", "--threads", str(threads),
         "--loss", "--weights", weights], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["tokens_per_s"]


def run_tfmc_train(build, spec, shape, steps, artifact):
    b, s, t = shape
    out = subprocess.run(
        [os.path.join(build, "bin", "tfmc"), "train", artifact, "--seed", "1", "--steps", str(steps),
         "--batch", str(b), "--src-len", str(s), "--tgt-len", str(t), "--threads", "2"],
        check=True, capture_output=True, text=True).stdout
    m = re.search(r"([0-9.]+) ms median per step", out)
    if not m:
        sys.exit(f"tfmc train printed no step time:\n{out}")
    return b * (s + t) / (float(m.group(1)) / 1e3)


# --mode train's PyTorch side: the script timed for each --pytorch choice (same CLI and JSON line).
TRAIN_SCRIPTS = {"idiomatic": "pytorch_train.py", "reference": "pytorch_forward.py"}


def run_pytorch_train(script, spec, shape, iters, threads, weights):
    b, s, t = shape
    out = subprocess.run(
        ["/usr/bin/python3", os.path.join(HERE, script), "--spec",
         os.path.join(ROOT, "models", spec + ".yaml"), "--batch", str(b), "--src-len", str(s),
         "--tgt-len", str(t), "--iters", str(iters), "--warmup", "1", "--threads", str(threads),
         "--adam", "--weights", weights], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["tokens_per_s"]


def main_train(args):
    shape = TRAIN_SHAPES[args.spec]
    workdir = tempfile.mkdtemp(prefix="tfmc-compare-")
    weights = export_weights(args.build, args.spec, workdir)
    precisions = ["f32", "bf16"] if args.precision == "both" else [args.precision]
    artifacts = {}
    for precision in precisions:
        artifacts[precision] = os.path.join(workdir, f"{args.spec}-train-{precision}.tfmx")
        subprocess.run([os.path.join(args.build, "bin", "tfmc"), "compile", os.path.join(ROOT, "models", args.spec + ".yaml"),
                        "--entries=forward,train_step", f"--precision={precision}", "-o", artifacts[precision],
                        "--quiet"], check=True)
    print(f"spec {args.spec}, training step on batch {shape[0]} x (src {shape[1]} + tgt {shape[2]}) tokens, "
          f"tfmc {' and '.join(precisions)}, PyTorch f32, {args.threads} threads (dropout, forward, backward, Adam); "
          f"load average before: {loadavg()}")
    script = TRAIN_SCRIPTS[args.pytorch]
    print(f"pytorch: {args.pytorch} model (bench/{script} --adam)")
    ours = {precision: [] for precision in precisions}
    torch = []
    for r in range(args.rounds):
        for precision in precisions:
            ours[precision].append(run_tfmc_train(args.build, args.spec, shape, args.steps, artifacts[precision]))
        torch.append(run_pytorch_train(script, args.spec, shape, args.iters, args.threads, weights))
        cells = "  ".join(f"tfmc {p} {ours[p][-1]:7.0f}" for p in precisions)
        ratios = "  ".join(f"{p}/pytorch {ours[p][-1] / torch[-1]:.2f}" for p in precisions)
        print(f"  round {r + 1}: {cells}  pytorch {torch[-1]:7.0f} tokens/s   {ratios}   load {loadavg()}")
    p = statistics.median(torch)
    for precision in precisions:
        o = statistics.median(ours[precision])
        print(f"median tokens/s: tfmc {precision} {o:.0f}, pytorch {p:.0f}; tfmc {precision}/pytorch = {o / p:.2f}x")
    if len(precisions) == 2:
        print(f"tfmc bf16/f32 = {statistics.median(ours['bf16']) / statistics.median(ours['f32']):.2f}x")
    print(f"load average after: {loadavg()}")
    shutil.rmtree(workdir, ignore_errors=True)


def pytorch_engine():
    return subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.backends.quantized.engine)"],
                          check=True, capture_output=True, text=True).stdout.strip()


def main_decode(args):
    if not (args.checkpoint and args.tokenizer):
        sys.exit("--mode decode needs --checkpoint and --tokenizer")
    tfmc = os.path.join(args.build, "bin", "tfmc")
    spec = os.path.join(ROOT, "models", args.spec + ".yaml")
    workdir = tempfile.mkdtemp(prefix="tfmc-decode-")
    artifact = os.path.join(workdir, "x.tfmx")
    if args.precision not in ("f32", "int8"):
        sys.exit("--mode decode compares f32 or int8 (--precision f32|int8)")
    int8 = args.precision == "int8"
    subprocess.run([tfmc, "compile", spec, "--entries=forward,translate", "-o", artifact, "--quiet",
                    f"--precision={args.precision}"], check=True)
    src_path = os.path.join(args.data, f"{args.split}.{args.src}.gz")
    text = subprocess.run(["zcat", src_path], check=True, capture_output=True).stdout
    plain = os.path.join(workdir, "src.txt")
    with open(plain, "wb") as f:
        f.write(text)
    ids = os.path.join(workdir, "src.ids")
    with open(ids, "wb") as f:
        f.write(subprocess.run(["spm_encode", "--model", args.tokenizer, "--output_format=id"], input=text,
                               check=True, capture_output=True).stdout)
    env = blas_env.fair_blas_env()
    sentences = text.count(b"\n")
    print(f"spec {args.spec}, {args.split} ({sentences} sentences), batches of 32, "
          f"{'int8 (tfmc --precision=int8; PyTorch quantize_dynamic qint8, engine ' + pytorch_engine() + ')' if int8 else 'f32'}, "
          f"{args.threads} threads, same checkpoint; load average before: {loadavg()}")
    for beam in [int(b) for b in args.beams.split(",")]:
        tt, pt = [], []
        for r in range(args.rounds):
            out_t, out_p = os.path.join(workdir, "t.ids"), os.path.join(workdir, "p.ids")
            log = subprocess.run([tfmc, "translate", artifact, "--checkpoint", args.checkpoint, "--tokenizer",
                                  args.tokenizer, "--input", plain, "--beam", str(beam), "--batch", "32", "--output-format", "ids",
                                  "--threads", str(args.threads), "--output", out_t],
                                 check=True, capture_output=True, text=True).stderr
            tt.append(float(re.search(r", ([0-9.]+) s \(", log).group(1)))
            log = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "pytorch_decode.py"), "--spec", spec,
                                  "--checkpoint", args.checkpoint, "--ids", ids, "--beam", str(beam), "--threads",
                                  str(args.threads), "--output", out_p] + (["--int8"] if int8 else []), env=env,
                                 check=True, capture_output=True, text=True).stdout
            pt.append(float(re.search(r", ([0-9.]+) s", log).group(1)))
            a, b = open(out_t).read().splitlines(), open(out_p).read().splitlines()
            same = sum(x == y for x, y in zip(a, b))
            print(f"  beam {beam} round {r + 1}: tfmc {tt[-1]:.2f} s, pytorch {pt[-1]:.2f} s, "
                  f"tfmc/pytorch speed {pt[-1] / tt[-1]:.2f}x, identical outputs {same} of {len(a)}; load {loadavg()}")
        t, p = statistics.median(tt), statistics.median(pt)
        print(f"beam {beam}: median tfmc {t:.2f} s, pytorch {p:.2f} s: tfmc {p / t:.2f}x faster")
    shutil.rmtree(workdir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--spec", default="transformer-base", choices=sorted(SHAPES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5, help="PyTorch iterations per round")
    ap.add_argument("--min-time", default="2", help="Google Benchmark min time per round (s)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mode", choices=["forward", "train", "decode"], default="forward")
    ap.add_argument("--steps", type=int, default=6, help="tfmc training steps per round (--mode train)")
    ap.add_argument("--precision", choices=["f32", "bf16", "both", "int8"], default="f32",
                    help="--mode train: tfmc's compile --precision (f32, bf16, both side by side); --mode decode: "
                         "f32, or int8 (tfmc --precision=int8 against PyTorch's dynamic int8 quantization)")
    ap.add_argument("--pytorch", choices=sorted(TRAIN_SCRIPTS), default="idiomatic",
                    help="--mode train: time bench/pytorch_train.py (idiomatic) or pytorch_forward.py (reference)")
    ap.add_argument("--checkpoint", help="--mode decode: a trained checkpoint of --spec")
    ap.add_argument("--tokenizer", help="--mode decode: its SentencePiece model")
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "multi30k"))
    ap.add_argument("--split", default="test_2016_flickr")
    ap.add_argument("--src", default="de")
    ap.add_argument("--beams", default="1,4")
    args = ap.parse_args()
    if args.mode == "train":
        return main_train(args)
    if args.mode == "decode":
        if "--rounds" not in sys.argv:
            args.rounds = 1
        return main_decode(args)

    shape = SHAPES[args.spec]
    workdir = tempfile.mkdtemp(prefix="tfmc-compare-")
    weights = export_weights(args.build, args.spec, workdir)
    print(f"spec {args.spec}, batch {shape[0]} x (src {shape[1]} + tgt {shape[2]}) tokens, "
          f"forward + loss, f32, {args.threads} threads, same weights (seed 1 via tfmc); "
          f"load average before: {loadavg()}")
    fused, unfused, torch = [], [], []
    for r in range(args.rounds):
        fused.append(run_tfmc(args.build, args.spec, shape, args.min_time, "all"))
        unfused.append(run_tfmc(args.build, args.spec, shape, args.min_time, "none"))
        torch.append(run_pytorch(args.spec, shape, args.iters, args.threads, weights))
        print(f"  round {r + 1}: tfmc fused {fused[-1]:8.0f}  unfused {unfused[-1]:8.0f}  "
              f"pytorch {torch[-1]:8.0f} tokens/s   fused/unfused {fused[-1] / unfused[-1]:.2f}  "
              f"fused/pytorch {fused[-1] / torch[-1]:.2f}   load {loadavg()}")
    f, u, p = statistics.median(fused), statistics.median(unfused), statistics.median(torch)
    print(f"median tokens/s: tfmc fused {f:.0f}, tfmc unfused {u:.0f}, pytorch {p:.0f}")
    print(f"ratios of medians: fused/unfused {f / u:.2f}x, fused/pytorch {f / p:.2f}x, "
          f"unfused/pytorch {u / p:.2f}x (load average after: {loadavg()})")
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
