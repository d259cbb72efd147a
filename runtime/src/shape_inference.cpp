#include "shape_inference.h"

#include "format.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

bool compatible(int64_t a, int64_t b) { return a == kDynamicDim || b == kDynamicDim || a == b; }
int64_t merge(int64_t a, int64_t b) { return a == kDynamicDim ? b : a; }

Status mismatch(const char *what, const Shape &a, const Shape &b) {
  return invalidArgument(cat(what, ": ", shapeStr(a), " vs ", shapeStr(b)));
}

Status embedding(const Shape &table, const Shape &ids, Shape &out) {
  out = ids;
  out.push_back(table[1]);
  return Status::OK();
}

Status addPositions(const Shape &x, const Shape &table, Shape &out) {
  if (!compatible(x[2], table[1])) return mismatch("model dim of x and of the position table differ", x, table);
  if (x[1] != kDynamicDim && table[0] != kDynamicDim && x[1] > table[0])
    return invalidArgument(cat("sequence length ", x[1], " exceeds the ", table[0], " rows of the position table"));
  out = x;
  out[2] = merge(x[2], table[1]);
  return Status::OK();
}

Status matmul(const Shape &a, const Shape &b, bool transposeB, Shape &out) {
  int64_t k = a.back();
  int64_t kb = transposeB ? b[1] : b[0];
  int64_t n = transposeB ? b[0] : b[1];
  if (!compatible(k, kb))
    return mismatch(transposeB ? "contraction dims differ (a[..., M, K] vs b[N, K])" : "contraction dims differ (a[..., M, K] vs b[K, N])", a, b);
  out = a;
  out.back() = n;
  return Status::OK();
}

Status lastDimBroadcast(const char *what, const Shape &x, const Shape &v, Shape &out) {
  if (!compatible(x.back(), v[0])) return mismatch(what, x, v);
  out = x;
  out.back() = merge(x.back(), v[0]);
  return Status::OK();
}

Status elementwise(const Shape &a, const Shape &b, Shape &out) {
  if (a.size() != b.size()) return mismatch("operands must have the same shape", a, b);
  out = a;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!compatible(a[i], b[i])) return mismatch("operands must have the same shape", a, b);
    out[i] = merge(a[i], b[i]);
  }
  return Status::OK();
}

Status layerNorm(const Shape &x, const Shape &g, const Shape &b, Shape &out) {
  if (!compatible(x.back(), g[0])) return mismatch("gamma must match the last dim of x", x, g);
  if (!compatible(x.back(), b[0])) return mismatch("beta must match the last dim of x", x, b);
  out = x;
  out.back() = merge(merge(x.back(), g[0]), b[0]);
  return Status::OK();
}

Status splitHeads(const Shape &x, int64_t heads, Shape &out) {
  int64_t d = x[2];
  if (d != kDynamicDim && d % heads != 0)
    return invalidArgument(cat("model dim ", d, " of ", shapeStr(x), " is not divisible by heads = ", heads));
  out = {x[0], heads, x[1], d == kDynamicDim ? kDynamicDim : d / heads};
  return Status::OK();
}

Status mergeHeads(const Shape &x, Shape &out) {
  int64_t hk = (x[1] == kDynamicDim || x[3] == kDynamicDim) ? kDynamicDim : x[1] * x[3];
  out = {x[0], x[2], hk};
  return Status::OK();
}

Status batchMatmul(const Shape &a, const Shape &b, bool transposeA, bool transposeB, Shape &out) {
  if (a.size() != b.size()) return mismatch("operands must have the same rank", a, b);
  size_t r = a.size();
  for (size_t i = 0; i + 2 < r; ++i)
    if (!compatible(a[i], b[i])) return mismatch("batch dims differ", a, b);
  const int64_t m = transposeA ? a[r - 1] : a[r - 2];
  int64_t k = transposeA ? a[r - 2] : a[r - 1];
  int64_t kb = transposeB ? b[r - 1] : b[r - 2];
  int64_t n = transposeB ? b[r - 2] : b[r - 1];
  if (!compatible(k, kb)) return mismatch("contraction dims differ", a, b);
  out = a;
  for (size_t i = 0; i + 2 < r; ++i) out[i] = merge(a[i], b[i]);
  out[r - 2] = m;
  out[r - 1] = n;
  return Status::OK();
}

// Gradient ops -------------------------------------------------------------------------------

// dy [..., N], x [..., K] with equal leading dims -> [N, K].
Status weightGrad(const Shape &dy, const Shape &x, Shape &out) {
  if (dy.size() != x.size()) return mismatch("dy and x must have the same rank", dy, x);
  for (size_t i = 0; i + 1 < dy.size(); ++i)
    if (!compatible(dy[i], x[i])) return mismatch("dy and x must have the same leading dims", dy, x);
  out = {dy.back(), x.back()};
  return Status::OK();
}

// [B, S, D] into a table of num_rows rows.
Status tableGrad(const Shape &dy, int64_t numRows, bool checkLength, Shape &out) {
  if (checkLength && dy[1] != kDynamicDim && dy[1] > numRows)
    return invalidArgument(cat("sequence length ", dy[1], " exceeds the ", numRows, " rows of the position table"));
  out = {numRows, dy.back()};
  return Status::OK();
}

Status mask(const Shape &scores, const Shape &keep, Shape &out) {
  if (!compatible(scores[0], keep[0]) || !compatible(scores[3], keep[1]))
    return mismatch("key_keep must be [B, Kv] for scores [B, H, Q, Kv]", scores, keep);
  out = scores;
  out[0] = merge(scores[0], keep[0]);
  out[3] = merge(scores[3], keep[1]);
  return Status::OK();
}

Status xent(const Shape &logits, const Shape &targets, Shape &out) {
  if (logits.size() != targets.size() + 1)
    return mismatch("logits must be targets' shape plus a vocabulary dim", logits, targets);
  for (size_t i = 0; i < targets.size(); ++i)
    if (!compatible(logits[i], targets[i]))
      return mismatch("logits must be targets' shape plus a vocabulary dim", logits, targets);
  out.clear();
  return Status::OK();
}

// q [B, Sq, Wq], k [B, Sk, Wk], v [B, Sk, Wv], key_keep [B, Sk] -> [B, Sq, heads * head_dim]; each
// head's column block [offset, offset + heads * head_dim) must lie inside its operand's width.
Status fusedAttention(const Node &node, const Shape &q, const Shape &k, const Shape &v, const Shape &keep, Shape &out) {
  const int64_t width = attrInt(node, "heads") * attrInt(node, "head_dim");
  const std::pair<const Shape *, const char *> operands[] = {{&q, "q"}, {&k, "k"}, {&v, "v"}};
  for (const auto &[x, name] : operands) {
    const int64_t offset = attrInt(node, (std::string(name) + "_offset").c_str());
    if ((*x)[2] != kDynamicDim && offset + width > (*x)[2])
      return invalidArgument(cat(name, " columns [", offset, ", ", offset + width, ") of heads * head_dim = ", width,
                                 " exceed its width: ", shapeStr(*x)));
  }
  if (!compatible(q[0], k[0]) || !compatible(q[0], v[0]) || !compatible(q[0], keep[0]) || !compatible(k[0], v[0]) ||
      !compatible(k[0], keep[0]) || !compatible(v[0], keep[0]))
    return invalidArgument(cat("batch dims of q, k, v, key_keep differ: ", shapeStr(q), ", ", shapeStr(k), ", ",
                               shapeStr(v), ", ", shapeStr(keep)));
  if (!compatible(k[1], v[1]) || !compatible(k[1], keep[1]) || !compatible(v[1], keep[1]))
    return invalidArgument(cat("key lengths of k, v, key_keep differ: ", shapeStr(k), ", ", shapeStr(v), ", ",
                               shapeStr(keep)));
  out = {merge(merge(q[0], k[0]), merge(v[0], keep[0])), q[1], width};
  return Status::OK();
}

// x [..., K], weight [N, K], bias [N], optional residual [..., N] -> [..., N].
Status linear(const std::vector<const Shape *> &in, Shape &out) {
  const Shape &x = *in[0], &w = *in[1], &bias = *in[2];
  if (!compatible(x.back(), w[1])) return mismatch("weight must be [N, K] for x [..., K]", x, w);
  if (!compatible(w[0], bias[0])) return mismatch("bias must be [N] for weight [N, K]", w, bias);
  out = x;
  out.back() = merge(w[0], bias[0]);
  if (in.size() == 4) {
    Shape joined;
    if (!elementwise(out, *in[3], joined).ok()) return mismatch("residual must have the result's shape", out, *in[3]);
    out = joined;
  }
  return Status::OK();
}

// Along axis 0; trailing dims must agree. A dynamic leading dim makes the result's dynamic.
Status concat(const std::vector<const Shape *> &in, Shape &out) {
  out = *in[0];
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape &x = *in[i];
    if (x.size() != out.size()) return mismatch("operands must have equal ranks", *in[0], x);
    for (size_t d = 1; d < x.size(); ++d) {
      if (!compatible(out[d], x[d]))
        return invalidArgument(cat("operand #", i, " ", shapeStr(x), " differs from operand #0 ", shapeStr(*in[0]),
                                   " in dim ", d, " (only dim 0 may differ)"));
      out[d] = merge(out[d], x[d]);
    }
    out[0] = (out[0] == kDynamicDim || x[0] == kDynamicDim) ? kDynamicDim : out[0] + x[0];
  }
  return Status::OK();
}

Status sliceLast(const Shape &x, int64_t offset, int64_t size, Shape &out) {
  if (x.back() != kDynamicDim && offset + size > x.back())
    return invalidArgument(cat("columns [", offset, ", ", offset + size, ") exceed the last dim of ", shapeStr(x)));
  out = x;
  out.back() = size;
  return Status::OK();
}

// Incremental decoding ------------------------------------------------------------------------

Status columns(const char *what, int64_t width, int64_t offset, int64_t needed) {
  if (offset < 0 || (width != kDynamicDim && offset + needed > width))
    return invalidArgument(cat(what, " columns [", offset, ", ", offset + needed, ") exceed its width ", width));
  return Status::OK();
}

Status rowsWithin(const char *what, int64_t rows, int64_t capacity) {
  if (rows != kDynamicDim && capacity != kDynamicDim && rows > capacity)
    return invalidArgument(cat(what, " has ", rows, " rows but the cache only ", capacity));
  return Status::OK();
}

Status cacheReorder(const Shape &cache, const Shape &parents, Shape &out) {
  TFMRT_RETURN_IF_ERROR(rowsWithin("parents", parents[0], cache[0]));
  out = cache;
  return Status::OK();
}

Status cacheWrite(const Shape &cache, const Shape &update, Shape &out) {
  TFMRT_RETURN_IF_ERROR(rowsWithin("update", update[0], cache[0]));
  if (!compatible(update[1], 1) || !compatible(update[2], cache[2]))
    return mismatch("update must be [R, 1, D] for a cache [Rc, Tc, D]", update, cache);
  out = cache;
  return Status::OK();
}

Status cachedAttention(const Node &node, const Shape &q, const Shape &k, const Shape &v, Shape &out) {
  const int64_t hd = attrInt(node, "heads") * attrInt(node, "head_dim");
  if (attrInt(node, "heads") <= 0 || attrInt(node, "head_dim") <= 0)
    return invalidArgument("heads and head_dim must be positive");
  TFMRT_RETURN_IF_ERROR(columns("q", q[2], attrInt(node, "q_offset"), hd));
  if (!compatible(q[1], 1)) return invalidArgument(cat("q must have length 1, got ", shapeStr(q)));
  if (!compatible(k[2], hd) || k != v) return mismatch("k_cache and v_cache must both be [Rc, Tc, heads * head_dim]", k, v);
  TFMRT_RETURN_IF_ERROR(rowsWithin("q", q[0], k[0]));
  out = {q[0], 1, hd};
  return Status::OK();
}

Status gatheredAttention(const Node &node, const Shape &q, const Shape &k, const Shape &v, const Shape &keep,
                         const Shape &rows, Shape &out) {
  const int64_t hd = attrInt(node, "heads") * attrInt(node, "head_dim");
  if (attrInt(node, "heads") <= 0 || attrInt(node, "head_dim") <= 0)
    return invalidArgument("heads and head_dim must be positive");
  TFMRT_RETURN_IF_ERROR(columns("q", q[2], attrInt(node, "q_offset"), hd));
  TFMRT_RETURN_IF_ERROR(columns("k", k[2], attrInt(node, "k_offset"), hd));
  TFMRT_RETURN_IF_ERROR(columns("v", v[2], attrInt(node, "v_offset"), hd));
  if (!compatible(q[1], 1)) return invalidArgument(cat("q must have length 1, got ", shapeStr(q)));
  if (!compatible(k[0], v[0]) || !compatible(k[1], v[1])) return mismatch("k and v must have the same [N, S]", k, v);
  if (!compatible(keep[0], k[0]) || !compatible(keep[1], k[1])) return mismatch("key_keep must be [N, S] of k", keep, k);
  if (!compatible(rows[0], q[0])) return mismatch("rows must have one entry per query row", rows, q);
  out = {merge(q[0], rows[0]), 1, hd};
  return Status::OK();
}

}  // namespace

Status inferShape(const Node &node, const std::vector<const Shape *> &in, Shape &out) {
  const std::string &op = node.op;
  if (op == "tfm.embedding") return embedding(*in[0], *in[1], out);
  if (op == "tfm.add_positions") return addPositions(*in[0], *in[1], out);
  if (op == "tfm.matmul") return matmul(*in[0], *in[1], attrInt(node, "transpose_b") != 0, out);
  if (op == "tfm.bias_add") return lastDimBroadcast("bias must match the last dim of x", *in[0], *in[1], out);
  if (op == "tfm.add") return elementwise(*in[0], *in[1], out);
  if (op == "tfm.layer_norm") return layerNorm(*in[0], *in[1], *in[2], out);
  if (op == "tfm.split_heads") return splitHeads(*in[0], attrInt(node, "heads"), out);
  if (op == "tfm.merge_heads") return mergeHeads(*in[0], out);
  if (op == "tfm.batch_matmul")
    return batchMatmul(*in[0], *in[1], attrInt(node, "transpose_a") != 0, attrInt(node, "transpose_b") != 0, out);
  if (op == "tfm.mask") return mask(*in[0], *in[1], out);
  if (op == "tfm.label_smoothed_xent") return xent(*in[0], *in[1], out);
  if (op == "tfm.fused_attention") return fusedAttention(node, *in[0], *in[1], *in[2], *in[3], out);
  if (op == "tfm.linear") return linear(in, out);
  if (op == "tfm.cache_reorder") return cacheReorder(*in[0], *in[1], out);
  if (op == "tfm.cache_write") return cacheWrite(*in[0], *in[1], out);
  if (op == "tfm.cached_attention") return cachedAttention(node, *in[0], *in[1], *in[2], out);
  if (op == "tfm.gathered_attention") return gatheredAttention(node, *in[0], *in[1], *in[2], *in[3], *in[4], out);
  if (op == "tfm.add_position_at") {
    if (!compatible((*in[0])[1], 1) || !compatible((*in[0])[2], (*in[1])[1]))
      return mismatch("x must be [B, 1, D] for a table [L, D]", *in[0], *in[1]);
    out = *in[0];
    return Status::OK();
  }
  if (op == "tfm.add_layer_norm") {
    Shape sum;
    TFMRT_RETURN_IF_ERROR(elementwise(*in[0], *in[1], sum));
    return layerNorm(sum, *in[2], *in[3], out);
  }
  if (op == "tfm.concat") return concat(in, out);
  if (op == "tfm.slice_last") return sliceLast(*in[0], attrInt(node, "offset"), attrInt(node, "size"), out);
  if (op == "tfm.weight_grad") return weightGrad(*in[0], *in[1], out);
  if (op == "tfm.bias_grad") {
    out = {in[0]->back()};
    return Status::OK();
  }
  if (op == "tfm.relu_grad" || op == "tfm.gelu_grad" || op == "tfm.softmax_grad") return elementwise(*in[0], *in[1], out);
  if (op == "tfm.layer_norm_grad") {
    TFMRT_RETURN_IF_ERROR(elementwise(*in[0], *in[2], out));
    if (!compatible(out.back(), (*in[1])[0])) return mismatch("gamma must match the last dim of x", out, *in[1]);
    return Status::OK();
  }
  if (op == "tfm.layer_norm_gamma_grad") {
    TFMRT_RETURN_IF_ERROR(elementwise(*in[0], *in[1], out));
    out = {out.back()};
    return Status::OK();
  }
  if (op == "tfm.embedding_grad") {
    if (!compatible((*in[1])[0], (*in[0])[0]) || !compatible((*in[1])[1], (*in[0])[1]))
      return mismatch("dy must be [B, S, D] for ids [B, S]", *in[1], *in[0]);
    return tableGrad(*in[1], attrInt(node, "num_rows"), false, out);
  }
  if (op == "tfm.positions_grad") return tableGrad(*in[0], attrInt(node, "num_rows"), true, out);
  if (op == "tfm.label_smoothed_xent_grad") {
    TFMRT_RETURN_IF_ERROR(xent(*in[0], *in[1], out));
    out = *in[0];
    return Status::OK();
  }
  if (op == "tfm.last_position") {
    out = {(*in[0])[0], 1, (*in[0])[2]};
    return Status::OK();
  }
  if (op == "tfm.lr_schedule") {
    out.clear();
    return Status::OK();
  }
  if (op == "tfm.adam_update") {
    Shape same;
    TFMRT_RETURN_IF_ERROR(elementwise(*in[0], *in[1], same));
    if (*in[4] != *in[0] || *in[5] != *in[0])
      return invalidArgument(cat("the moments ", shapeStr(*in[4]), ", ", shapeStr(*in[5]), " must have the parameter's shape ",
                                 shapeStr(*in[0])));
    out.clear();
    return Status::OK();
  }
  if (op == "tfm.scale" || op == "tfm.relu" || op == "tfm.gelu" || op == "tfm.softmax" || op == "tfm.log_softmax" ||
      op == "tfm.dropout" ||
      op == "tfm.padding_mask") {
    out = *in[0];
    return Status::OK();
  }
  return unimplemented(cat("no shape function for op '", op, "'"));
}

bool shapesCompatible(const Shape &declared, const Shape &inferred) {
  if (declared.size() != inferred.size()) return false;
  for (size_t i = 0; i < declared.size(); ++i)
    if (!compatible(declared[i], inferred[i])) return false;
  return true;
}

}  // namespace tfmrt
