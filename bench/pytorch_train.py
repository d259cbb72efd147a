"""Benchmarks an idiomatic PyTorch model of the tfmc Transformer (float32): the training-step
baseline tfmc is compared against. Prints one JSON line; tokens/s counts batch * (src_len + tgt_len).

/usr/bin/python3 bench/pytorch_train.py --spec models/small.yaml --adam \
    --batch 32 --src-len 32 --tgt-len 32 --iters 10 --warmup 2 [--threads 2] [--weights f.safetensors]
/usr/bin/python3 bench/pytorch_train.py --spec models/tiny.yaml --check-against-reference --threads 1

Same command line, batch and JSON line as bench/pytorch_forward.py (forward only by default;
--loss, --backward, --adam as there), but the model is written the way a careful PyTorch user
writes it rather than op by op for clarity like tests/reference/transformer_ref.py: one merged
Q/K/V nn.Linear per self-attention, Q and a merged K/V nn.Linear per cross-attention, additive
masks built once per forward, nn.Dropout modules, F.cross_entropy(label_smoothing=...,
ignore_index=pad) and torch.optim.Adam (the hyper-parameters pytorch_forward.py --adam uses). The
architecture, the spec parsing (transformer_ref.load_spec) and the weights (tfmc names, Q/K/V
concatenated on load) are the reference's.

--check-against-reference (eval mode, no dropout) runs the reference and this model on the same
weights and batch (the benchmark's batch, then a copy with padded tails): the losses must agree to
1e-5 relative and the gradients to 1e-4 of the largest; after one Adam step the parameters must
agree within 1e-6 where the gradient is 0 or at least 100 Adam eps, outside the key-projection
biases (Adam's first step turns any gradient into about +-lr, round-off included; the key biases'
gradient is zero in exact arithmetic, so round-off is all they have: checked to be that small),
and within 1e-7 everywhere when both step on the same gradients. Also
prints tfmc's own loss on the same weights and batch when --tfmc (default build/bin/tfmc) exists.
Exit status 1 if a check fails.

Differences from the reference, on degenerate inputs only: a fully masked attention row (a source
that is all padding, or a target starting with padding) is averaged uniformly instead of being
zero, and a batch with no non-pad target gives loss NaN instead of 0.
"""
import argparse
import json
import math
import os
import sys

from pytorch_forward import _ensure_blas_env

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# What bench/pytorch_forward.py --adam uses.
ADAM = {"lr": 1e-4, "betas": (0.9, 0.98), "eps": 1e-9}
# Merged projections: our parameter name -> the tfmc projections concatenated (output rows).
MERGED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "kv_proj": ("k_proj", "v_proj")}


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
    ap.add_argument("--check-against-reference", action="store_true",
                    help="compare loss, gradients and one Adam step with transformer_ref.py, then exit")
    ap.add_argument("--tfmc", default=os.path.join(ROOT, "build", "bin", "tfmc"),
                    help="--check-against-reference also compares with this tfmc's loss if it exists")
    return ap.parse_args()


# The model (torch is imported in main, after the BLAS environment is in place).
def build_model_classes(torch, nn, F):
    class Attention(nn.Module):
        """Multi-head attention; self-attention (cross=False) projects Q, K, V with one GEMM,
        cross-attention projects Q from the decoder and K, V from the memory with one GEMM."""

        def __init__(self, d, heads, attention_dropout, cross):
            super().__init__()
            self.heads, self.head_dim, self.cross = heads, d // heads, cross
            self.scale = 1.0 / math.sqrt(self.head_dim)
            if cross:
                self.q_proj = nn.Linear(d, d)
                self.kv_proj = nn.Linear(d, 2 * d)
            else:
                self.qkv_proj = nn.Linear(d, 3 * d)
            self.out_proj = nn.Linear(d, d)
            self.attn_dropout = nn.Dropout(attention_dropout)

        def forward(self, x, memory, bias):
            b, t, d = x.shape
            if self.cross:
                q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
                k, v = self.kv_proj(memory).view(b, -1, 2, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
            else:
                q, k, v = self.qkv_proj(x).view(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
            scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
            if bias is not None:
                scores = scores + bias
            probs = self.attn_dropout(scores.softmax(dim=-1))
            ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, d)
            return self.out_proj(ctx)

    class FFN(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.fc1 = nn.Linear(m["d_model"], m["d_ff"])
            self.act = nn.ReLU() if m["activation"] == "relu" else nn.GELU()  # exact erf GELU
            self.act_dropout = nn.Dropout(m["activation_dropout"])
            self.fc2 = nn.Linear(m["d_ff"], m["d_model"])

        def forward(self, x):
            return self.fc2(self.act_dropout(self.act(self.fc1(x))))

    class Layer(nn.Module):
        """Encoder layer, or decoder layer with cross-attention; post-norm LN(x + drop(f(x))) or
        pre-norm x + drop(f(LN(x)))."""

        def __init__(self, m, decoder):
            super().__init__()
            d, eps = m["d_model"], m["layer_norm_eps"]
            self.pre_norm = m["norm"] == "pre"
            self.dropout = nn.Dropout(m["dropout"])
            self.self_attn = Attention(d, m["heads"], m["attention_dropout"], cross=False)
            self.self_attn_norm = nn.LayerNorm(d, eps=eps)
            if decoder:
                self.cross_attn = Attention(d, m["heads"], m["attention_dropout"], cross=True)
                self.cross_attn_norm = nn.LayerNorm(d, eps=eps)
            self.ffn = FFN(m)
            self.ffn_norm = nn.LayerNorm(d, eps=eps)

        def _residual(self, x, norm, fn):
            if self.pre_norm:
                return x + self.dropout(fn(norm(x)))
            return norm(x + self.dropout(fn(x)))

        def forward(self, x, self_bias, memory=None, memory_bias=None):
            x = self._residual(x, self.self_attn_norm, lambda h: self.self_attn(h, h, self_bias))
            if memory is not None:
                x = self._residual(x, self.cross_attn_norm, lambda h: self.cross_attn(h, memory, memory_bias))
            return self._residual(x, self.ffn_norm, self.ffn)

    class Stack(nn.Module):
        def __init__(self, m, vocab, own_embedding, decoder, num_layers, pe):
            super().__init__()
            d = m["d_model"]
            self.embed_scale = math.sqrt(d)
            if own_embedding:
                self.embed_tokens = nn.Embedding(vocab, d)
            if m["positions"] == "learned":
                self.embed_positions = nn.Embedding(m["max_len"], d)
            else:
                self.register_buffer("pe", pe, persistent=False)
            self.dropout = nn.Dropout(m["dropout"])
            self.layers = nn.ModuleList([Layer(m, decoder) for _ in range(num_layers)])
            self.final_norm = nn.LayerNorm(d, eps=m["layer_norm_eps"]) if m["norm"] == "pre" else None

        def forward(self, ids, table, self_bias, memory=None, memory_bias=None):
            pos = self.embed_positions.weight if hasattr(self, "embed_positions") else self.pe
            x = self.dropout(F.embedding(ids, table) * self.embed_scale + pos[: ids.shape[1]])
            for layer in self.layers:
                x = layer(x, self_bias, memory, memory_bias)
            return x if self.final_norm is None else self.final_norm(x)

    class Transformer(nn.Module):
        def __init__(self, spec, pe):
            super().__init__()
            m = spec["model"]
            self.pad_id, self.max_len = m["pad_id"], m["max_len"]
            self.label_smoothing = spec["training"]["label_smoothing"]
            tied = m["tie_src_tgt_embeddings"]
            if tied:
                self.shared_embedding = nn.Embedding(m["src_vocab_size"], m["d_model"])
            self.encoder = Stack(m, m["src_vocab_size"], not tied, False, m["encoder_layers"], pe)
            self.decoder = Stack(m, m["tgt_vocab_size"], not tied, True, m["decoder_layers"], pe)
            if not m["tie_output_projection"]:
                self.output_projection = nn.Linear(m["d_model"], m["tgt_vocab_size"], bias=False)
            neg = torch.finfo(torch.float32).min  # finite: no NaN rows, exp() still exactly 0
            causal = torch.full((m["max_len"], m["max_len"]), neg).triu(1)
            self.register_buffer("causal_bias", causal, persistent=False)

        def _key_bias(self, ids):
            """[B, 1, 1, K] additive mask of padded keys, None if the batch has no padding."""
            pad = ids == self.pad_id
            if not pad.any():
                return None
            return torch.zeros(pad.shape).masked_fill(pad, torch.finfo(torch.float32).min)[:, None, None, :]

        def forward(self, src, tgt_in):
            if max(src.shape[1], tgt_in.shape[1]) > self.max_len:
                raise ValueError(f"sequence length exceeds max_len {self.max_len}")
            shared = getattr(self, "shared_embedding", None)
            src_table = shared.weight if shared is not None else self.encoder.embed_tokens.weight
            tgt_table = shared.weight if shared is not None else self.decoder.embed_tokens.weight
            src_bias = self._key_bias(src)
            t = tgt_in.shape[1]
            tgt_bias = self.causal_bias[:t, :t]
            tgt_pad = self._key_bias(tgt_in)
            if tgt_pad is not None:
                tgt_bias = torch.minimum(tgt_bias, tgt_pad)  # [B, 1, T, T], still finite
            memory = self.encoder(src, src_table, src_bias)
            y = self.decoder(tgt_in, tgt_table, tgt_bias, memory, src_bias)
            out = self.output_projection.weight if hasattr(self, "output_projection") else tgt_table
            return F.linear(y, out)  # no bias

        def loss(self, logits, tgt_out):
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                                   ignore_index=self.pad_id, label_smoothing=self.label_smoothing)

    return Transformer


def _merged_parts(name):
    """'x.qkv_proj.weight' -> ['x.q_proj.weight', 'x.k_proj.weight', 'x.v_proj.weight'] (None if
    the parameter is not a merged projection)."""
    *prefix, module, leaf = name.split(".")
    if module not in MERGED:
        return None
    return [".".join(prefix + [part, leaf]) for part in MERGED[module]]


def load_tfmc_state(torch, model, tensors):
    """Loads tfmc-named tensors (name -> numpy array or tensor), concatenating the merged
    projections; strict: every tensor used, every parameter set, shapes checked."""
    state, used = {}, set()
    for name, ref in model.state_dict().items():
        parts = _merged_parts(name) or [name]
        missing = [p for p in parts if p not in tensors]
        if missing:
            raise KeyError(f"weights: missing tensor '{missing[0]}'")
        state[name] = torch.cat([torch.as_tensor(tensors[p]) for p in parts], dim=0).to(ref.dtype)
        used.update(parts)
    extra = sorted(set(tensors) - used)
    if extra:
        raise KeyError(f"weights: unexpected tensor '{extra[0]}'")
    model.load_state_dict(state, strict=True)  # also checks the shapes
    return model


def new_model(torch, ref, Transformer, spec, tensors):
    """Our model of spec with the tfmc-named tensors loaded (the reference's sinusoid table)."""
    m = spec["model"]
    return load_tfmc_state(torch, Transformer(spec, ref.sinusoidal_table(m["max_len"], m["d_model"])), tensors)


def _split_merged(named):
    """(our name, tensor) pairs -> {tfmc name: tensor}, merged projections split back (views)."""
    out = {}
    for name, t in named:
        parts = _merged_parts(name)
        out.update(zip(parts, t.chunk(len(parts), dim=0)) if parts else [(name, t)])
    return out


def tfmc_state(model):
    return _split_merged(model.state_dict().items())


def tfmc_grads(model):
    return _split_merged((name, p.grad) for name, p in model.named_parameters())


def initial_tensors(ref, spec, args):
    """tfmc-named initial weights: --weights, or the reference's seeded Xavier init (what
    pytorch_forward.py uses without --weights)."""
    if args.weights:
        import safetensors_io
        return safetensors_io.load(args.weights)
    model = ref.xavier_init(ref.Transformer(spec), args.seed)
    return {k: v.clone() for k, v in model.state_dict().items()}


def make_batch(torch, m, args):
    """pytorch_forward.py's batch: full-length rows, same generator and order."""
    gen = torch.Generator().manual_seed(args.seed)
    src = torch.randint(3, m["src_vocab_size"], (args.batch, args.src_len), generator=gen)
    tgt_in = torch.randint(3, m["tgt_vocab_size"], (args.batch, args.tgt_len), generator=gen)
    tgt_in[:, 0] = m["bos_id"]
    return src, tgt_in, torch.roll(tgt_in, -1, dims=1)


def padded_copy(src, tgt_in, tgt_out, pad_id):
    """Row b loses its last b % 3 source and b % 4 target positions to padding (never a whole row)."""
    src, tgt_in, tgt_out = src.clone(), tgt_in.clone(), tgt_out.clone()
    for b in range(src.shape[0]):
        ns = min(b % 3, src.shape[1] - 1)
        nt = min(b % 4, tgt_in.shape[1] - 1)
        if ns:
            src[b, -ns:] = pad_id
        if nt:
            tgt_in[b, -nt:] = pad_id
            tgt_out[b, -nt - 1:] = pad_id  # the rolled targets: pads, and the wrapped-around bos
    return src, tgt_in, tgt_out


def _max_rel(a, b):
    """max |a - b| / max |b| over all tensors of two same-keyed dicts."""
    diff = max(float((a[k] - b[k]).abs().max()) for k in b)
    scale = max(float(b[k].abs().max()) for k in b)
    return diff / max(scale, 1e-30)


def tfmc_loss(tfmc, spec_path, tensors, batch, threads, workdir):
    """tfmc's forward loss on the same weights and batch (None if the binary is missing)."""
    import subprocess

    import numpy as np
    import safetensors_io

    if not os.path.exists(tfmc):
        return None
    artifact, weights = os.path.join(workdir, "m.tfmx"), os.path.join(workdir, "w.safetensors")
    inputs, output = os.path.join(workdir, "in.safetensors"), os.path.join(workdir, "out.safetensors")
    subprocess.run([tfmc, "compile", spec_path, "-o", artifact, "--quiet"], check=True)
    safetensors_io.save(weights, {k: np.asarray(v, dtype=np.float32) for k, v in tensors.items()})
    safetensors_io.save(inputs, {k: t.numpy().astype(np.int32) for k, t in zip(("src", "tgt_in", "tgt_out"), batch)})
    subprocess.run([tfmc, "run", artifact, "--weights", weights, "--inputs", inputs, "--output", output,
                    "--threads", str(threads)],
                   check=True, stdout=subprocess.DEVNULL)
    return float(safetensors_io.load(output)["loss"])


def check_against_reference(torch, ref, Transformer, spec, tensors, args):
    import shutil
    import tempfile

    m = spec["model"]
    bench = make_batch(torch, m, args)
    batches = [("benchmark batch", bench), ("padded batch", padded_copy(*bench, m["pad_id"]))]
    ok = True
    workdir = tempfile.mkdtemp(prefix="tfmc-pytorch-check-")
    for label, (src, tgt_in, tgt_out) in batches:
        reference = ref.Transformer(spec)
        reference.load_state_dict({k: torch.as_tensor(v) for k, v in tensors.items()}, strict=True)
        ours = new_model(torch, ref, Transformer, spec, tensors)
        reference.eval()
        ours.eval()
        _, ref_loss = reference(src, tgt_in, tgt_out)
        our_loss = ours.loss(ours(src, tgt_in), tgt_out)
        rel = abs(float(our_loss) - float(ref_loss)) / abs(float(ref_loss))
        print(f"{label} {tuple(src.shape)} -> {tuple(tgt_in.shape)}: reference loss {float(ref_loss):.9f}, "
              f"idiomatic loss {float(our_loss):.9f}, relative difference {rel:.2e} (limit 1e-5)")
        ok &= rel <= 1e-5
        t_loss = tfmc_loss(args.tfmc, spec["path"], tensors, (src, tgt_in, tgt_out), args.threads, workdir)
        if t_loss is not None:
            print(f"  tfmc loss {t_loss:.9f} (f32 engine, relative difference to the reference "
                  f"{abs(t_loss - float(ref_loss)) / abs(float(ref_loss)):.2e})")
        ref_loss.backward()
        our_loss.backward()
        ref_grads = {k: p.grad for k, p in reference.named_parameters()}
        grad_rel = _max_rel(tfmc_grads(ours), ref_grads)
        print(f"  gradients: max |difference| / max |reference gradient| = {grad_rel:.2e} (limit 1e-4)")
        ok &= grad_rel <= 1e-4
        gmax = max(float(g.abs().max()) for g in ref_grads.values())
        our_grads = tfmc_grads(ours)
        kbias = [k for k in ref_grads if k.endswith("k_proj.bias")]
        kmax = max([float(g[k].abs().max()) for g in (ref_grads, our_grads) for k in kbias], default=0.0)
        print(f"  key-projection bias gradients (zero in exact arithmetic: softmax ignores a constant "
              f"added to a row of scores): max |gradient| {kmax:.2e} = {kmax / gmax:.2e} of the largest (limit 1e-6)")
        ok &= kmax <= 1e-6 * gmax
        # Adam's first step moves a parameter by lr * g / (|g| + eps) whatever the size of g, so
        # where |g| is round-off-sized (the key biases) or near eps = 1e-9, two correct gradients
        # give updates up to 2 lr apart. Each model's own step is compared outside the key biases
        # where the reference gradient is 0 or at least 100 eps; the step itself (optimizer, hyper-parameters, the
        # merged parameters' layout) is compared everywhere by stepping both on the reference's
        # gradients.
        before = {k: torch.as_tensor(v) for k, v in tensors.items()}
        ours_on_ref = new_model(torch, ref, Transformer, spec, tensors)
        for name, p in ours_on_ref.named_parameters():
            p.grad = torch.cat([ref_grads[k] for k in (_merged_parts(name) or [name])], dim=0).clone()
        for model in (reference, ours, ours_on_ref):
            torch.optim.Adam(model.parameters(), **ADAM).step()
        after_ref = reference.state_dict()
        moved = max(float((after_ref[k] - before[k]).abs().max()) for k in after_ref)
        diff, skipped, total = 0.0, 0, 0
        after_ours = tfmc_state(ours)
        for k, p in after_ref.items():
            if k in kbias:
                skipped += p.numel()
                total += p.numel()
                continue
            g = ref_grads[k]
            compared = (g == 0) | (g.abs() >= 100 * ADAM["eps"])
            skipped += int((~compared).sum())
            total += p.numel()
            diff = max(diff, float(((after_ours[k] - p).abs() * compared).max()))
        same_grads = tfmc_state(ours_on_ref)
        exact = max(float((same_grads[k] - p).abs().max()) for k, p in after_ref.items())
        print(f"  one Adam step (lr {ADAM['lr']:g}, largest update {moved:.2e}): max |parameter difference| "
              f"{diff:.2e} (limit 1e-6; {skipped} of {total} elements left out: key biases, "
              f"0 < |reference gradient| < 100 eps); on the reference's gradients {exact:.2e} (limit 1e-7, every element)")
        ok &= diff <= 1e-6 and exact <= 1e-7
    shutil.rmtree(workdir, ignore_errors=True)
    print("check passed" if ok else "CHECK FAILED")
    return 0 if ok else 1


def main():
    args = _parse_args()  # before the re-exec so --help / bad flags don't pay for it
    _ensure_blas_env()
    # OpenMP OpenBLAS reads this at load time; torch.set_num_threads covers torch's own pool.
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))

    import statistics
    import time

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
    import transformer_ref as ref

    torch.set_num_threads(args.threads)
    spec = ref.load_spec(args.spec)
    m = spec["model"]
    Transformer = build_model_classes(torch, nn, F)
    tensors = initial_tensors(ref, spec, args)
    if args.check_against_reference:
        sys.exit(check_against_reference(torch, ref, Transformer, spec, tensors, args))

    model = new_model(torch, ref, Transformer, spec, tensors)
    model.train() if args.adam else model.eval()
    src, tgt_in, tgt_out = make_batch(torch, m, args)
    args.backward = args.backward or args.adam
    args.loss = args.loss or args.backward
    opt = torch.optim.Adam(model.parameters(), **ADAM) if args.adam else None

    times = []
    for i in range(args.warmup + args.iters):
        t0 = time.perf_counter()
        if args.backward:
            model.zero_grad(set_to_none=True)
            loss = model.loss(model(src, tgt_in), tgt_out)
            loss.backward()
            if opt is not None:
                opt.step()
        else:
            with torch.no_grad():
                logits = model(src, tgt_in)
                if args.loss:
                    model.loss(logits, tgt_out)
        t1 = time.perf_counter()
        if i >= args.warmup:
            times.append(t1 - t0)
    median = statistics.median(times)
    tokens = args.batch * (args.src_len + args.tgt_len)
    print(json.dumps({
        "engine": "pytorch",
        "model": "idiomatic",
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
