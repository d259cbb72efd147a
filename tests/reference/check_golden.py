"""Re-checks tests/golden/ against the reference in float32 (catches drift in the reference, in
safetensors_io, or in the stored files). Also checks that each <name>.grads.safetensors exists and
has exactly the weights file's tensor names and shapes, float32 and finite (values are not
recomputed here; gen_golden.py checks them against finite differences), and that each
<name>.alignment.safetensors (gen_alignment_golden.py) recomputed in float32 within --tol, that each
<name>.adam.safetensors exists with step1/, step2/, grad1/ and grad2/ entries for exactly the
weights file's names and shapes, scalars loss1/loss2/eval_loss1/lr1/lr2, float32 and finite,
eval_loss1 equal to the io loss, lr1/lr2 equal to the spec's schedule, loss2 < loss1, the dropout
metadata equal to transformer_ref's definition and the spec's seed, and loss1 / loss2 reproduced
in float32 in training mode with transformer_ref.CounterDropout (STEP=1 from the weights file,
STEP=2 from the step1/ parameters; within --tol). Exit status 0 on success.

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
from gen_golden import ADAM_STEPS, SPECS, lr_at, training_hparams  # noqa: E402
import gen_alignment_golden  # noqa: E402


def check_alignment(spec, model, golden, tol):
    """<name>.alignment.safetensors: every pair's rows recomputed in float32 (gen_alignment_golden)."""
    name = spec["name"]
    stored = safetensors_io.load(os.path.join(golden, f"{name}.alignment.safetensors"))
    worst, i = 0.0, 0
    while f"src.{i}" in stored:
        src, tgt = stored[f"src.{i}"].tolist(), stored[f"tgt.{i}"].tolist()
        for key, layer in [(f"alignment.{i}", -1)] + [(f"alignment.layer{l}.{i}", l) for l in range(len(model.decoder.layers))]:
            w = gen_alignment_golden.alignment(model, spec, src, tgt, layer)
            if key not in stored or w.shape != stored[key].shape:
                print(f"{name}: {key} missing or not of the recomputed shape {w.shape}")
                return False
            worst = max(worst, float(np.abs(w - stored[key]).max()))
        i += 1
    print(f"{name}: {i} alignments, max|d| = {worst:.3e}  (tol {tol:g})")
    return i > 0 and worst <= tol


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


def check_adam(spec, golden, io, tol):
    """Structural check of the Adam file against the weights and io files, plus float32
    re-checks of lr1/lr2 (spec schedule) and of loss1 / loss2 (reference model in training mode
    with the counter-based dropout at STEP=1 / 2, at the weights / the step1/ parameters)."""
    name = spec["name"]
    path = os.path.join(golden, f"{name}.adam.safetensors")
    if not os.path.exists(path):
        print(f"{name}: missing {os.path.relpath(path, ROOT)}")
        return False
    adam, meta = safetensors_io.load(path, with_metadata=True)
    weights = safetensors_io.load(os.path.join(golden, f"{name}.weights.safetensors"))
    problems = []
    if meta.get("spec") != name:
        problems.append(f"metadata spec is {meta.get('spec')!r}")
    for key in ("formula", "adam_beta1", "adam_beta2", "adam_eps", "warmup_steps", "lr_scale",
                "dropout", "dropout_seed", "dropout_sites"):
        if not meta.get(key):
            problems.append(f"metadata {key} missing")
    seed = int(spec["training"].get("seed", 1))
    if meta.get("dropout") and meta["dropout"] != ref.COUNTER_DROPOUT_DEFINITION:
        problems.append("metadata dropout differs from transformer_ref.COUNTER_DROPOUT_DEFINITION")
    if meta.get("dropout_seed") and meta["dropout_seed"] != str(seed):
        problems.append(f"metadata dropout_seed {meta['dropout_seed']!r} != spec seed {seed}")
    prefixes = [f"{kind}{t}/" for kind in ("step", "grad") for t in range(1, ADAM_STEPS + 1)]
    scalars = ["loss1", "loss2", "eval_loss1", "lr1", "lr2"]
    expected = {pre + k: weights[k].shape for pre in prefixes for k in weights}
    expected.update({k: () for k in scalars})
    missing, extra = sorted(set(expected) - set(adam)), sorted(set(adam) - set(expected))
    if missing or extra:
        problems.append(f"names differ: missing {missing[:5]}{'...' if len(missing) > 5 else ''}"
                        f" ({len(missing)}), extra {extra[:5]}{'...' if len(extra) > 5 else ''}"
                        f" ({len(extra)})")
    for key in sorted(set(expected) & set(adam)):
        a = adam[key]
        if a.shape != expected[key]:
            problems.append(f"{key}: shape {list(a.shape)} != {list(expected[key])}")
        if a.dtype != np.float32:
            problems.append(f"{key}: dtype {a.dtype} (must be F32)")
        if not np.all(np.isfinite(a)):
            problems.append(f"{key}: non-finite values")
    if not problems:
        if adam["eval_loss1"] != io["loss"]:
            problems.append(f"eval_loss1 {float(adam['eval_loss1'])!r} != io loss "
                            f"{float(io['loss'])!r}")
        if not adam["loss2"] < adam["loss1"]:
            problems.append("loss2 is not below loss1")
        tr = training_hparams(spec)
        for t in (1, 2):
            want = np.float32(lr_at(t, spec["model"]["d_model"], tr))
            if adam[f"lr{t}"] != want:
                problems.append(f"lr{t} {float(adam[f'lr{t}'])!r} != schedule {float(want)!r}")
    loss_diff = {1: float("nan"), 2: float("nan")}
    if not problems:
        for t, state in ((1, weights), (2, {k: adam[f"step1/{k}"] for k in weights})):
            model = ref.Transformer(spec)
            model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
            model.set_dropout_fn(ref.CounterDropout(seed, step=t))
            model.train()
            batch = (torch.from_numpy(io[k]).long() for k in ("src", "tgt_in", "tgt_out"))
            with torch.no_grad():
                _, loss = model(*batch)
            loss_diff[t] = abs(loss.item() - float(adam[f"loss{t}"]))
            if not loss_diff[t] <= tol:
                problems.append(f"loss{t} recomputed with STEP={t} dropout differs by "
                                f"{loss_diff[t]:.3e}")
    step = max((float(np.abs(adam[f"step1/{k}"] - weights[k]).max()) for k in weights
                if f"step1/{k}" in adam), default=0.0)
    print(f"{name}: adam {len(adam)} tensors, loss1 = {float(adam.get('loss1', np.nan)):.6f}  "
          f"loss2 = {float(adam.get('loss2', np.nan)):.6f}  |dloss1| = {loss_diff[1]:.3e}  "
          f"|dloss2| = {loss_diff[2]:.3e}  "
          f"max|step1 - weights| = {step:.6e}"
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
    adam_ok = check_adam(spec, golden, io, tol)
    alignment_ok = check_alignment(spec, model, golden, tol)
    return diff <= tol and ldiff <= tol and grads_ok and adam_ok and alignment_ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    ok = all([check(s, args.tol) for s in SPECS])
    print("OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
