"""Re-checks tests/golden/ against the reference in float32 (catches drift in the reference, in
safetensors_io, or in the stored files). Also checks that each <name>.grads.safetensors exists and
has exactly the weights file's tensor names and shapes, float32 and finite (values are not
recomputed here; gen_golden.py checks them against finite differences). Exit status 0 on success.

/usr/bin/python3 tests/reference/check_golden.py [--tol 1e-5]
"""
import argparse
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402
import transformer_ref as ref  # noqa: E402
from gen_golden import SPECS  # noqa: E402


def check_grads(name, golden):
    """Structural check of the gradient file against the weights file."""
    path = os.path.join(golden, f"{name}.grads.safetensors")
    if not os.path.exists(path):
        print(f"{name}: missing {os.path.relpath(path, ROOT)}")
        return False
    grads, meta = safetensors_io.load(path, with_metadata=True)
    weights = safetensors_io.load(os.path.join(golden, f"{name}.weights.safetensors"))
    problems = []
    if meta.get("spec") != name:
        problems.append(f"metadata spec is {meta.get('spec')!r}")
    if not meta.get("loss_reduction"):
        problems.append("metadata loss_reduction missing")
    if sorted(grads) != sorted(weights):
        problems.append(f"names differ: missing {sorted(set(weights) - set(grads))}, "
                        f"extra {sorted(set(grads) - set(weights))}")
    for key in sorted(set(grads) & set(weights)):
        g = grads[key]
        if g.shape != weights[key].shape:
            problems.append(f"{key}: shape {list(g.shape)} != weights {list(weights[key].shape)}")
        if g.dtype != np.float32:
            problems.append(f"{key}: dtype {g.dtype} (must be F32)")
        if not np.all(np.isfinite(g)):
            problems.append(f"{key}: non-finite values")
    gmax = max((float(np.abs(g).max()) for g in grads.values() if g.size), default=0.0)
    print(f"{name}: grads {len(grads)} tensors, max|grad| = {gmax:.6e}"
          + ("" if not problems else "  PROBLEMS: " + "; ".join(problems)))
    return not problems


def check(spec_rel, tol):
    spec = ref.load_spec(os.path.join(ROOT, spec_rel))
    name = spec["name"]
    golden = os.path.join(ROOT, "tests", "golden")
    io, meta = safetensors_io.load(os.path.join(golden, f"{name}.io.safetensors"),
                                   with_metadata=True)
    model = ref.Transformer(spec)
    ref.load_weights(model, os.path.join(golden, f"{name}.weights.safetensors"))
    model.eval()
    assert meta.get("spec") == name, f"{name}: io metadata spec is {meta.get('spec')!r}"
    for key in ("src", "tgt_in", "tgt_out"):
        assert io[key].dtype == np.int32, f"{name}: {key} must be I32"
    assert io["logits"].dtype == np.float32 and io["loss"].shape == (), f"{name}: bad logits/loss"

    src, tgt_in, tgt_out = (torch.from_numpy(io[k]).long() for k in ("src", "tgt_in", "tgt_out"))
    with torch.no_grad():
        logits, loss = model(src, tgt_in, tgt_out)
    diff = np.abs(logits.numpy() - io["logits"]).max()
    ldiff = abs(loss.item() - float(io["loss"]))
    print(f"{name}: max|dlogit| = {diff:.3e}  |dloss| = {ldiff:.3e}  (tol {tol:g})")
    grads_ok = check_grads(name, golden)
    return diff <= tol and ldiff <= tol and grads_ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    ok = all([check(s, args.tol) for s in SPECS])
    print("OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
