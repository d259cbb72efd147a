#!/usr/bin/env python3
"""An independent PyTorch decoder with an incremental K/V cache, for `compare_pytorch.py --mode
decode`: the project's reference modules (tests/reference/transformer_ref.py) with the weights of a
tfmc checkpoint, run token by token with per-layer self-attention caches (concatenated, and
reordered with index_select when beams are re-ranked) and cross-attention K/V computed once.
Search rules as tfmc's: greedy = argmax; beam keeps the best 2K extensions, finalises </s> only
from the top K, stops a sentence when K are finished and no live hypothesis can beat the best under
the GNMT penalty; padding and BOS are never generated.

  pytorch_decode.py --spec models/small.yaml --checkpoint small.ckpt --ids src.ids --beam 4 \
      [--batch 32] [--threads 2] [--int8] --output hyp.ids
Input and output: one sentence of token ids per line (sources without </s>). Prints the time.
--int8: PyTorch's dynamic quantization (torch.ao.quantization.quantize_dynamic, qint8 weights, the
default quantized engine) of every nn.Linear and of the vocabulary projection, what a PyTorch user
reaches for to run int8 on a CPU; attention, LayerNorm and softmax stay f32, as in tfmc's int8.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "reference"))
import safetensors_io  # noqa: E402
import transformer_ref as ref  # noqa: E402


def load_model(spec_path, checkpoint):
    spec = ref.load_spec(spec_path)
    model = ref.Transformer(spec).eval()
    tensors = safetensors_io.load(checkpoint)
    state = model.state_dict()
    model.load_state_dict({k: torch.from_numpy(tensors[k]).to(v.dtype) for k, v in state.items()}, strict=True)
    return spec, model


def heads(x, h):  # [B, T, D] -> [B, H, T, K]
    b, t, d = x.shape
    return x.view(b, t, h, d // h).transpose(1, 2)


class IncrementalDecoder:
    def __init__(self, model, src):
        self.m = model
        self.memory, self.src_keep = model.encode(src)
        dec = model.decoder
        self.h = dec.layers[0].self_attn.heads
        # Cross-attention K/V once per sentence.
        self.cross = [(heads(l.cross_attn.k_proj(self.memory), self.h), heads(l.cross_attn.v_proj(self.memory), self.h))
                      for l in dec.layers]
        self.cache = [None] * len(dec.layers)
        self.vocab = getattr(model, "int8_vocab", None)

    def step(self, tokens, t, parents, rows):
        """tokens [R] of position t; parents [R]: row of the previous step; rows [R]: sentence."""
        m, dec = self.m, self.m.decoder
        if t > 0:
            self.cache = [(k.index_select(0, parents), v.index_select(0, parents)) for k, v in self.cache]
        pos = dec.embed_positions.weight if dec.learned_positions else dec.pe
        y = F.embedding(tokens[:, None], m.tgt_table()) * math.sqrt(dec.d_model) + pos[t]
        keep = self.src_keep.index_select(0, rows)[:, None, None, :]
        for i, layer in enumerate(dec.layers):
            def self_attn(x, i=i, layer=layer):
                a = layer.self_attn
                q, k, v = heads(a.q_proj(x), self.h), heads(a.k_proj(x), self.h), heads(a.v_proj(x), self.h)
                if self.cache[i] is not None:
                    k = torch.cat([self.cache[i][0], k], dim=2)
                    v = torch.cat([self.cache[i][1], v], dim=2)
                self.cache[i] = (k, v)
                p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(a.head_dim), dim=-1)
                return a.out_proj((p @ v).transpose(1, 2).reshape(x.shape))

            def cross_attn(x, i=i, layer=layer):
                a = layer.cross_attn
                k, v = self.cross[i][0].index_select(0, rows), self.cross[i][1].index_select(0, rows)
                s = heads(a.q_proj(x), self.h) @ k.transpose(-1, -2) / math.sqrt(a.head_dim)
                p = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
                return a.out_proj((p @ v).transpose(1, 2).reshape(x.shape))

            y = ref._sublayer(layer, y, self_attn, layer.self_attn_norm, "self_attn")
            y = ref._sublayer(layer, y, cross_attn, layer.cross_attn_norm, "cross_attn")
            y = ref._sublayer(layer, y, layer.ffn, layer.ffn_norm, "ffn")
        y = dec.finish(y)
        if self.vocab is not None:  # --int8: a quantized linear with the output weight
            return torch.log_softmax(self.vocab(y[:, 0]), dim=-1)
        return torch.log_softmax(y[:, 0] @ m.out_weight().t(), dim=-1)


def lp(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def translate_batch(model, sources, d):
    n = len(sources)
    s = max(min(len(x) + 1, d["max_len"]) for x in sources)
    src = torch.full((n, s), d["pad"], dtype=torch.long)
    max_out = []
    for i, x in enumerate(sources):
        x = x[: s - 1] + [d["eos"]]
        src[i, : len(x)] = torch.tensor(x)
        max_out.append(max(1, min(d["max_len"] - 1, int(d["ratio"] * (len(x) - 1)) + d["offset"])))
    dec = IncrementalDecoder(model, src)
    K = d["beam"]
    live = [[([], 0.0, i)] for i in range(n)]  # (tokens, logprob, row)
    finished = [[] for _ in range(n)]
    done = [False] * n
    t = 0
    while True:
        rows, parents, tokens, owners = [], [], [], []
        for i in range(n):
            if done[i]:
                continue
            for j, (toks, _, row) in enumerate(live[i]):
                rows.append(i), parents.append(row), tokens.append(toks[-1] if toks else d["bos"]), owners.append((i, j))
        if not rows:
            break
        lprobs = dec.step(torch.tensor(tokens), t, torch.tensor(parents), torch.tensor(rows))
        lprobs[:, d["pad"]] = -math.inf
        lprobs[:, d["bos"]] = -math.inf
        keep = 1 if K == 1 else 2 * K
        top_v, top_i = lprobs.topk(keep, dim=-1)
        top_v, top_i = top_v.tolist(), top_i.tolist()
        r0 = 0
        for i in range(n):
            if done[i]:
                continue
            nl = len(live[i])
            last = t + 1 >= max_out[i]
            if K == 1:
                toks, lpv, _ = live[i][0]
                tok, val = top_i[r0][0], lpv + top_v[r0][0]
                if tok == d["eos"]:
                    finished[i].append((toks, val))
                    live[i] = []
                else:
                    live[i] = [(toks + [tok], val, r0)]
                    if last:
                        finished[i].append((toks + [tok], val))
                        live[i] = []
                done[i] = not live[i]
                r0 += nl
                continue
            cand = sorted(((live[i][j][1] + top_v[r0 + j][c], j, top_i[r0 + j][c]) for j in range(nl) for c in range(keep)),
                          key=lambda c: -c[0])[: 2 * K]
            nxt = []
            for rank, (val, j, tok) in enumerate(cand):
                if tok == d["eos"]:
                    if rank < K:
                        finished[i].append((live[i][j][0], val))
                    continue
                if len(nxt) < K:
                    nxt.append((live[i][j][0] + [tok], val, r0 + j))
            if last:
                finished[i] += [(x[0], x[1]) for x in nxt]
                nxt = []
            live[i] = nxt
            stop = not nxt
            if not stop and len(finished[i]) >= K:
                best = max(v / lp(len(x) + 1, d["alpha"]) for x, v in finished[i])
                bound = max(v / lp(max_out[i] + 1, d["alpha"]) for _, v, _ in nxt)
                stop = best >= bound
            done[i] = stop
            r0 += nl
        t += 1
    return [max(f, key=lambda x: x[1] / lp(len(x[0]) + 1, d["alpha"]))[0] for f in finished]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--int8", action="store_true", help="dynamic int8 quantization of the linear layers")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    spec, model = load_model(args.spec, args.checkpoint)
    if args.int8:
        with torch.no_grad():
            vocab = torch.nn.Linear(model.out_weight().shape[1], model.out_weight().shape[0], bias=False)
            vocab.weight.copy_(model.out_weight())
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        model.int8_vocab = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(vocab), {torch.nn.Linear},
                                                                  dtype=torch.qint8)
    m, dc = spec["model"], spec.get("decoding", {})
    d = {"pad": m["pad_id"], "bos": m["bos_id"], "eos": m["eos_id"], "max_len": m["max_len"], "beam": args.beam,
         "alpha": dc.get("length_penalty", 0.6), "ratio": dc.get("max_length_ratio", 1.5),
         "offset": dc.get("max_length_offset", 10)}
    sources = [[int(x) for x in line.split()] for line in open(args.ids)]
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    out = [None] * len(sources)
    start = time.perf_counter()
    with torch.no_grad():
        for b in range(0, len(order), args.batch):
            idx = order[b: b + args.batch]
            for i, hyp in zip(idx, translate_batch(model, [sources[i] for i in idx], d)):
                out[i] = hyp
    secs = time.perf_counter() - start
    with open(args.output, "w") as f:
        for hyp in out:
            f.write(" ".join(map(str, hyp)) + "\n")
    print(f"pytorch decode: {len(sources)} sentences, beam {args.beam}, {secs:.2f} s")


if __name__ == "__main__":
    main()
