"""Golden word alignments for the translator's --alignment (tests/golden/<name>.alignment.safetensors).

For the golden weights of each tiny spec and a few (source, target) pairs, the reference model runs
teacher-forced in float64 (source + </s>, [BOS] + target as the decoder input) and records each
decoder layer's cross-attention weights (softmax(q k^T / sqrt(head_dim)) per head, recomputed from
the inputs the layer's `cross_attn` module receives), averaged over the heads: row j is output token
j's weights over the source pieces and </s> (rows: the target's tokens, then </s>).

Saved per pair i: src.i (ids, no </s>), tgt.i (ids, no BOS / </s>), alignment.i [T + 1, S + 1] f32
(the last layer's: tfmc's default) and alignment.layer<l>.i for every layer l (--alignment-layer).
tests/unit/compiler/search_test.cpp (Alignment.*) compares tfmc's Translator::score with
SearchOptions::alignment against them.

/usr/bin/python3 tests/reference/gen_alignment_golden.py
"""
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402
import transformer_ref as ref  # noqa: E402

# Sources and targets of different lengths (one target empty: </s> alone), ids in the tiny vocabulary.
PAIRS = [
    ([5, 9, 13, 7, 21], [7, 8, 9]),
    ([30], []),
    ([11, 12, 13, 14, 15, 16, 17, 18], [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]),
    ([40, 41], [33, 33, 33, 33]),
]


def alignment(model, spec, src, tgt, layer=-1):
    m = spec["model"]
    src_ids = torch.tensor([src + [m["eos_id"]]], dtype=torch.int64)
    tgt_in = torch.tensor([[m["bos_id"]] + tgt], dtype=torch.int64)
    attn = model.decoder.layers[layer].cross_attn
    seen = {}

    def hook(module, inputs, output):
        q_in, kv_in, key_keep = inputs[:3]
        b, nq, _ = q_in.shape
        q = module.q_proj(q_in).view(b, nq, module.heads, module.head_dim).transpose(1, 2)
        k = module.k_proj(kv_in).view(b, kv_in.shape[1], module.heads, module.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(module.head_dim)
        scores = scores.masked_fill(~key_keep[:, None, None, :], float("-inf"))
        seen["weights"] = torch.softmax(scores, dim=-1).mean(dim=1)[0]  # [T + 1, S + 1]

    handle = attn.register_forward_hook(hook)
    with torch.no_grad():
        model(src_ids, tgt_in)
    handle.remove()
    return seen["weights"].to(torch.float32).numpy()


def main():
    for spec_rel in ("models/tiny.yaml", "models/tiny-prenorm.yaml"):
        spec = ref.load_spec(os.path.join(ROOT, spec_rel))
        name = spec["name"]
        golden = os.path.join(ROOT, "tests", "golden")
        model = ref.Transformer(spec)
        ref.load_weights(model, os.path.join(golden, f"{name}.weights.safetensors"))
        model = model.double().eval()
        out = {}
        for i, (src, tgt) in enumerate(PAIRS):
            w = alignment(model, spec, src, tgt)
            assert w.shape == (len(tgt) + 1, len(src) + 1), w.shape
            assert np.allclose(w.sum(axis=1), 1.0, atol=1e-6)
            out[f"src.{i}"] = np.asarray(src, dtype=np.int32)
            out[f"tgt.{i}"] = np.asarray(tgt, dtype=np.int32)
            out[f"alignment.{i}"] = w
            for layer in range(len(model.decoder.layers)):
                out[f"alignment.layer{layer}.{i}"] = alignment(model, spec, src, tgt, layer)
        path = os.path.join(golden, f"{name}.alignment.safetensors")
        safetensors_io.save(path, out, metadata={"spec": name, "generator": "tests/reference/gen_alignment_golden.py",
                                                 "torch_version": torch.__version__})
        print(f"{name}: {len(PAIRS)} pairs -> {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
