"""Benchmarks the PyTorch reference forward pass (eval, no_grad, float32): the baseline tfmc is
compared against. Prints one JSON line; tokens/s counts batch * (src_len + tgt_len) per forward.

/usr/bin/python3 bench/pytorch_forward.py --spec models/transformer-base.yaml \
    --batch 32 --src-len 64 --tgt-len 64 --iters 10 --warmup 2 [--threads 2] [--weights f.safetensors]

By default the forward stops at the logits (as inference does); --loss adds the label-smoothed
cross-entropy; --backward (implies --loss) also runs loss.backward() (eval mode, no dropout):
the work of tfmc's `gradients` entry; --adam (implies --backward) is a training step: train mode
(dropout on, as the spec says) and torch.optim.Adam's step, the work of tfmc's `train_step` entry.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas_env  # noqa: E402

# Debian's torch uses the generic libblas.so.3; the OpenMP OpenBLAS (with its SkylakeX kernels on
# an AVX-512 CPU: blas_env.py) is several times faster. Both must be in the environment before the
# library loads, so re-exec once rather than setting them after import.
_REEXEC_FLAG = "TFMC_BENCH_REEXEC"


def _ensure_blas_env():
    env = os.environ
    if env.get(_REEXEC_FLAG) or blas_env.BLAS_DIR in env.get("LD_LIBRARY_PATH", "").split(":"):
        return
    if not os.path.isdir(blas_env.BLAS_DIR):
        return
    new_env = blas_env.fair_blas_env(env)
    new_env[_REEXEC_FLAG] = "1"  # never loop, even if the variables get dropped
    os.execve(sys.executable, [sys.executable] + sys.argv, new_env)


def _parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--src-len", type=int, default=64)
    ap.add_argument("--tgt-len", type=int, default=64)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--weights", help="safetensors file with tfmc parameter names")
    ap.add_argument("--seed", type=int, default=1, help="init seed when --weights is not given")
    ap.add_argument("--loss", action="store_true", help="also compute the loss")
    ap.add_argument("--backward", action="store_true", help="also backpropagate the loss (implies --loss)")
    ap.add_argument("--adam", action="store_true", help="also take an Adam step (implies --backward)")
    return ap.parse_args()


def main():
    args = _parse_args()  # before the re-exec so --help / bad flags don't pay for it
    _ensure_blas_env()
    # OpenMP OpenBLAS reads this at load time; torch.set_num_threads covers torch's own pool.
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))

    import statistics
    import time

    import torch

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tests", "reference"))
    import transformer_ref as ref

    torch.set_num_threads(args.threads)
    spec = ref.load_spec(args.spec)
    m = spec["model"]
    model = ref.Transformer(spec)
    if args.weights:
        ref.load_weights(model, args.weights)
    else:
        ref.xavier_init(model, args.seed)
    model.train() if args.adam else model.eval()

    # Full-length rows (no padding): the shape the compiled engine is benchmarked on.
    gen = torch.Generator().manual_seed(args.seed)
    src = torch.randint(3, m["src_vocab_size"], (args.batch, args.src_len), generator=gen)
    tgt_in = torch.randint(3, m["tgt_vocab_size"], (args.batch, args.tgt_len), generator=gen)
    tgt_in[:, 0] = m["bos_id"]
    args.backward = args.backward or args.adam
    args.loss = args.loss or args.backward
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9) if args.adam else None
    tgt_out = torch.roll(tgt_in, -1, dims=1) if args.loss else None

    times = []
    for i in range(args.warmup + args.iters):
        t0 = time.perf_counter()
        if args.backward:
            model.zero_grad(set_to_none=True)
            logits, loss = model(src, tgt_in, tgt_out)
            loss.backward()
            if opt is not None:
                opt.step()
        else:
            with torch.no_grad():
                logits, loss = model(src, tgt_in, tgt_out)
        t1 = time.perf_counter()
        if i >= args.warmup:
            times.append(t1 - t0)
    median = statistics.median(times)
    tokens = args.batch * (args.src_len + args.tgt_len)
    print(json.dumps({
        "engine": "pytorch",
        "spec": spec["name"],
        "batch": args.batch,
        "src_len": args.src_len,
        "tgt_len": args.tgt_len,
        "tokens_per_s": round(tokens / median, 1),
        "median_ms": round(median * 1e3, 3),
        "min_ms": round(min(times) * 1e3, 3),
        "iters": args.iters,
        "threads": torch.get_num_threads(),
        "loss": args.loss,
        "backward": args.backward,
        "adam": args.adam,
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
