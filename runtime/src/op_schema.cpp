#include "op_schema.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "format.h"

namespace tfmrt {
namespace {

using K = AttrValue::Kind;
constexpr int kAny = int(kMaxRank);

std::vector<OpSchema> buildSchemas() {
  const DType F = DType::F32, I = DType::I32, B = DType::Bool;
  // How the runtime may store a constant GEMM weight (selects the kernel's Layout).
  const AttrSpec weightLayout{"weight_layout", K::String, false, 0, "plain", {"plain", "packed"}};
  return {
      {"tfm.embedding", {{"table", F, 2, 2}, {"ids", I, 1, kAny - 1}}, F, {}},
      {"tfm.add_positions", {{"x", F, 3, 3}, {"table", F, 2, 2}}, F, {}},
      {"tfm.scale", {{"x", F, 0, kAny}}, F, {{"factor", K::Float, true, 0}}},
      {"tfm.matmul", {{"a", F, 2, kAny}, {"b", F, 2, 2}}, F, {{"transpose_b", K::Int, false, 0}, weightLayout}},
      {"tfm.bias_add", {{"x", F, 1, kAny}, {"bias", F, 1, 1}}, F, {}},
      {"tfm.relu", {{"x", F, 0, kAny}}, F, {}},
      {"tfm.gelu", {{"x", F, 0, kAny}}, F, {}},
      {"tfm.add", {{"a", F, 0, kAny}, {"b", F, 0, kAny}}, F, {}},
      {"tfm.layer_norm", {{"x", F, 1, kAny}, {"gamma", F, 1, 1}, {"beta", F, 1, 1}}, F,
       {{"epsilon", K::Float, false, 1e-5}}},
      {"tfm.split_heads", {{"x", F, 3, 3}}, F, {{"heads", K::Int, true, 0}}},
      {"tfm.merge_heads", {{"x", F, 4, 4}}, F, {}},
      {"tfm.batch_matmul", {{"a", F, 3, kAny}, {"b", F, 3, kAny}}, F,
       {{"transpose_b", K::Int, false, 0}, {"transpose_a", K::Int, false, 0}}},
      {"tfm.padding_mask", {{"ids", I, 1, kAny}}, B, {{"pad_id", K::Int, true, 0}}},
      {"tfm.mask", {{"scores", F, 4, 4}, {"key_keep", B, 2, 2}}, F, {{"causal", K::Int, false, 0}}},
      {"tfm.softmax", {{"x", F, 1, kAny}}, F, {}},
      {"tfm.log_softmax", {{"x", F, 1, kAny}}, F, {}},
      {"tfm.dropout", {{"x", F, 0, kAny}, {"step", I, 0, 0, Arity::Optional}}, F,
       {{"rate", K::Float, false, 0}, {"seed", K::Int, false, 0}, {"site", K::String, false, 0, ""}}},
      {"tfm.label_smoothed_xent", {{"logits", F, 2, kAny}, {"targets", I, 1, kAny - 1}}, F,
       {{"smoothing", K::Float, false, 0}, {"pad_id", K::Int, true, 0}}},
      // Fused ops (dialects/tfm/README.md, "Fused ops").
      {"tfm.fused_attention", {{"q", F, 3, 3}, {"k", F, 3, 3}, {"v", F, 3, 3}, {"key_keep", B, 2, 2}}, F,
       {{"heads", K::Int, true, 0}, {"head_dim", K::Int, true, 0}, {"q_offset", K::Int, true, 0},
        {"k_offset", K::Int, true, 0}, {"v_offset", K::Int, true, 0}, {"scale", K::Float, true, 0},
        {"causal", K::Int, false, 0}, {"dropout_rate", K::Float, false, 0}}},
      {"tfm.linear", {{"x", F, 1, kAny}, {"weight", F, 2, 2}, {"bias", F, 1, 1}, {"residual", F, 1, kAny, Arity::Optional}},
       F, {{"activation", K::String, false, 0, "none", {"none", "relu", "gelu"}}, weightLayout}},
      {"tfm.add_layer_norm", {{"a", F, 1, kAny}, {"b", F, 1, kAny}, {"gamma", F, 1, 1}, {"beta", F, 1, 1}}, F,
       {{"epsilon", K::Float, false, 1e-5}}},
      {"tfm.concat", {{"inputs", F, 1, kAny, Arity::Variadic}}, F, {}},
      {"tfm.slice_last", {{"x", F, 1, kAny}}, F, {{"offset", K::Int, true, 0}, {"size", K::Int, true, 0}}},
      {"tfm.last_position", {{"x", F, 3, 3}}, F, {}},
      // Incremental decoding (dialects/tfm/README.md, "Incremental decoding").
      {"tfm.cache_reorder", {{"cache", F, 3, 3}, {"parents", I, 1, 1}, {"step", I, 0, 0}}, F, {}},
      {"tfm.cache_write", {{"cache", F, 3, 3}, {"update", F, 3, 3}, {"step", I, 0, 0}}, F, {}},
      {"tfm.cached_attention", {{"q", F, 3, 3}, {"k_cache", F, 3, 3}, {"v_cache", F, 3, 3}, {"step", I, 0, 0}}, F,
       {{"heads", K::Int, true, 0}, {"head_dim", K::Int, true, 0}, {"q_offset", K::Int, false, 0},
        {"scale", K::Float, true, 0}}},
      {"tfm.gathered_attention",
       {{"q", F, 3, 3}, {"k", F, 3, 3}, {"v", F, 3, 3}, {"key_keep", B, 2, 2}, {"rows", I, 1, 1}}, F,
       {{"heads", K::Int, true, 0}, {"head_dim", K::Int, true, 0}, {"q_offset", K::Int, false, 0},
        {"k_offset", K::Int, false, 0}, {"v_offset", K::Int, false, 0}, {"scale", K::Float, true, 0}}},
      {"tfm.add_position_at", {{"x", F, 3, 3}, {"table", F, 2, 2}, {"step", I, 0, 0}}, F, {}},
      // Gradient ops (dialects/tfm/README.md, "Gradient ops").
      {"tfm.weight_grad", {{"dy", F, 2, kAny}, {"x", F, 2, kAny}}, F, {}},
      {"tfm.bias_grad", {{"dy", F, 1, kAny}}, F, {}},
      {"tfm.relu_grad", {{"x", F, 0, kAny}, {"dy", F, 0, kAny}}, F, {}},
      {"tfm.gelu_grad", {{"x", F, 0, kAny}, {"dy", F, 0, kAny}}, F, {}},
      {"tfm.softmax_grad", {{"y", F, 1, kAny}, {"dy", F, 1, kAny}}, F, {}},
      {"tfm.layer_norm_grad", {{"x", F, 1, kAny}, {"gamma", F, 1, 1}, {"dy", F, 1, kAny}}, F,
       {{"epsilon", K::Float, false, 1e-5}}},
      {"tfm.layer_norm_gamma_grad", {{"x", F, 1, kAny}, {"dy", F, 1, kAny}}, F, {{"epsilon", K::Float, false, 1e-5}}},
      {"tfm.embedding_grad", {{"ids", I, 2, 2}, {"dy", F, 3, 3}}, F, {{"num_rows", K::Int, true, 0}}},
      {"tfm.positions_grad", {{"dy", F, 3, 3}}, F, {{"num_rows", K::Int, true, 0}}},
      {"tfm.label_smoothed_xent_grad", {{"logits", F, 2, kAny}, {"targets", I, 1, kAny - 1}}, F,
       {{"smoothing", K::Float, false, 0}, {"pad_id", K::Int, true, 0}}},
      // Optimizer ops (dialects/tfm/README.md, "Optimizer ops").
      {"tfm.lr_schedule", {{"step", I, 0, 0}}, F,
       {{"lr_scale", K::Float, true, 0}, {"d_model", K::Int, true, 0}, {"warmup_steps", K::Int, true, 0}}},
      {"tfm.adam_update",
       {{"param", F, 0, kAny}, {"grad", F, 0, kAny}, {"lr", F, 0, 0}, {"step", I, 0, 0}, {"m", F, 0, kAny},
        {"v", F, 0, kAny}},
       F,
       {{"beta1", K::Float, true, 0}, {"beta2", K::Float, true, 0}, {"epsilon", K::Float, true, 0}}},
  };
}

const char *kindName(K k) {
  switch (k) {
  case K::Int: return "Int";
  case K::Float: return "Float";
  case K::String: return "String";
  }
  return "?";
}

// Value-range rules per attribute name (shared by every op using the name).
Status checkAttrValue(const std::string &name, const AttrValue &a) {
  if (a.kind == K::Float && !std::isfinite(a.f)) return invalidArgument(cat("attribute '", name, "' must be finite"));
  if (name == "transpose_b" || name == "transpose_a" || name == "causal") {
    if (a.i != 0 && a.i != 1) return invalidArgument(cat("attribute '", name, "' must be 0 or 1, got ", a.i));
  } else if (name == "heads") {
    if (a.i < 1 || a.i > (int64_t(1) << 20)) return invalidArgument(cat("attribute 'heads' must be >= 1, got ", a.i));
  } else if (name == "pad_id") {
    if (a.i < std::numeric_limits<int32_t>::min() || a.i > std::numeric_limits<int32_t>::max())
      return invalidArgument(cat("attribute 'pad_id' ", a.i, " does not fit in i32"));
  } else if (name == "epsilon") {
    if (a.f < 0) return invalidArgument(cat("attribute 'epsilon' must be >= 0, got ", a.f));
  } else if (name == "head_dim") {
    if (a.i < 1 || a.i > (int64_t(1) << 20)) return invalidArgument(cat("attribute 'head_dim' must be >= 1, got ", a.i));
  } else if (name == "q_offset" || name == "k_offset" || name == "v_offset") {
    if (a.i < 0 || a.i > (int64_t(1) << 40)) return invalidArgument(cat("attribute '", name, "' must be >= 0, got ", a.i));
  } else if (name == "rate" || name == "dropout_rate") {
    if (a.f < 0 || a.f >= 1) return invalidArgument(cat("attribute '", name, "' must be in [0, 1), got ", a.f));
  } else if (name == "smoothing") {
    if (a.f < 0 || a.f > 1) return invalidArgument(cat("attribute 'smoothing' must be in [0, 1], got ", a.f));
  } else if (name == "offset") {
    if (a.i < 0 || a.i > (int64_t(1) << 40)) return invalidArgument(cat("attribute 'offset' must be >= 0, got ", a.i));
  } else if (name == "beta1" || name == "beta2") {
    if (a.f < 0 || a.f >= 1) return invalidArgument(cat("attribute '", name, "' must be in [0, 1), got ", a.f));
  } else if (name == "lr_scale") {
    if (a.f <= 0) return invalidArgument(cat("attribute 'lr_scale' must be > 0, got ", a.f));
  } else if (name == "d_model" || name == "warmup_steps") {
    if (a.i < 1) return invalidArgument(cat("attribute '", name, "' must be >= 1, got ", a.i));
  } else if (name == "num_rows") {
    if (a.i < 1 || a.i > (int64_t(1) << 40)) return invalidArgument(cat("attribute 'num_rows' must be >= 1, got ", a.i));
  } else if (name == "size") {
    if (a.i < 1 || a.i > (int64_t(1) << 40)) return invalidArgument(cat("attribute 'size' must be >= 1, got ", a.i));
  }
  return Status::OK();
}

// String attrs must be one of the spec's choices.
Status checkAttrChoice(const AttrSpec &spec, const AttrValue &a) {
  if (a.kind != K::String || spec.choices.empty()) return Status::OK();
  std::string allowed;
  for (const char *c : spec.choices) {
    if (a.s == c) return Status::OK();
    allowed += cat(allowed.empty() ? "" : ", ", "'", c, "'");
  }
  return invalidArgument(cat("attribute '", spec.name, "' must be one of ", allowed, ", got '", a.s, "'"));
}

// Operand count against the specs: each One counts once, a trailing Optional 0-1 times, a
// trailing Variadic 1 or more times.
Status checkOperandCount(const OpSchema &s, size_t count) {
  size_t fixed = 0;
  Arity tail = Arity::One;
  for (const OperandSpec &o : s.operands) {
    if (o.arity == Arity::One) ++fixed;
    else tail = o.arity;
  }
  const char *plural = fixed == 1 && tail == Arity::One ? "" : "s";
  switch (tail) {
  case Arity::One:
    if (count != fixed) return invalidArgument(cat("expects ", fixed, " operand", plural, ", got ", count));
    break;
  case Arity::Optional:
    if (count != fixed && count != fixed + 1)
      return invalidArgument(cat("expects ", fixed, " or ", fixed + 1, " operands, got ", count));
    break;
  case Arity::Variadic:
    if (count < fixed + 1) return invalidArgument(cat("expects at least ", fixed + 1, " operand",
                                                      fixed ? "s" : "", ", got ", count));
    break;
  }
  return Status::OK();
}

const AttrSpec *findAttr(const OpSchema &s, const char *name) {
  for (const auto &a : s.attrs)
    if (std::string(a.name) == name) return &a;
  return nullptr;
}

}  // namespace

const std::vector<OpSchema> &opSchemas() {
  static const std::vector<OpSchema> schemas = buildSchemas();
  return schemas;
}

const OpSchema *findOpSchema(const std::string &op) {
  for (const auto &s : opSchemas())
    if (op == s.name) return &s;
  return nullptr;
}

Status verifyNodeSchema(const EntryFunction &fn, const Node &node) {
  const OpSchema *s = findOpSchema(node.op);
  if (!s) return unimplemented(cat("unknown op '", node.op, "' (this runtime has no kernel for it)"));
  TFMRT_RETURN_IF_ERROR(checkOperandCount(*s, node.inputs.size()));
  if (node.outputs.size() != 1) return invalidArgument(cat("expects 1 result, got ", node.outputs.size()));
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    // Operands past the specs are further instances of a trailing Variadic spec.
    const OperandSpec &spec = s->operands[std::min(i, s->operands.size() - 1)];
    const ValueInfo &v = fn.values[node.inputs[i]];
    int rank = int(v.shape.size());
    if (v.dtype != spec.dtype)
      return invalidArgument(cat("operand #", i, " (", spec.name, ", value '", v.name, "') must be ",
                                 dtypeName(spec.dtype), ", got ", dtypeName(v.dtype)));
    if (rank < spec.minRank || rank > spec.maxRank) {
      std::string want = spec.minRank == spec.maxRank ? cat(spec.minRank) : cat(spec.minRank, "..", spec.maxRank);
      return invalidArgument(cat("operand #", i, " (", spec.name, ", value '", v.name, "') must have rank ", want,
                                 ", got ", shapeStr(v.shape)));
    }
  }
  const ValueInfo &r = fn.values[node.outputs[0]];
  if (r.dtype != s->resultDtype)
    return invalidArgument(cat("result '", r.name, "' must be ", dtypeName(s->resultDtype), ", got ", dtypeName(r.dtype)));
  for (const auto &[name, a] : node.attrs) {
    const AttrSpec *spec = findAttr(*s, name.c_str());
    if (!spec) {
      std::string known;
      for (const auto &x : s->attrs) known += cat(known.empty() ? "" : ", ", x.name);
      return invalidArgument(cat("unknown attribute '", name, "' (", node.op, " takes ",
                                 known.empty() ? std::string("no attributes") : known, ")"));
    }
    if (a.kind != spec->kind)
      return invalidArgument(cat("attribute '", name, "' must be ", kindName(spec->kind), ", got ", kindName(a.kind)));
    TFMRT_RETURN_IF_ERROR(checkAttrValue(name, a));
    TFMRT_RETURN_IF_ERROR(checkAttrChoice(*spec, a));
  }
  for (const auto &spec : s->attrs)
    if (spec.required && !node.attrs.count(spec.name))
      return invalidArgument(cat("missing required attribute '", spec.name, "'"));
  return Status::OK();
}

int64_t attrInt(const Node &node, const char *name) {
  auto it = node.attrs.find(name);
  if (it != node.attrs.end()) return it->second.i;
  const OpSchema *s = findOpSchema(node.op);
  const AttrSpec *a = s ? findAttr(*s, name) : nullptr;
  return a ? int64_t(a->defaultValue) : 0;
}

std::string attrString(const Node &node, const char *name) {
  auto it = node.attrs.find(name);
  if (it != node.attrs.end()) return it->second.s;
  const OpSchema *s = findOpSchema(node.op);
  const AttrSpec *a = s ? findAttr(*s, name) : nullptr;
  return a && a->stringDefault ? a->stringDefault : "";
}

double attrFloat(const Node &node, const char *name) {
  auto it = node.attrs.find(name);
  if (it != node.attrs.end()) return it->second.f;
  const OpSchema *s = findOpSchema(node.op);
  const AttrSpec *a = s ? findAttr(*s, name) : nullptr;
  return a ? a->defaultValue : 0.0;
}

}  // namespace tfmrt
