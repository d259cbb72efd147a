"""Generates tests/golden/<name>.{weights,io}.safetensors: parity data for tfmc backends.

For each tiny spec: Xavier init, then small random biases / LayerNorm parameters (so bias and LN
paths are actually exercised), and one padded batch with different true lengths per row. Logits
and loss are computed in float64 from the float32 weights and stored as float32, so the golden
values carry no float32 accumulation error of the reference itself.

io file tensors: src I32 [B,S], tgt_in I32 [B,T], tgt_out I32 [B,T], logits F32 [B,T,V]
(every position, padded ones included: they are well defined since no row is fully masked),
loss F32 shape [] (scalar). Metadata: spec, spec_path, torch_version, seed.

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


def main():
    out_dir = os.path.join(ROOT, "tests", "golden")
    os.makedirs(out_dir, exist_ok=True)
    for spec_rel in SPECS:
        generate(spec_rel, out_dir)


if __name__ == "__main__":
    main()
