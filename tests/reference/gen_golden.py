"""Generates tests/golden/<name>.{weights,io,grads}.safetensors: parity data for tfmc backends.

For each tiny spec: Xavier init, then small random biases / LayerNorm parameters (so bias and LN
paths are actually exercised), and one padded batch with different true lengths per row. Logits
and loss are computed in float64 from the float32 weights and stored as float32, so the golden
values carry no float32 accumulation error of the reference itself.

io file tensors: src I32 [B,S], tgt_in I32 [B,T], tgt_out I32 [B,T], logits F32 [B,T,V]
(every position, padded ones included: they are well defined since no row is fully masked),
loss F32 shape [] (scalar). Metadata: spec, spec_path, torch_version, seed.

grads file tensors: d(loss)/d(param) for every parameter, F32, keyed and shaped exactly like the
weights file (state_dict names; a tied table appears once and holds the gradient accumulated over
all its uses: source/target embedding and output projection). Computed by autograd in float64 on
the same model (eval mode: dropout off), weights and batch as the io file, then rounded to
float32. The loss is the io file's: label-smoothed cross-entropy averaged over the non-pad
target tokens (see LOSS_REDUCTION). Metadata: the io file's keys plus loss_reduction. Before a
grads file is written, three of its entries (an embedding, a LayerNorm scale and an attention
projection element) are checked against central finite differences of the float64 loss; the
generator exits non-zero if they disagree.

Run from anywhere: /usr/bin/python3 tests/reference/gen_golden.py
"""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402
import transformer_ref as ref  # noqa: E402

SPECS = ["models/tiny.yaml", "models/tiny-prenorm.yaml"]
SEED = 1234
SRC_LENS = [9, 5, 2]  # B=3, S=9
TGT_LENS = [8, 3, 6]  # T=8 (true lengths including BOS on input / EOS on output)
PERTURB = 0.1
FD_STEP = 1e-6  # central finite-difference step for the gradient self-check (float64 loss)
FD_RTOL = 1e-6  # required relative agreement autograd vs finite difference
# Mirrors ref.label_smoothed_xent; formatted per spec into the grads file metadata.
LOSS_REDUCTION = (
    "mean over non-pad target tokens (tgt_out != pad_id={pad}; {count} tokens in this batch) of "
    "label-smoothed cross-entropy (1-e)*(-log p[y]) + (e/V)*sum_v(-log p[v]) with "
    "e=training.label_smoothing={eps}, V=tgt_vocab_size={vocab}, p=softmax(logits); "
    "i.e. sum over kept tokens divided by their count (0 if none)")


def perturb(model, gen):
    """Makes every 1-D parameter non-trivial: biases ~ 0.1*N(0,1), LN scales ~ 1 + 0.1*N(0,1)."""
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(PERTURB * torch.randn(p.shape, generator=gen, dtype=p.dtype))


def make_batch(m, gen):
    pad, bos, eos = m["pad_id"], m["bos_id"], m["eos_id"]
    b, s, t = len(SRC_LENS), max(SRC_LENS), max(TGT_LENS)
    src = torch.full((b, s), pad, dtype=torch.int64)
    tgt_in = torch.full((b, t), pad, dtype=torch.int64)
    tgt_out = torch.full((b, t), pad, dtype=torch.int64)
    for i, (ls, lt) in enumerate(zip(SRC_LENS, TGT_LENS)):
        src[i, :ls] = torch.randint(3, m["src_vocab_size"], (ls,), generator=gen)
        words = torch.randint(3, m["tgt_vocab_size"], (lt - 1,), generator=gen)
        tgt_in[i, 0] = bos
        tgt_in[i, 1:lt] = words
        tgt_out[i, : lt - 1] = words
        tgt_out[i, lt - 1] = eos
    return src, tgt_in, tgt_out


def fd_picks(names):
    """Three parameter tensors for the finite-difference check: an embedding table, a LayerNorm
    scale and an attention projection (the first state_dict name of each kind)."""
    kinds = [
        lambda n: n == "shared_embedding.weight" or n.endswith("embed_tokens.weight"),
        lambda n: n.endswith("_norm.weight"),
        lambda n: ".cross_attn.q_proj.weight" in n,
    ]
    picks = []
    for pred in kinds:
        found = [n for n in names if pred(n)]
        if not found:
            raise RuntimeError("fd_picks: no parameter of the expected kind")
        picks.append(found[0])
    return picks


def check_grads_fd(name, model64, grads64, batch):
    """Compares autograd against a central finite difference of the float64 loss for one element
    (largest |grad|, first on ties: deterministic and well above the FD noise floor) of each
    fd_picks tensor. Parameters are restored bit-exactly afterwards. Returns True if all agree."""
    params = dict(model64.named_parameters())

    def loss_at():
        with torch.no_grad():
            return model64(*batch)[1].item()

    ok = True
    for pname in fd_picks(list(grads64)):
        g = grads64[pname]
        idx = int(torch.argmax(g.abs().reshape(-1)))
        flat = params[pname].data.view(-1)
        orig = flat[idx].item()
        xp, xm = orig + FD_STEP, orig - FD_STEP
        flat[idx] = xp
        lp = loss_at()
        flat[idx] = xm
        lm = loss_at()
        flat[idx] = orig
        fd = (lp - lm) / (xp - xm)  # actual (rounded) step
        ag = g.reshape(-1)[idx].item()
        rel = abs(fd - ag) / max(abs(ag), 1e-300)
        good = rel <= FD_RTOL
        ok &= good
        pos = list(np.unravel_index(idx, tuple(g.shape)))
        print(f"  {name}: fd check {pname}{[int(i) for i in pos]}: autograd {ag:+.12e}  "
              f"fd {fd:+.12e}  |diff| {abs(fd - ag):.3e}  rel {rel:.3e}  "
              f"{'ok' if good else 'FAIL (rtol %g)' % FD_RTOL}")
    return ok


def compute_grads(name, model64, batch, loss_ref):
    """float64 autograd gradients of the loss, keyed like state_dict (tied tables once)."""
    model64.zero_grad(set_to_none=True)
    _, loss = model64(*batch)
    loss.backward()
    if loss.item() != loss_ref:
        print(f"  {name}: note: grad-pass loss {loss.item()!r} != no_grad loss {loss_ref!r}")
    grads = {}
    for pname, p in model64.named_parameters():
        # An unused parameter has no .grad; its gradient is exactly zero.
        grads[pname] = p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
    model64.zero_grad(set_to_none=True)
    return grads


def generate(spec_rel, out_dir):
    spec = ref.load_spec(os.path.join(ROOT, spec_rel))
    name = spec["name"]
    gen = torch.Generator().manual_seed(SEED)
    model = ref.Transformer(spec)
    ref.xavier_init(model, SEED)
    perturb(model, gen)
    model.eval()  # dropout off
    weights = ref.state_dict_numpy(model)  # float32: exactly what the float64 run below sees

    src, tgt_in, tgt_out = make_batch(spec["model"], gen)
    model64 = model.double()
    with torch.no_grad():
        logits, loss = model64(src, tgt_in, tgt_out)
    logits32 = logits.to(torch.float32).numpy()
    loss32 = np.asarray(loss.item(), dtype=np.float32).reshape(())

    meta = {"spec": name, "spec_path": spec_rel, "torch_version": torch.__version__,
            "seed": str(SEED), "generator": "tests/reference/gen_golden.py"}
    safetensors_io.save(os.path.join(out_dir, f"{name}.weights.safetensors"), weights,
                        metadata={"spec": name, "format": "tfmc-weights"})
    safetensors_io.save(os.path.join(out_dir, f"{name}.io.safetensors"), {
        "src": src.numpy().astype(np.int32),
        "tgt_in": tgt_in.numpy().astype(np.int32),
        "tgt_out": tgt_out.numpy().astype(np.int32),
        "logits": logits32,
        "loss": loss32,
    }, metadata=meta)
    print(f"{name}: max|logit| = {np.abs(logits32).max():.6f}  loss = {float(loss32):.6f}  "
          f"logits {list(logits32.shape)}")

    # Gradients: a second, grad-enabled pass on the same float64 model, batch and eval mode, done
    # after the files above are written and drawing nothing from any RNG.
    batch = (src, tgt_in, tgt_out)
    grads64 = compute_grads(name, model64, batch, loss.item())
    if sorted(grads64) != sorted(weights):
        raise RuntimeError(f"{name}: parameter names differ from state_dict names")
    grads32 = {k: v.to(torch.float32).numpy() for k, v in grads64.items()}
    bad = [k for k, v in grads32.items() if not np.all(np.isfinite(v))]
    ok = not bad
    if bad:
        print(f"  {name}: non-finite gradients in {bad}")
    ok &= check_grads_fd(name, model64, grads64, batch)
    # The FD probes must leave the model exactly as it was (float64 copies of the f32 weights).
    for pname, p in model64.named_parameters():
        if not np.array_equal(p.detach().numpy(), weights[pname].astype(np.float64)):
            raise RuntimeError(f"{name}: {pname} not restored after the finite-difference check")
    m = spec["model"]
    grads_meta = dict(meta, loss_reduction=LOSS_REDUCTION.format(
        pad=m["pad_id"], count=int((tgt_out != m["pad_id"]).sum()),
        eps=spec["training"]["label_smoothing"], vocab=m["tgt_vocab_size"]))
    gmax_name = max(grads32, key=lambda k: float(np.abs(grads32[k]).max()))
    print(f"{name}: max|grad| = {np.abs(grads32[gmax_name]).max():.6e} ({gmax_name})  "
          f"{len(grads32)} tensors, {sum(v.size for v in grads32.values())} values")
    if not ok:
        print(f"{name}: gradient check FAILED, {name}.grads.safetensors not written")
        return False
    safetensors_io.save(os.path.join(out_dir, f"{name}.grads.safetensors"), grads32,
                        metadata=grads_meta)
    return True


def main():
    out_dir = os.path.join(ROOT, "tests", "golden")
    os.makedirs(out_dir, exist_ok=True)
    ok = True
    for spec_rel in SPECS:
        ok &= generate(spec_rel, out_dir)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
