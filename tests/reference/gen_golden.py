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

adam file tensors (all F32): two Adam training steps on the io batch, started from the float64
copies of the golden weights, in float64 and TRAINING mode with the deterministic counter-based
dropout of transformer_ref.CounterDropout (definition in the `dropout` metadata; seed =
training.seed, STEP = t for step t; rates from the spec, rate-0 sites skipped), on a deep copy of
the model (the files above, all eval mode, are not affected). For t = 1, 2: lr_t = lr_scale *
d_model^-0.5 * min(t^-0.5, t * warmup_steps^-1.5); loss and gradients at the current parameters
with step-t dropout; set the lr of torch.optim.Adam (PyTorch's bias-corrected Adam:
betas=(adam_beta1, adam_beta2), eps=adam_eps, weight_decay=0, amsgrad=False) to lr_t; one step.
Tied tables are one parameter with one Adam state. Keys: step1/<param> and step2/<param> (every
parameter after step 1 / step 2, names and shapes as in the weights file), grad1/<param> and
grad2/<param> (gradients at step 1 / step 2, i.e. at the weights / the step-1 parameters, each
with that step's dropout), scalars (shape []) loss1 (before the first update, step-1 dropout),
loss2 (after the first update, step-2 dropout), eval_loss1 (the io file's eval-mode loss, for
reference), lr1, lr2. Metadata: the io file's keys, loss_reduction, the hyper-parameters used
(strings, lr1/lr2 also as exact float64 reprs), `formula`, `dropout` (the definition),
`dropout_seed`, `dropout_rates`, `dropout_sites` (the sites applied, in order). Before it is
written: every expected site (derived from the spec here) must be applied, in order, at both
steps; the kept fraction of every site must lie within DROPOUT_Z_MAX standard deviations of 1 - r;
the first DROPOUT_SCALAR_BITS mask bits of every site are recomputed by an independent scalar
pure-Python implementation (scalar_keep_bits); with the hook installed, the eval-mode loss must
equal the io loss exactly (float64) and the train-mode loss must differ from it; the step-1
gradients are checked against central finite differences of the dropout loss; step 1 is
re-derived by hand from the weights file, grad1 and lr1 (m = (1-b1) g, v = (1-b2) g^2, bias
correction, p -= lr1 * mhat / (sqrt(vhat) + eps)) and must match torch's step-1 parameters (see
hand_adam_step1); loss2 < loss1. The generator exits non-zero if any check fails.

adam-clip and adam-adamw files (VARIANT_SPECS only, see generate_adam_variant): the same two
steps with the gradients clipped to a global norm of CLIP_NORM by torch.nn.utils.clip_grad_norm_
before each Adam step, and with torch.optim.AdamW(weight_decay=WEIGHT_DECAY).

Run from anywhere: /usr/bin/python3 tests/reference/gen_golden.py
"""
import copy
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
ADAM_STEPS = 2
# Optimizer variants: the specs that get adam-clip and adam-adamw files; gradient clipping's max
# norm (training.clip_norm), below both steps' norms on the golden batch so that both are
# clipped, and AdamW's weight decay (training.weight_decay).
VARIANT_SPECS = ["tiny"]
CLIP_NORM = 0.5
WEIGHT_DECAY = 0.1
DROPOUT_Z_MAX = 5.0  # allowed |kept fraction - (1 - r)| in binomial standard deviations
DROPOUT_SCALAR_BITS = 5  # mask bits per site re-derived by the independent scalar implementation
# Required agreement of the hand-written step-1 Adam update (from the weights and grads files)
# with torch's step-1 parameters: max |hand - torch| / max |torch| per tensor.
HAND_ADAM_RTOL = 1e-12
# Used only if a spec's training section lacks a key (load_spec normally fills these).
TRAINING_DEFAULTS = {"label_smoothing": 0.1, "adam_beta1": 0.9, "adam_beta2": 0.98,
                     "adam_eps": 1e-9, "warmup_steps": 4000, "lr_scale": 1.0}
ADAM_FORMULA = (
    "{steps} steps t=1..{steps} on the io batch, float64, training mode with the deterministic "
    "counter-based dropout of metadata `dropout` (SEED=dropout_seed, STEP=t), from the weights "
    "file: lr_t = lr_scale * d_model^-0.5 * min(t^-0.5, t * warmup_steps^-1.5) "
    "(lr_scale={lr_scale}, d_model={d_model}, warmup_steps={warmup}); each step: loss and "
    "gradients at the current parameters, then torch.optim.Adam.step with lr=lr_t, i.e. "
    "PyTorch's bias-corrected Adam: m = b1*m + (1-b1)*g, v = b2*v + (1-b2)*g^2, "
    "p -= lr_t * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) with b1={b1}, b2={b2}, eps={eps}, "
    "weight_decay=0, amsgrad=False, m=v=0 initially; tied tables are one parameter (one Adam "
    "state). step<t>/<p>: parameters after step t; grad<t>/<p>: gradients at step t (step-t "
    "dropout); loss<t>: loss before step t's update with step-t dropout; eval_loss1: eval-mode "
    "loss at the weights (= io loss)")
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


def training_hparams(spec):
    """The spec's training section with TRAINING_DEFAULTS for any missing key."""
    tr = dict(TRAINING_DEFAULTS)
    tr.update({k: v for k, v in spec.get("training", {}).items() if v is not None})
    return tr


def lr_at(step, d_model, tr):
    """Noam schedule: lr_scale * d_model^-0.5 * min(t^-0.5, t * warmup^-1.5)."""
    return float(tr["lr_scale"]) * d_model ** -0.5 * min(
        step ** -0.5, step * int(tr["warmup_steps"]) ** -1.5)


def dropout_seed(spec):
    return int(spec["training"].get("seed", 1))


def train_copy(model64, spec, record=False):
    """Deep copy of model64 in training mode with a CounterDropout hook (step 1) installed."""
    model = copy.deepcopy(model64)
    hook = ref.CounterDropout(dropout_seed(spec), step=1, record=record)
    model.set_dropout_fn(hook)
    model.train()
    return model, hook


def run_adam(model64, batch, spec, tr, clip_norm=0.0, norms=None, weight_decay=0.0):
    """ADAM_STEPS torch.optim.Adam steps, training mode with deterministic dropout (STEP = t), on
    a deep copy of model64 (left untouched). Returns (params after each step, grads at each step,
    loss before each step, lr of each step, the dropout hook with its log); the dicts are keyed by
    parameter name and hold float64 tensors. With clip_norm > 0 the gradients are clipped by
    torch.nn.utils.clip_grad_norm_(max_norm=clip_norm) before each step (the recorded grads are
    the unclipped ones) and each step's total norm before clipping is appended to `norms`. With
    weight_decay > 0 the optimizer is torch.optim.AdamW (decoupled decay, the same lr) instead."""
    d_model = spec["model"]["d_model"]
    model, hook = train_copy(model64, spec, record=True)
    named = dict(model.named_parameters())  # tied tables appear once: one parameter, one state
    kind = torch.optim.AdamW if weight_decay > 0 else torch.optim.Adam
    opt = kind(model.parameters(), lr=lr_at(1, d_model, tr),
               betas=(float(tr["adam_beta1"]), float(tr["adam_beta2"])),
               eps=float(tr["adam_eps"]), weight_decay=weight_decay, amsgrad=False,
               foreach=False, maximize=False)
    params, grads, losses, lrs = [], [], [], []
    for t in range(1, ADAM_STEPS + 1):
        hook.step = t
        opt.zero_grad(set_to_none=True)
        _, loss = model(*batch)
        loss.backward()
        for p in named.values():
            if p.grad is None:  # unused parameter: its gradient is exactly zero
                p.grad = torch.zeros_like(p)
        grads.append({k: p.grad.detach().clone() for k, p in named.items()})
        if clip_norm > 0:
            norms.append(float(torch.nn.utils.clip_grad_norm_(list(named.values()), clip_norm)))
        losses.append(loss.item())
        lr = lr_at(t, d_model, tr)
        for group in opt.param_groups:
            group["lr"] = lr
        lrs.append(lr)
        opt.step()
        params.append({k: p.detach().clone() for k, p in named.items()})
    return params, grads, losses, lrs, hook


def expected_dropout_sites(m):
    """(name, rate) of every dropout site with rate > 0, in forward order, derived from the spec
    independently of transformer_ref's module naming."""
    sites = []

    def add(name, rate):
        if rate > 0.0:
            sites.append((name, float(rate)))

    def layer(prefix, sublayers):
        for sub in sublayers:
            if sub == "ffn":
                add(f"{prefix}.ffn.activation", m["activation_dropout"])
            else:
                add(f"{prefix}.{sub}.probs", m["attention_dropout"])
            add(f"{prefix}.{sub}.residual", m["dropout"])

    add("encoder.embed", m["dropout"])
    for i in range(m["encoder_layers"]):
        layer(f"encoder.layers.{i}", ("self_attn", "ffn"))
    add("decoder.embed", m["dropout"])
    for i in range(m["decoder_layers"]):
        layer(f"decoder.layers.{i}", ("self_attn", "cross_attn", "ffn"))
    return sites


def scalar_keep_bits(seed, step, name, rate, count):
    """Independent straightforward scalar implementation of the dropout formula (pure Python
    ints, % 2**64): (keep bits, 24-bit u values) of flat indices 0..count-1."""
    mod = 2 ** 64

    def mix(z):
        z = (z + 0x9E3779B97F4A7C15) % mod
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % mod
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % mod
        return z ^ (z >> 31)

    h = 0xCBF29CE484222325
    for byte in name.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) % mod
    key = mix(seed ^ mix(h ^ mix(step)))
    threshold = round(rate * 2 ** 24)
    us = [mix((key + i * 0x9E3779B97F4A7C15) % mod) >> 40 for i in range(count)]
    return [1 if u >= threshold else 0 for u in us], us


def check_dropout(name, spec, hook):
    """Checks the dropout actually applied during the Adam run (hook.log): expected sites in
    order at every step, kept fractions (DROPOUT_Z_MAX), and the first DROPOUT_SCALAR_BITS mask
    bits of every site against scalar_keep_bits. Returns True if all hold."""
    ok = True
    want = expected_dropout_sites(spec["model"])
    seed = dropout_seed(spec)
    by_step = {t: [e for e in hook.log if e[0] == t] for t in range(1, ADAM_STEPS + 1)}
    if len(hook.log) != sum(len(v) for v in by_step.values()):
        ok = False
        print(f"  {name}: dropout applied at an unexpected step")
    worst_z, worst_site = 0.0, None
    fractions = {}
    for t, entries in by_step.items():
        got = [(n, r) for _, n, r, _ in entries]
        if got != want:
            ok = False
            print(f"  {name}: step {t}: dropout sites {got} != expected {want}")
        for _, site, rate, keep in entries:
            n = keep.size
            frac = float(keep.mean())
            z = (frac - (1.0 - rate)) / np.sqrt(rate * (1.0 - rate) / n)
            fractions.setdefault(site, {})[t] = (frac, n, z)
            if abs(z) > abs(worst_z):
                worst_z, worst_site = z, f"{site}@{t}"
            if abs(z) > DROPOUT_Z_MAX:
                ok = False
                print(f"  {name}: {site} step {t}: kept fraction {frac:.4f} of {n} is {z:+.2f} "
                      f"sd from {1.0 - rate} (max {DROPOUT_Z_MAX})")
            bits, _ = scalar_keep_bits(seed, t, site, rate, DROPOUT_SCALAR_BITS)
            vec = [int(b) for b in keep.reshape(-1)[:DROPOUT_SCALAR_BITS]]
            if bits != vec:
                ok = False
                print(f"  {name}: {site} step {t}: first mask bits {vec} != scalar {bits}")
    for site, per in fractions.items():
        print(f"  {name}: keep {site:40s} n={per[1][1]:4d}  " + "  ".join(
            f"step{t} {f:.4f} ({z:+.2f} sd)" for t, (f, _, z) in sorted(per.items())))
    kept = sum(int(e[3].sum()) for e in hook.log)
    total = sum(e[3].size for e in hook.log)
    print(f"  {name}: dropout seed {seed}, {len(want)} sites x {ADAM_STEPS} steps, overall kept "
          f"{kept}/{total} = {kept / max(total, 1):.4f}, worst {worst_z:+.2f} sd ({worst_site}); "
          f"first {DROPOUT_SCALAR_BITS} bits of every site == scalar implementation: "
          f"{'yes' if ok else 'NO'}  {'ok' if ok else 'FAIL'}")
    return ok


def adam_step1_numpy(w, g, lr, b1, b2, eps):
    """One bias-corrected Adam step from m = v = 0, written out in float64 numpy."""
    w = w.astype(np.float64)
    g = g.astype(np.float64)
    m = (1.0 - b1) * g
    v = (1.0 - b2) * g * g
    mhat = m / (1.0 - b1)
    vhat = v / (1.0 - b2)
    return w - lr * mhat / (np.sqrt(vhat) + eps)


def hand_adam_step1(name, weights_path, step1, grads1, lr1, tr):
    """Re-derives Adam step 1 by hand (adam_step1_numpy) from the weights file and lr1, and
    compares it with torch's step-1 parameters, per tensor as max|hand - torch| / max|torch|:
      exact: gradients = the float64 step-1 gradients (with step-1 dropout) of the Adam run;
             required rel <= HAND_ADAM_RTOL.
      file:  gradients = those rounded to float32 (the stored grad1/ values). The rounding
             (relative 2^-24) moves lr*g/(|g|+eps) by at most lr*2^-24*eps*|g|/(|g|+eps)^2 <=
             lr*2^-26 (worst at |g| = eps), so required max|hand - torch| <= lr1*2^-24 +
             1e-15*max|torch|.
    Returns True if all hold."""
    w_file = safetensors_io.load(weights_path)
    b1, b2, eps = float(tr["adam_beta1"]), float(tr["adam_beta2"]), float(tr["adam_eps"])
    if not (sorted(w_file) == sorted(step1) == sorted(grads1)):
        print(f"  {name}: hand Adam: parameter names differ between files and the Adam run")
        return False
    ok = True
    worst = {"exact": (0.0, None), "file": (0.0, None)}
    for pname in sorted(step1):
        torch_p = step1[pname].numpy()
        scale = max(float(np.abs(torch_p).max()), 1e-300)
        g64 = grads1[pname].numpy()
        for kind, g in (("exact", g64), ("file", g64.astype(np.float32))):
            hand = adam_step1_numpy(w_file[pname], g, lr1, b1, b2, eps)
            diff = float(np.abs(hand - torch_p).max())
            rel = diff / scale
            if worst[kind][1] is None or rel > worst[kind][0]:
                worst[kind] = (rel, pname)
            good = rel <= HAND_ADAM_RTOL if kind == "exact" else \
                diff <= lr1 * 2.0 ** -24 + 1e-15 * scale
            if not good:
                ok = False
                print(f"  {name}: hand Adam step 1 ({kind}) mismatch in {pname}: "
                      f"max|diff| {diff:.3e} rel {rel:.3e}")
    print(f"  {name}: hand Adam step 1 (weights file + grad1) vs torch, {len(step1)} tensors, "
          f"worst max|hand-torch|/max|torch|: f64 grad1 {worst['exact'][0]:.3e} "
          f"({worst['exact'][1]}, tol {HAND_ADAM_RTOL:g}); f32 grad1 "
          f"{worst['file'][0]:.3e} ({worst['file'][1]}, abs tol lr1*2^-24 = "
          f"{lr1 * 2.0 ** -24:.3e})  {'ok' if ok else 'FAIL'}")
    return ok


def check_dropout_grads(name, model64, batch, spec, grads1, eval_loss):
    """On a fresh training copy with the step-1 hook: the eval-mode loss must equal the io loss
    exactly, the train-mode loss must differ from it, the gradients must equal the Adam run's
    step-1 gradients bit-exactly, and agree with finite differences (check_grads_fd)."""
    model, hook = train_copy(model64, spec)
    model.eval()
    with torch.no_grad():
        ev = model(*batch)[1].item()
    model.train()
    with torch.no_grad():
        tr_loss = model(*batch)[1].item()
    ok = ev == eval_loss and tr_loss != eval_loss
    print(f"  {name}: with the dropout hook: eval-mode loss {ev!r} "
          f"{'==' if ev == eval_loss else '!='} io loss; train-mode step-1 loss {tr_loss!r} "
          f"{'differs' if tr_loss != eval_loss else 'EQUALS the eval loss'}  "
          f"{'ok' if ok else 'FAIL'}")
    g = compute_grads(f"{name} (dropout step 1)", model, batch, tr_loss)
    same = sorted(g) == sorted(grads1) and all(torch.equal(g[k], grads1[k]) for k in g)
    ok &= same
    if not same:
        print(f"  {name}: step-1 dropout gradients not reproducible on a fresh copy: FAIL")
    ok &= check_grads_fd(f"{name} (dropout step 1)", model, g, batch)
    return ok


def step_tensors(weights, params, grads):
    """step1/, step2/ (parameters after each step) and grad1/, grad2/ (gradients at each step)
    for every parameter of the weights file, as float32."""
    tensors = {}
    for k in weights:
        for t in range(2):
            tensors[f"step{t + 1}/{k}"] = params[t][k].to(torch.float32).numpy()
            tensors[f"grad{t + 1}/{k}"] = grads[t][k].to(torch.float32).numpy()
    return tensors


def generate_adam(name, model64, batch, spec, weights, eval_loss, meta, out_dir):
    """Writes <name>.adam.safetensors after its self-checks; returns False if one fails."""
    tr = training_hparams(spec)
    d_model = spec["model"]["d_model"]
    params, grads, losses, lrs, hook = run_adam(model64, batch, spec, tr)
    ok = True
    for pname, p in model64.named_parameters():  # the Adam run must not touch the golden model
        if not np.array_equal(p.detach().numpy(), weights[pname].astype(np.float64)):
            raise RuntimeError(f"{name}: Adam run modified {pname} of the golden model")
    loss1, loss2 = losses[0], losses[1]
    lr1, lr2 = lrs[0], lrs[1]
    ok &= loss2 < loss1
    step1_max = max(float(np.abs(params[0][k].numpy() - weights[k].astype(np.float64)).max())
                    for k in weights)
    step2_max = max(float(np.abs(params[1][k].numpy() - params[0][k].numpy()).max())
                    for k in weights)
    print(f"{name}: adam (train mode, counter dropout) lr1 = {lr1:.9e}  lr2 = {lr2:.9e}  "
          f"loss1 = {loss1:.9f}  loss2 = {loss2:.9f}  "
          f"({'decreased' if loss2 < loss1 else 'NOT decreased: FAIL'})  "
          f"eval_loss1 (io) = {eval_loss:.9f}")
    print(f"  {name}: max|step1 - weights| = {step1_max:.6e}  max|step2 - step1| = "
          f"{step2_max:.6e}")
    ok &= check_dropout(name, spec, hook)
    ok &= check_dropout_grads(name, model64, batch, spec, grads[0], eval_loss)
    for pname, p in model64.named_parameters():
        if not np.array_equal(p.detach().numpy(), weights[pname].astype(np.float64)):
            raise RuntimeError(f"{name}: dropout checks modified {pname} of the golden model")
    ok &= hand_adam_step1(name, os.path.join(out_dir, f"{name}.weights.safetensors"), params[0],
                          grads[0], lr1, tr)
    tensors = step_tensors(weights, params, grads)
    for key, val in (("loss1", loss1), ("loss2", loss2), ("eval_loss1", eval_loss),
                     ("lr1", lr1), ("lr2", lr2)):
        tensors[key] = np.asarray(val, dtype=np.float32).reshape(())
    bad = [k for k, v in tensors.items() if not np.all(np.isfinite(v))]
    if bad:
        ok = False
        print(f"  {name}: non-finite values in {bad}")
    if not ok:
        print(f"{name}: Adam check FAILED, {name}.adam.safetensors not written")
        return False
    m = spec["model"]
    sites = [e[1] for e in hook.log if e[0] == 1]
    adam_meta = dict(meta, steps=str(ADAM_STEPS), d_model=str(d_model),
                     adam_beta1=repr(float(tr["adam_beta1"])),
                     adam_beta2=repr(float(tr["adam_beta2"])),
                     adam_eps=repr(float(tr["adam_eps"])), weight_decay="0", amsgrad="false",
                     warmup_steps=str(int(tr["warmup_steps"])),
                     lr_scale=repr(float(tr["lr_scale"])),
                     label_smoothing=repr(float(tr["label_smoothing"])),
                     lr1=repr(lr1), lr2=repr(lr2), loss1=repr(loss1), loss2=repr(loss2),
                     eval_loss1=repr(eval_loss), mode="train",
                     dropout=ref.COUNTER_DROPOUT_DEFINITION,
                     dropout_seed=str(dropout_seed(spec)),
                     dropout_rates=(f"dropout={float(m['dropout'])!r} "
                                    f"attention_dropout={float(m['attention_dropout'])!r} "
                                    f"activation_dropout={float(m['activation_dropout'])!r}"),
                     dropout_sites=",".join(sites),
                     formula=ADAM_FORMULA.format(
                         steps=ADAM_STEPS, lr_scale=repr(float(tr["lr_scale"])), d_model=d_model,
                         warmup=int(tr["warmup_steps"]), b1=repr(float(tr["adam_beta1"])),
                         b2=repr(float(tr["adam_beta2"])), eps=repr(float(tr["adam_eps"]))))
    safetensors_io.save(os.path.join(out_dir, f"{name}.adam.safetensors"), tensors,
                        metadata=adam_meta)
    return True


def generate_adam_variant(name, model64, batch, spec, weights, meta, out_dir, variant):
    """Writes <name>.adam-<variant>.safetensors: the two Adam steps of generate_adam with
      clip:  the gradients clipped to a global norm of CLIP_NORM (torch.nn.utils.clip_grad_norm_
             before each step), for a spec with training.clip_norm = CLIP_NORM;
      adamw: torch.optim.AdamW with weight_decay = WEIGHT_DECAY (decoupled: p *= 1 - lr * wd, then
             the Adam step), for a spec with training.weight_decay = WEIGHT_DECAY.
    Keys as the adam file's (step1/, step2/, grad1/, grad2/ with the unclipped gradients, loss1,
    loss2, lr1, lr2) plus norm1, norm2 (each step's global gradient norm) and the variant's
    setting (clip_norm or weight_decay). Checks before writing (clip): both norms exceed CLIP_NORM
    by more than 10 % (every step is clipped) and differ from each other by more than 10 % (so
    step 2, which mixes both scaled gradients, differs from the unclipped run); always: the norm of
    the stored grad1/ equals norm1. Returns False if one fails."""
    tr = training_hparams(spec)
    norms = []
    clip = CLIP_NORM if variant == "clip" else 0.0
    decay = WEIGHT_DECAY if variant == "adamw" else 0.0
    params, grads, losses, lrs, _ = run_adam(model64, batch, spec, tr, clip_norm=clip, norms=norms,
                                             weight_decay=decay)
    for pname, p in model64.named_parameters():
        if not np.array_equal(p.detach().numpy(), weights[pname].astype(np.float64)):
            raise RuntimeError(f"{name}: the {variant} Adam run modified {pname} of the golden model")
    norms = norms or [float(np.sqrt(sum(float((g[k].numpy() ** 2).sum()) for k in weights)))
                      for g in grads]
    n1, n2 = norms
    g1 = float(np.sqrt(sum(float((grads[0][k].numpy() ** 2).sum()) for k in weights)))
    ok = abs(g1 - n1) <= 1e-12 * n1
    if variant == "clip":
        ok &= n1 > 1.1 * CLIP_NORM and n2 > 1.1 * CLIP_NORM and abs(n1 - n2) > 0.1 * max(n1, n2)
    setting = ("clip_norm", CLIP_NORM) if variant == "clip" else ("weight_decay", WEIGHT_DECAY)
    print(f"{name}: {variant} adam ({setting[0]} {setting[1]}) norm1 = {n1:.9f}  norm2 = {n2:.9f}  "
          f"|grad1| = {g1:.9f}  loss1 = {losses[0]:.9f}  loss2 = {losses[1]:.9f}  "
          f"{'ok' if ok else 'FAIL'}")
    tensors = step_tensors(weights, params, grads)
    for key, val in (("loss1", losses[0]), ("loss2", losses[1]), ("lr1", lrs[0]), ("lr2", lrs[1]),
                     ("norm1", n1), ("norm2", n2), setting):
        tensors[key] = np.asarray(val, dtype=np.float32).reshape(())
    out = f"{name}.adam-{variant}.safetensors"
    if not ok or not all(np.all(np.isfinite(v)) for v in tensors.values()):
        print(f"{name}: {variant} Adam check FAILED, {out} not written")
        return False
    how = ("torch.nn.utils.clip_grad_norm_(parameters, max_norm=clip_norm) after backward, before "
           "torch.optim.Adam.step()" if variant == "clip" else
           "torch.optim.AdamW(weight_decay=weight_decay) instead of torch.optim.Adam")
    safetensors_io.save(os.path.join(out_dir, out), tensors,
                        metadata=dict(meta, steps=str(ADAM_STEPS), norm1=repr(n1), norm2=repr(n2),
                                      mode="train", **{setting[0]: repr(setting[1]), "variant": how
                                                       + "; otherwise as the adam file's formula"}))
    return True


def print_dropout_crosscheck(spec):
    """The C++ cross-check figures: site encoder.embed, STEP=1, the spec's seed and dropout."""
    seed, rate = dropout_seed(spec), float(spec["model"]["dropout"])
    u = ref.counter_dropout_u(seed, 1, "encoder.embed", 16)
    keep = "".join(str(int(x)) for x in (u >= np.uint64(ref.counter_dropout_threshold(rate))))
    bits, us = scalar_keep_bits(seed, 1, "encoder.embed", rate, 16)
    same = keep == "".join(map(str, bits)) and [int(x) for x in u] == us
    print(f"{spec['name']}: cross-check encoder.embed SEED={seed} STEP=1 r={rate}: key = "
          f"0x{ref.counter_dropout_key(seed, 1, 'encoder.embed'):016x}  threshold = "
          f"{ref.counter_dropout_threshold(rate)}  keep[0..15] = {keep}  u[0..3] = "
          f"{[int(x) for x in u[:4]]}  (scalar implementation agrees: {'yes' if same else 'NO'})")
    return same


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

    # Adam: after every file above is written, on a deep copy, drawing nothing from any RNG.
    ok = print_dropout_crosscheck(spec)
    ok &= generate_adam(name, model64, batch, spec, weights, loss.item(), grads_meta, out_dir)
    if name in VARIANT_SPECS:
        for variant in ("clip", "adamw"):
            ok &= generate_adam_variant(name, model64, batch, spec, weights, grads_meta, out_dir, variant)
    return ok


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
