"""PyTorch reference of the tfmc encoder-decoder Transformer (models/README.md).

Written out op by op (no nn.MultiheadAttention / nn.Transformer) so that it follows the `tfm`
dialect semantics exactly (dialects/tfm/README.md): additive -inf masking, fully masked softmax
rows -> zeros, label-smoothed cross-entropy averaged over non-pad targets. Module attribute names
are chosen so that `state_dict()` keys are exactly the parameter names tfmc uses.

Dropout: every dropout site goes through DropoutSite.drop(x, rate, suffix), which by default is
F.dropout(x, rate, self.training) (unchanged PyTorch behaviour). Transformer.set_dropout_fn(fn)
installs a hook fn(x, rate, name) used instead, only in training mode and only for rate > 0
(anything else is the identity, exactly as F.dropout in eval mode); `name` is the site name, e.g.
"encoder.embed" or "decoder.layers.0.cross_attn.probs". CounterDropout is the deterministic,
counter-based hook tfmc's compiled training step implements (see its docstring).

CLI: transformer_ref.py --spec models/tiny.yaml [--list]  -> prints the parameter count.
"""
import argparse
import copy
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml

# Defaults mirror compiler/spec/ModelSpec.h; keep them in sync.
SPEC_DEFAULTS = {
    "model": {
        "d_model": 512,
        "heads": 8,
        "d_ff": 2048,
        "encoder_layers": 6,
        "decoder_layers": 6,
        "src_vocab_size": 0,  # required
        "tgt_vocab_size": 0,  # required
        "tie_src_tgt_embeddings": True,
        "tie_output_projection": True,
        "positions": "sinusoidal",
        "max_len": 256,
        "norm": "post",
        "activation": "relu",
        "layer_norm_eps": 1e-5,
        "dropout": 0.1,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "pad_id": 0,
        "bos_id": 1,
        "eos_id": 2,
    },
    "training": {
        "label_smoothing": 0.1,
        "adam_beta1": 0.9,
        "adam_beta2": 0.98,
        "adam_eps": 1e-9,
        "warmup_steps": 4000,
        "lr_scale": 1.0,
        "batch_tokens": 4096,
        "max_steps": 100000,
        "seed": 1,
    },
    "decoding": {
        "beam_size": 4,
        "length_penalty": 0.6,
        "max_length_ratio": 1.5,
        "max_length_offset": 10,
    },
    "compile": {
        "batch": 32,
        "src_len": 64,
        "tgt_len": 64,
    },
}
_ENUMS = {
    "positions": ("sinusoidal", "learned"),
    "norm": ("post", "pre"),
    "activation": ("relu", "gelu"),
}


def load_spec(path):
    """Reads a spec YAML into {"name", "path", "model", "training", "decoding", "compile"},
    filling ModelSpec.h defaults. Unknown keys are errors: a silently ignored typo would make the
    reference compute a different model than tfmc."""
    with open(path) as f:
        doc = yaml.safe_load(f) or {}
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: top level must be a mapping")
    spec = copy.deepcopy(SPEC_DEFAULTS)
    spec["name"] = str(doc.get("name", os.path.splitext(os.path.basename(path))[0]))
    spec["path"] = path
    for key, value in doc.items():
        if key == "name":
            continue
        if key not in SPEC_DEFAULTS:
            raise ValueError(f"{path}: unknown section '{key}'")
        for field, v in (value or {}).items():
            if field not in SPEC_DEFAULTS[key]:
                raise ValueError(f"{path}: unknown key '{key}.{field}'")
            default = SPEC_DEFAULTS[key][field]
            # bool is an int subclass: check it first so `true` never becomes 1 for an int field.
            if isinstance(default, bool):
                if not isinstance(v, bool):
                    raise ValueError(f"{path}: {key}.{field} must be a boolean")
            elif isinstance(default, int):
                if isinstance(v, bool) or not isinstance(v, int):
                    raise ValueError(f"{path}: {key}.{field} must be an integer")
            elif isinstance(default, float):
                # PyYAML (YAML 1.1) reads `1e-5` (no dot) as a string; yaml-cpp takes it as a number.
                try:
                    if isinstance(v, bool):
                        raise ValueError
                    v = float(v)
                except (TypeError, ValueError):
                    raise ValueError(f"{path}: {key}.{field} must be a number") from None
            elif field in _ENUMS and v not in _ENUMS[field]:
                raise ValueError(f"{path}: {key}.{field} must be one of {_ENUMS[field]}")
            spec[key][field] = v
    m = spec["model"]
    if m["src_vocab_size"] <= 0 or m["tgt_vocab_size"] <= 0:
        raise ValueError(f"{path}: model.src_vocab_size and model.tgt_vocab_size are required")
    if m["d_model"] % m["heads"] != 0:
        raise ValueError(f"{path}: model.d_model must be divisible by model.heads")
    if m["tie_src_tgt_embeddings"] and m["src_vocab_size"] != m["tgt_vocab_size"]:
        raise ValueError(f"{path}: tie_src_tgt_embeddings requires equal vocabularies")
    return spec


MASK64 = 0xFFFFFFFFFFFFFFFF
GOLDEN_GAMMA = 0x9E3779B97F4A7C15


def splitmix64(z):
    """SplitMix64 finaliser on a Python int, modulo 2^64."""
    z = (z + GOLDEN_GAMMA) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def fnv1a64(s):
    """64-bit FNV-1a of the UTF-8 bytes of s."""
    h = 0xCBF29CE484222325
    for b in s.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & MASK64
    return h


def _splitmix64_np(z):
    """splitmix64 on a numpy uint64 array (wrapping arithmetic; uint64 constants throughout so
    nothing is promoted to float)."""
    z = z + np.uint64(GOLDEN_GAMMA)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


COUNTER_DROPOUT_DEFINITION = (
    "counter-based dropout, all arithmetic on uint64 modulo 2^64: "
    "splitmix64(z): z += 0x9E3779B97F4A7C15; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; "
    "z = (z ^ (z >> 27)) * 0x94D049BB133111EB; return z ^ (z >> 31). "
    "fnv1a64(s): h = 0xcbf29ce484222325; for each UTF-8 byte b of s: h = (h ^ b) * 0x100000001b3. "
    "Site NAME with rate r (0 < r < 1; r = 0 sites are skipped), seed SEED = training.seed, "
    "training step STEP (1, 2, ...): key = splitmix64(SEED ^ splitmix64(fnv1a64(NAME) ^ "
    "splitmix64(STEP))); element with flat row-major index i of the site's input tensor (full "
    "shape, padded positions included): u = splitmix64(key + i * 0x9E3779B97F4A7C15) >> 40 "
    "(24 bits); keep iff u >= round(r * 2^24); y = keep ? x * (1 / (1 - r)) : 0 (scale computed in "
    "float64); the gradient flows through the same mask. Sites: encoder.embed, decoder.embed "
    "(after scale + positions, rate model.dropout); <layer>.self_attn.probs, "
    "<layer>.cross_attn.probs (softmax output [B,H,Sq,Sk], rate model.attention_dropout); "
    "<layer>.ffn.activation (after ReLU/GELU [B,S,d_ff], rate model.activation_dropout); "
    "<layer>.self_attn.residual, <layer>.cross_attn.residual, <layer>.ffn.residual (sublayer "
    "output before the residual add, rate model.dropout); <layer> = encoder.layers.<i> or "
    "decoder.layers.<i> (0-based)")


def counter_dropout_key(seed, step, name):
    return splitmix64((int(seed) ^ splitmix64(fnv1a64(name) ^ splitmix64(int(step)))) & MASK64)


def counter_dropout_threshold(rate):
    return int(round(float(rate) * (1 << 24)))


def counter_dropout_u(seed, step, name, numel):
    """The 24-bit u values of flat indices 0..numel-1 (numpy uint64 array)."""
    key = counter_dropout_key(seed, step, name)
    idx = np.arange(numel, dtype=np.uint64)
    return _splitmix64_np(np.uint64(key) + idx * np.uint64(GOLDEN_GAMMA)) >> np.uint64(40)


def counter_dropout_keep(seed, step, name, rate, shape):
    """Boolean keep mask of the given shape (row-major flat indices)."""
    numel = int(np.prod(shape, dtype=np.int64))
    u = counter_dropout_u(seed, step, name, numel)
    return (u >= np.uint64(counter_dropout_threshold(rate))).reshape(shape)


class CounterDropout:
    """Deterministic dropout hook for Transformer.set_dropout_fn (COUNTER_DROPOUT_DEFINITION).
    Set .step before each training step's forward pass. If record is true, every application is
    appended to .log as (step, name, rate, keep mask as a numpy bool array)."""

    definition = COUNTER_DROPOUT_DEFINITION

    def __init__(self, seed, step=1, record=False):
        self.seed = int(seed)
        self.step = int(step)
        self.record = record
        self.log = []

    def __call__(self, x, rate, name):
        if not 0.0 < rate < 1.0:
            raise ValueError(f"dropout site {name}: rate {rate} outside (0, 1)")
        keep = counter_dropout_keep(self.seed, self.step, name, rate, tuple(x.shape))
        if self.record:
            self.log.append((self.step, name, float(rate), keep))
        scale = 1.0 / (1.0 - float(rate))  # float64
        mask = torch.from_numpy(np.where(keep, scale, 0.0)).to(dtype=x.dtype, device=x.device)
        return x * mask


class DropoutSite(nn.Module):
    """Base of every module holding dropout sites. `dropout_site` is the module's qualified name
    (set by Transformer.__init__); `dropout_fn` the optional hook (None: F.dropout)."""

    def __init__(self):
        super().__init__()
        self.dropout_site = ""
        self.dropout_fn = None

    def drop(self, x, rate, suffix):
        if self.dropout_fn is None:
            return F.dropout(x, rate, self.training)
        if not self.training or rate == 0.0:
            return x
        return self.dropout_fn(x, rate, f"{self.dropout_site}.{suffix}")


def sinusoidal_table(max_len, dim):
    """PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(same); float64 then rounded to f32."""
    pos = np.arange(max_len, dtype=np.float64)[:, None]
    two_i = np.arange(0, dim, 2, dtype=np.float64)[None, :]
    angle = pos / np.power(10000.0, two_i / dim)
    pe = np.zeros((max_len, dim), dtype=np.float64)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : dim // 2])
    return torch.from_numpy(pe.astype(np.float32))


class Attention(DropoutSite):
    def __init__(self, d_model, heads, attention_dropout):
        super().__init__()
        self.heads = heads
        self.head_dim = d_model // heads
        self.attention_dropout = attention_dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _split(self, x):  # [B, S, D] -> [B, H, S, K]
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, q_in, kv_in, key_keep, causal):
        """key_keep: [B, Kv] bool (True = attend)."""
        q = self._split(self.q_proj(q_in))
        k = self._split(self.k_proj(kv_in))
        v = self._split(self.v_proj(kv_in))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
        keep = key_keep[:, None, None, :]  # [B, 1, 1, Kv]
        if causal:
            nq, nk = scores.shape[-2], scores.shape[-1]
            tri = torch.ones(nq, nk, dtype=torch.bool, device=scores.device).tril()  # j <= i
            keep = keep & tri
        scores = scores.masked_fill(~keep, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        # A fully masked row is NaN after softmax; the dialect defines it as all zeros.
        probs = probs.masked_fill(~keep.any(dim=-1, keepdim=True), 0.0)
        probs = self.drop(probs, self.attention_dropout, "probs")
        ctx = torch.matmul(probs, v)  # [B, H, Q, K]
        b, _, nq, _ = ctx.shape
        ctx = ctx.transpose(1, 2).reshape(b, nq, self.heads * self.head_dim)
        return self.out_proj(ctx)


class FFN(DropoutSite):
    def __init__(self, d_model, d_ff, activation, activation_dropout):
        super().__init__()
        self.activation = activation
        self.activation_dropout = activation_dropout
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        h = self.fc1(x)
        h = F.relu(h) if self.activation == "relu" else F.gelu(h)  # exact erf GELU
        h = self.drop(h, self.activation_dropout, "activation")
        return self.fc2(h)


def _sublayer(layer, x, fn, norm, site):
    """Residual block: post-norm LN(x + drop(f(x))) or pre-norm x + drop(f(LN(x))); the dropout
    site is "<layer>.<site>.residual"."""
    if layer.pre_norm:
        return x + layer.drop(fn(norm(x)), layer.dropout, f"{site}.residual")
    return norm(x + layer.drop(fn(x), layer.dropout, f"{site}.residual"))


class EncoderLayer(DropoutSite):
    def __init__(self, m):
        super().__init__()
        d, eps = m["d_model"], m["layer_norm_eps"]
        self.pre_norm = m["norm"] == "pre"
        self.dropout = m["dropout"]
        self.self_attn = Attention(d, m["heads"], m["attention_dropout"])
        self.self_attn_norm = nn.LayerNorm(d, eps=eps)
        self.ffn = FFN(d, m["d_ff"], m["activation"], m["activation_dropout"])
        self.ffn_norm = nn.LayerNorm(d, eps=eps)

    def forward(self, x, src_keep):
        x = _sublayer(self, x, lambda h: self.self_attn(h, h, src_keep, causal=False),
                      self.self_attn_norm, "self_attn")
        return _sublayer(self, x, self.ffn, self.ffn_norm, "ffn")


class DecoderLayer(DropoutSite):
    def __init__(self, m):
        super().__init__()
        d, eps = m["d_model"], m["layer_norm_eps"]
        self.pre_norm = m["norm"] == "pre"
        self.dropout = m["dropout"]
        self.self_attn = Attention(d, m["heads"], m["attention_dropout"])
        self.self_attn_norm = nn.LayerNorm(d, eps=eps)
        self.cross_attn = Attention(d, m["heads"], m["attention_dropout"])
        self.cross_attn_norm = nn.LayerNorm(d, eps=eps)
        self.ffn = FFN(d, m["d_ff"], m["activation"], m["activation_dropout"])
        self.ffn_norm = nn.LayerNorm(d, eps=eps)

    def forward(self, y, tgt_keep, memory, src_keep):
        y = _sublayer(self, y, lambda h: self.self_attn(h, h, tgt_keep, causal=True),
                      self.self_attn_norm, "self_attn")
        y = _sublayer(self, y, lambda h: self.cross_attn(h, memory, src_keep, causal=False),
                      self.cross_attn_norm, "cross_attn")
        return _sublayer(self, y, self.ffn, self.ffn_norm, "ffn")


class Stack(DropoutSite):
    """Encoder or decoder: embeddings (+ own token table when untied), layers, final norm."""

    def __init__(self, m, vocab, own_embedding, layer_cls, num_layers):
        super().__init__()
        d = m["d_model"]
        self.d_model = d
        self.dropout = m["dropout"]
        self.max_len = m["max_len"]
        if own_embedding:
            self.embed_tokens = nn.Embedding(vocab, d)
        self.learned_positions = m["positions"] == "learned"
        if self.learned_positions:
            self.embed_positions = nn.Embedding(m["max_len"], d)
        else:
            # Not a parameter and not saved: every backend recomputes the same table.
            self.register_buffer("pe", sinusoidal_table(m["max_len"], d), persistent=False)
        self.layers = nn.ModuleList([layer_cls(m) for _ in range(num_layers)])
        if m["norm"] == "pre":
            self.final_norm = nn.LayerNorm(d, eps=m["layer_norm_eps"])

    def embed(self, ids, table):
        s = ids.shape[1]
        if s > self.max_len:
            raise ValueError(f"sequence length {s} exceeds max_len {self.max_len}")
        pos = self.embed_positions.weight if self.learned_positions else self.pe
        x = F.embedding(ids, table) * math.sqrt(self.d_model) + pos[:s]
        return self.drop(x, self.dropout, "embed")

    def finish(self, x):
        return self.final_norm(x) if hasattr(self, "final_norm") else x


class Transformer(nn.Module):
    def __init__(self, spec):
        super().__init__()
        m = spec["model"]
        self.spec = spec
        self.pad_id = m["pad_id"]
        self.tgt_vocab = m["tgt_vocab_size"]
        self.label_smoothing = spec["training"]["label_smoothing"]
        tied = m["tie_src_tgt_embeddings"]
        if tied:
            self.shared_embedding = nn.Embedding(m["src_vocab_size"], m["d_model"])
        self.encoder = Stack(m, m["src_vocab_size"], not tied, EncoderLayer, m["encoder_layers"])
        self.decoder = Stack(m, m["tgt_vocab_size"], not tied, DecoderLayer, m["decoder_layers"])
        if not m["tie_output_projection"]:
            self.output_projection = nn.Linear(m["d_model"], m["tgt_vocab_size"], bias=False)
        for qualified, mod in self.named_modules():
            if isinstance(mod, DropoutSite):
                mod.dropout_site = qualified

    def set_dropout_fn(self, fn):
        """Installs the dropout hook fn(x, rate, name) on every site (None: back to F.dropout)."""
        for mod in self.modules():
            if isinstance(mod, DropoutSite):
                mod.dropout_fn = fn
        return self

    # Token tables resolved per tying option (kept as single tensors so state_dict has no aliases).
    def src_table(self):
        return self.shared_embedding.weight if hasattr(self, "shared_embedding") \
            else self.encoder.embed_tokens.weight

    def tgt_table(self):
        return self.shared_embedding.weight if hasattr(self, "shared_embedding") \
            else self.decoder.embed_tokens.weight

    def out_weight(self):
        return self.output_projection.weight if hasattr(self, "output_projection") \
            else self.tgt_table()

    def encode(self, src):
        src_keep = src != self.pad_id
        x = self.encoder.embed(src, self.src_table())
        for layer in self.encoder.layers:
            x = layer(x, src_keep)
        return self.encoder.finish(x), src_keep

    def decode(self, tgt_in, memory, src_keep):
        tgt_keep = tgt_in != self.pad_id
        y = self.decoder.embed(tgt_in, self.tgt_table())
        for layer in self.decoder.layers:
            y = layer(y, tgt_keep, memory, src_keep)
        y = self.decoder.finish(y)
        return torch.matmul(y, self.out_weight().t())  # no bias

    def loss(self, logits, tgt_out):
        return label_smoothed_xent(logits, tgt_out, self.label_smoothing, self.pad_id)

    def forward(self, src, tgt_in, tgt_out=None):
        """src [B,S], tgt_in [B,T], tgt_out [B,T] int64 -> (logits [B,T,V], loss scalar or None)."""
        memory, src_keep = self.encode(src)
        logits = self.decode(tgt_in, memory, src_keep)
        return logits, (None if tgt_out is None else self.loss(logits, tgt_out))


def label_smoothed_xent(logits, targets, eps, pad_id):
    """Mean over targets != pad_id of -(1-e) log p[y] - (e/V) sum_v log p[v]; 0 if none."""
    logp = torch.log_softmax(logits, dim=-1)
    vocab = logits.shape[-1]
    keep = targets != pad_id
    nll = -logp.gather(-1, targets.clamp(0, vocab - 1).unsqueeze(-1)).squeeze(-1)
    smooth = -logp.sum(dim=-1)
    per_pos = (1.0 - eps) * nll + (eps / vocab) * smooth
    count = keep.sum()
    total = torch.where(keep, per_pos, torch.zeros_like(per_pos)).sum()
    return total / count.clamp(min=1).to(total.dtype)


def xavier_init(model, seed):
    """Xavier-uniform for 2-D weights (embeddings included), zeros for biases and LayerNorm
    shifts, ones for LayerNorm scales. Uses its own generator so the result only depends on seed."""
    gen = torch.Generator().manual_seed(int(seed))
    norm_scales = {id(mod.weight) for mod in model.modules() if isinstance(mod, nn.LayerNorm)}
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 2:
                fan_out, fan_in = p.shape
                bound = math.sqrt(6.0 / (fan_in + fan_out))
                p.uniform_(-bound, bound, generator=gen)
            elif id(p) in norm_scales:
                p.fill_(1.0)
            else:
                p.zero_()
    return model


def load_weights(model, path):
    """Loads a safetensors file with tfmc parameter names (strict: names and shapes must match)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import safetensors_io

    tensors = safetensors_io.load(path)
    ref = model.state_dict()
    state = {}
    for name, arr in tensors.items():
        if name not in ref:
            raise KeyError(f"{path}: unexpected tensor '{name}'")
        state[name] = torch.from_numpy(arr).to(ref[name].dtype)
    model.load_state_dict(state, strict=True)
    return model


def state_dict_numpy(model):
    """Parameters as float32 numpy arrays keyed by tfmc names (what gets saved to safetensors)."""
    return {k: v.detach().to(torch.float32).cpu().numpy() for k, v in model.state_dict().items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", required=True)
    ap.add_argument("--list", action="store_true", help="also print every parameter name and shape")
    args = ap.parse_args()
    model = Transformer(load_spec(args.spec))
    if args.list:
        for name, t in model.state_dict().items():
            print(f"{name} {list(t.shape)}")
    print(sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main()
