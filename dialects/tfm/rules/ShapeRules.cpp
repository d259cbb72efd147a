// The shape rule of every tfm op the runtime executes. Dims may be kDynamic (at compile time and
// when an artifact is loaded): a dynamic dim is compatible with anything and propagates. At run time
// the same rules see concrete shapes. Operand counts, element types, ranks and attribute ranges are
// checked before a rule runs (from the op table), so rules index operands freely.
#include "OpRules.h"

namespace tfm::rules::shape {
namespace {

int64_t merge(int64_t a, int64_t b) { return a == kDynamic ? b : a; }
std::string str(int64_t v) { return std::to_string(v); }

std::string mismatch(const char *what, const Dims &a, const Dims &b) {
  return std::string(what) + ": " + dimsStr(a) + " vs " + dimsStr(b);
}

// Equal ranks and compatible dims; `out` gets the merged shape.
bool join(const Dims &a, const Dims &b, Dims &out) {
  if (a.size() != b.size()) return false;
  out = a;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!compatible(a[i], b[i])) return false;
    out[i] = merge(a[i], b[i]);
  }
  return true;
}

// Columns [offset, offset + needed) of x's last dim (checked once the width is known).
std::string columns(const char *name, const Dims &x, int64_t offset, int64_t needed) {
  const int64_t width = x.back();
  if (width != kDynamic && offset + needed > width)
    return std::string(name) + " columns [" + str(offset) + ", " + str(offset + needed) + ") exceed its width " + str(width) +
           ": " + dimsStr(x);
  return "";
}

std::string rowsWithin(const char *what, int64_t rows, int64_t capacity) {
  if (rows != kDynamic && capacity != kDynamic && rows > capacity)
    return std::string(what) + " has " + str(rows) + " rows but the cache only " + str(capacity);
  return "";
}

// A step operand is a scalar (every row) or one position per row.
std::string stepPerRow(const Dims &step, int64_t rows) {
  if (step.empty() || compatible(step[0], rows)) return "";
  return "step must be a scalar or have one position per row (" + str(rows) + "), got " + dimsStr(step);
}

std::string lengthOne(const char *name, const Dims &x) {
  return compatible(x[1], 1) ? "" : std::string(name) + " must have length 1, got " + dimsStr(x);
}

}  // namespace

std::string sameAsFirst(const ShapeArgs &a, Dims &out) {
  out = a[0];
  return "";
}

std::string elementwise(const ShapeArgs &a, Dims &out) {
  return join(a[0], a[1], out) ? "" : mismatch("operands must have the same shape", a[0], a[1]);
}

std::string embedding(const ShapeArgs &a, Dims &out) {
  out = a[1];
  out.push_back(a[0][1]);
  return "";
}

std::string addPositions(const ShapeArgs &a, Dims &out) {
  const Dims &x = a[0], &table = a[1];
  if (!compatible(x[2], table[1])) return mismatch("model dim of x and of the position table differ", x, table);
  if (x[1] != kDynamic && table[0] != kDynamic && x[1] > table[0])
    return "sequence length " + str(x[1]) + " exceeds the " + str(table[0]) + " rows of the position table";
  out = x;
  out[2] = merge(x[2], table[1]);
  return "";
}

std::string addPositionAt(const ShapeArgs &a, Dims &out) {
  const Dims &x = a[0], &table = a[1];
  if (!compatible(x[1], 1) || !compatible(x[2], table[1])) return mismatch("x must be [B, 1, D] for a table [L, D]", x, table);
  if (std::string err = stepPerRow(a[2], x[0]); !err.empty()) return err;
  out = x;
  out[2] = merge(x[2], table[1]);
  return "";
}

std::string matmul(const ShapeArgs &a, Dims &out) {
  const Dims &x = a[0], &w = a[1];
  const bool transposeB = a.attrInt("transpose_b") != 0;
  const int64_t kb = transposeB ? w[1] : w[0], n = transposeB ? w[0] : w[1];
  if (!compatible(x.back(), kb))
    return mismatch(transposeB ? "contraction dims differ (a[..., M, K] vs b[N, K])" : "contraction dims differ (a[..., M, K] vs b[K, N])",
                    x, w);
  out = x;
  out.back() = n;
  return "";
}

std::string biasAdd(const ShapeArgs &a, Dims &out) {
  if (!compatible(a[0].back(), a[1][0])) return mismatch("bias must match the last dim of x", a[0], a[1]);
  out = a[0];
  out.back() = merge(a[0].back(), a[1][0]);
  return "";
}

namespace {
// x [..., N] normalised with gamma [N] and beta [N].
std::string normalised(const Dims &x, const Dims &gamma, const Dims &beta, Dims &out) {
  if (!compatible(x.back(), gamma[0])) return mismatch("gamma must match the last dim of x", x, gamma);
  if (!compatible(x.back(), beta[0])) return mismatch("beta must match the last dim of x", x, beta);
  out = x;
  out.back() = merge(merge(x.back(), gamma[0]), beta[0]);
  return "";
}
}  // namespace

std::string layerNorm(const ShapeArgs &a, Dims &out) { return normalised(a[0], a[1], a[2], out); }

std::string addLayerNorm(const ShapeArgs &a, Dims &out) {
  Dims sum;
  if (!join(a[0], a[1], sum)) return mismatch("operands must have the same shape", a[0], a[1]);
  return normalised(sum, a[2], a[3], out);
}

std::string splitHeads(const ShapeArgs &a, Dims &out) {
  const Dims &x = a[0];
  const int64_t heads = a.attrInt("heads");
  if (x[2] != kDynamic && x[2] % heads != 0)
    return "model dim " + str(x[2]) + " of " + dimsStr(x) + " is not divisible by heads = " + str(heads);
  out = {x[0], heads, x[1], x[2] == kDynamic ? kDynamic : x[2] / heads};
  return "";
}

std::string mergeHeads(const ShapeArgs &a, Dims &out) {
  const Dims &x = a[0];
  out = {x[0], x[2], x[1] == kDynamic || x[3] == kDynamic ? kDynamic : x[1] * x[3]};
  return "";
}

std::string batchMatmul(const ShapeArgs &a, Dims &out) {
  const Dims &x = a[0], &y = a[1];
  const bool transposeA = a.attrInt("transpose_a") != 0, transposeB = a.attrInt("transpose_b") != 0;
  const size_t r = x.size();
  if (y.size() != r) return mismatch("operands must have the same rank", x, y);
  for (size_t i = 0; i + 2 < r; ++i)
    if (!compatible(x[i], y[i])) return mismatch("batch dims differ", x, y);
  const int64_t m = transposeA ? x[r - 1] : x[r - 2], k = transposeA ? x[r - 2] : x[r - 1];
  const int64_t kb = transposeB ? y[r - 1] : y[r - 2], n = transposeB ? y[r - 2] : y[r - 1];
  if (!compatible(k, kb)) return mismatch("contraction dims differ", x, y);
  out = x;
  for (size_t i = 0; i + 2 < r; ++i) out[i] = merge(x[i], y[i]);
  out[r - 2] = m;
  out[r - 1] = n;
  return "";
}

std::string mask(const ShapeArgs &a, Dims &out) {
  const Dims &scores = a[0], &keep = a[1];
  if (!compatible(scores[0], keep[0]) || !compatible(scores[3], keep[1]))
    return mismatch("key_keep must be [B, Kv] for scores [B, H, Q, Kv]", scores, keep);
  out = scores;
  out[0] = merge(scores[0], keep[0]);
  out[3] = merge(scores[3], keep[1]);
  return "";
}

std::string xent(const ShapeArgs &a, Dims &out) {
  const Dims &logits = a[0], &targets = a[1];
  if (logits.size() != targets.size() + 1) return mismatch("logits must be targets' shape plus a vocabulary dim", logits, targets);
  for (size_t i = 0; i < targets.size(); ++i)
    if (!compatible(logits[i], targets[i])) return mismatch("logits must be targets' shape plus a vocabulary dim", logits, targets);
  out.clear();
  return "";
}

std::string xentGrad(const ShapeArgs &a, Dims &out) {
  std::string err = xent(a, out);
  if (!err.empty()) return err;
  out = a[0];
  return "";
}

std::string linear(const ShapeArgs &a, Dims &out) {
  const Dims &x = a[0], &w = a[1], &bias = a[2];
  if (!compatible(x.back(), w[1])) return mismatch("weight must be [N, K] for x [..., K]", x, w);
  if (!compatible(w[0], bias[0])) return mismatch("bias must be [N] for weight [N, K]", w, bias);
  out = x;
  out.back() = merge(w[0], bias[0]);
  if (a.size() == 4) {
    Dims joined;
    if (!join(out, a[3], joined)) return mismatch("residual must have the result's shape", out, a[3]);
    out = joined;
  }
  return "";
}

std::string fusedAttention(const ShapeArgs &a, Dims &out) {
  const Dims &q = a[0], &k = a[1], &v = a[2], &keep = a[3];
  const int64_t width = a.attrInt("heads") * a.attrInt("head_dim");
  for (auto [x, name] : {std::pair<const Dims *, const char *>{&q, "q"}, {&k, "k"}, {&v, "v"}}) {
    std::string err = columns(name, *x, a.attrInt((std::string(name) + "_offset").c_str()), width);
    if (!err.empty()) return err;
  }
  if (!compatible(q[0], k[0]) || !compatible(q[0], v[0]) || !compatible(q[0], keep[0]) || !compatible(k[0], v[0]) ||
      !compatible(k[0], keep[0]) || !compatible(v[0], keep[0]))
    return "batch dims of q, k, v, key_keep differ: " + dimsStr(q) + ", " + dimsStr(k) + ", " + dimsStr(v) + ", " + dimsStr(keep);
  if (!compatible(k[1], v[1]) || !compatible(k[1], keep[1]) || !compatible(v[1], keep[1]))
    return "key lengths of k, v, key_keep differ: " + dimsStr(k) + ", " + dimsStr(v) + ", " + dimsStr(keep);
  out = {merge(merge(q[0], k[0]), merge(v[0], keep[0])), q[1], width};
  return "";
}

std::string concat(const ShapeArgs &a, Dims &out) {
  out = a[0];
  for (size_t i = 1; i < a.size(); ++i) {
    const Dims &x = a[i];
    if (x.size() != out.size()) return mismatch("operands must have equal ranks", a[0], x);
    for (size_t d = 1; d < x.size(); ++d) {
      if (!compatible(out[d], x[d]))
        return "operand #" + str(int64_t(i)) + " " + dimsStr(x) + " differs from operand #0 " + dimsStr(a[0]) + " in dim " +
               str(int64_t(d)) + " (only dim 0 may differ)";
      out[d] = merge(out[d], x[d]);
    }
    out[0] = (out[0] == kDynamic || x[0] == kDynamic) ? kDynamic : out[0] + x[0];
  }
  return "";
}

std::string sliceLast(const ShapeArgs &a, Dims &out) {
  const Dims &x = a[0];
  const int64_t offset = a.attrInt("offset"), size = a.attrInt("size");
  if (x.back() != kDynamic && offset + size > x.back())
    return "columns [" + str(offset) + ", " + str(offset + size) + ") exceed the last dim of " + dimsStr(x);
  out = x;
  out.back() = size;
  return "";
}

std::string lastPosition(const ShapeArgs &a, Dims &out) {
  out = {a[0][0], 1, a[0][2]};
  return "";
}

std::string cacheReorder(const ShapeArgs &a, Dims &out) {
  std::string err = rowsWithin("parents", a[1][0], a[0][0]);
  if (err.empty()) err = stepPerRow(a[2], a[1][0]);
  out = a[0];
  return err;
}

std::string cacheWrite(const ShapeArgs &a, Dims &out) {
  const Dims &cache = a[0], &update = a[1];
  std::string err = rowsWithin("update", update[0], cache[0]);
  if (!err.empty()) return err;
  if (!compatible(update[1], 1)) return mismatch("update must be [R, 1, W] for a cache [Rc, Tc, D]", update, cache);
  if (err = stepPerRow(a[2], update[0]); !err.empty()) return err;
  if (cache[2] != kDynamic) err = columns("update", update, a.attrInt("update_offset"), cache[2]);
  if (!err.empty()) return err;
  out = cache;
  return "";
}

std::string gradAccumulate(const ShapeArgs &a, Dims &out) {
  Dims same;
  if (!join(a[0], a[1], same)) return mismatch("grad must have the accumulator's shape", a[1], a[0]);
  out = a[0];
  return "";
}

std::string cachedAttention(const ShapeArgs &a, Dims &out) {
  const Dims &q = a[0], &k = a[1], &v = a[2];
  const int64_t width = a.attrInt("heads") * a.attrInt("head_dim");
  std::string err = columns("q", q, a.attrInt("q_offset"), width);
  if (err.empty()) err = lengthOne("q", q);
  if (!err.empty()) return err;
  Dims kv;
  if (!compatible(k[2], width) || !join(k, v, kv))
    return mismatch("k_cache and v_cache must both be [Rc, Tc, heads * head_dim]", k, v);
  err = rowsWithin("q", q[0], kv[0]);
  if (err.empty()) err = stepPerRow(a[3], q[0]);
  out = {q[0], 1, width};
  return err;
}

std::string gatheredAttention(const ShapeArgs &a, Dims &out) {
  const Dims &q = a[0], &k = a[1], &v = a[2], &keep = a[3], &rows = a[4];
  const int64_t width = a.attrInt("heads") * a.attrInt("head_dim");
  for (auto [x, name] : {std::pair<const Dims *, const char *>{&q, "q"}, {&k, "k"}, {&v, "v"}}) {
    std::string err = columns(name, *x, a.attrInt((std::string(name) + "_offset").c_str()), width);
    if (!err.empty()) return err;
  }
  std::string err = lengthOne("q", q);
  if (!err.empty()) return err;
  if (!compatible(k[0], v[0]) || !compatible(k[1], v[1])) return mismatch("k and v must have the same [N, S]", k, v);
  if (!compatible(keep[0], k[0]) || !compatible(keep[1], k[1])) return mismatch("key_keep must be [N, S] of k", keep, k);
  if (!compatible(rows[0], q[0])) return mismatch("rows must have one entry per query row", rows, q);
  out = {merge(q[0], rows[0]), 1, width};
  return "";
}

std::string attentionWeights(const ShapeArgs &a, Dims &out) {
  const Dims &q = a[0], &k = a[1], &keep = a[2], &rows = a[3];
  const int64_t width = a.attrInt("heads") * a.attrInt("head_dim");
  std::string err = columns("q", q, a.attrInt("q_offset"), width);
  if (err.empty()) err = columns("k", k, a.attrInt("k_offset"), width);
  if (err.empty()) err = lengthOne("q", q);
  if (!err.empty()) return err;
  if (!compatible(keep[0], k[0]) || !compatible(keep[1], k[1])) return mismatch("key_keep must be [N, S] of k", keep, k);
  if (!compatible(rows[0], q[0])) return mismatch("rows must have one entry per query row", rows, q);
  out = {merge(q[0], rows[0]), 1, merge(k[1], keep[1])};
  return "";
}

std::string weightGrad(const ShapeArgs &a, Dims &out) {
  const Dims &dy = a[0], &x = a[1];
  if (dy.size() != x.size()) return mismatch("dy and x must have the same rank", dy, x);
  for (size_t i = 0; i + 1 < dy.size(); ++i)
    if (!compatible(dy[i], x[i])) return mismatch("dy and x must have the same leading dims", dy, x);
  out = {dy.back(), x.back()};
  return "";
}

std::string biasGrad(const ShapeArgs &a, Dims &out) {
  out = {a[0].back()};
  return "";
}

std::string layerNormGrad(const ShapeArgs &a, Dims &out) {
  const Dims &x = a[0], &gamma = a[1], &dy = a[2];
  if (!join(x, dy, out)) return mismatch("dy must have the input's shape", dy, x);
  if (!compatible(out.back(), gamma[0])) return mismatch("gamma must match the last dim of x", x, gamma);
  return "";
}

std::string layerNormGammaGrad(const ShapeArgs &a, Dims &out) {
  Dims joined;
  if (!join(a[0], a[1], joined)) return mismatch("dy must have the input's shape", a[1], a[0]);
  out = {joined.back()};
  return "";
}

std::string embeddingGrad(const ShapeArgs &a, Dims &out) {
  const Dims &ids = a[0], &dy = a[1];
  if (!compatible(dy[0], ids[0]) || !compatible(dy[1], ids[1])) return mismatch("dy must be [B, S, D] for ids [B, S]", dy, ids);
  out = {a.attrInt("num_rows"), dy[2]};
  return "";
}

std::string positionsGrad(const ShapeArgs &a, Dims &out) {
  const Dims &dy = a[0];
  const int64_t rows = a.attrInt("num_rows");
  if (dy[1] != kDynamic && dy[1] > rows)
    return "sequence length " + str(dy[1]) + " exceeds the " + str(rows) + " rows of the position table";
  out = {rows, dy[2]};
  return "";
}

std::string scalar(const ShapeArgs &, Dims &out) {
  out.clear();
  return "";
}

std::string adamUpdate(const ShapeArgs &a, Dims &out) {
  const Dims &param = a[0];
  Dims same;
  if (!join(param, a[1], same)) return mismatch("grad must have the parameter's shape", a[1], param);
  if (a[4] != param || a[5] != param)
    return "the moments " + dimsStr(a[4]) + ", " + dimsStr(a[5]) + " must have the parameter's shape " + dimsStr(param);
  out.clear();
  return "";
}

}  // namespace tfm::rules::shape
