#include "op_schema.h"

#include <algorithm>

#include "format.h"

namespace tfmrt {
namespace rules = tfm::rules;

namespace {

rules::AttrKind ruleKind(AttrValue::Kind k) {
  switch (k) {
  case AttrValue::Kind::Int: return rules::AttrKind::Int;
  case AttrValue::Kind::Float: return rules::AttrKind::Float;
  case AttrValue::Kind::String: return rules::AttrKind::String;
  }
  return rules::AttrKind::Int;
}

}  // namespace

DType toDType(rules::ElementType t) {
  switch (t) {
  case rules::ElementType::F32: return DType::F32;
  case rules::ElementType::I32: return DType::I32;
  case rules::ElementType::Bool: return DType::Bool;
  case rules::ElementType::BF16: return DType::BF16;
  }
  return DType::F32;
}

std::vector<DType> operandDTypes(const rules::OperandRule &operand) {
  std::vector<DType> out;
  for (DType t : {DType::F32, DType::I32, DType::Bool, DType::BF16})
    if (operand.allows(rules::ElementType(uint8_t(t)))) out.push_back(t);
  return out;
}

rules::AttrValue toRuleAttr(const AttrValue &a) {
  rules::AttrValue v;
  v.kind = ruleKind(a.kind);
  v.i = a.i;
  v.f = a.f;
  v.s = a.s;
  return v;
}

const std::vector<OpSchema> &opSchemas() { return rules::allOps(); }

const OpSchema *findOpSchema(const std::string &op) { return rules::findOp(op); }

Status verifyNodeSchema(const EntryFunction &fn, const Node &node) {
  const OpSchema *s = findOpSchema(node.op);
  if (!s) return unimplemented(cat("unknown op '", node.op, "' (this runtime has no kernel for it)"));
  std::string err = rules::checkOperandCount(*s, node.inputs.size());
  if (!err.empty()) return invalidArgument(err);
  if (node.outputs.size() != 1) return invalidArgument(cat("expects 1 result, got ", node.outputs.size()));
  std::vector<rules::ElementType> elementTypes;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const rules::OperandRule &spec = rules::operandRule(*s, i);
    const ValueInfo &v = fn.values[node.inputs[i]];
    const int rank = int(v.shape.size());
    // DType and rules::ElementType share their codes (static_assert in shape_inference.cpp).
    const auto et = rules::ElementType(uint8_t(v.dtype));
    if (!spec.allows(et))
      return invalidArgument(cat("operand #", i, " (", spec.name, ", value '", v.name, "') must be ",
                                 rules::elementTypesName(spec.types), ", got ", dtypeName(v.dtype)));
    elementTypes.push_back(et);
    if (rank < spec.minRank || rank > spec.maxRank) {
      std::string want = spec.minRank == spec.maxRank ? cat(spec.minRank) : cat(spec.minRank, "..", spec.maxRank);
      return invalidArgument(cat("operand #", i, " (", spec.name, ", value '", v.name, "') must have rank ", want,
                                 ", got ", shapeStr(v.shape)));
    }
  }
  err = rules::checkSameElementType(*s, elementTypes);
  if (!err.empty()) return invalidArgument(err);
  const ValueInfo &r = fn.values[node.outputs[0]];
  const DType want = toDType(rules::resultElementType(*s, elementTypes));
  if (r.dtype != want)
    return invalidArgument(cat("result '", r.name, "' must be ", dtypeName(want), ", got ", dtypeName(r.dtype)));
  for (const auto &[name, a] : node.attrs) {
    const rules::AttrRule *spec = rules::findAttr(*s, name);
    if (!spec) {
      std::string known;
      for (const auto &x : s->attrs) known += cat(known.empty() ? "" : ", ", x.name);
      return invalidArgument(cat("unknown attribute '", name, "' (", node.op, " takes ",
                                 known.empty() ? std::string("no attributes") : known, ")"));
    }
    err = rules::checkAttr(*spec, toRuleAttr(a));
    if (!err.empty()) return invalidArgument(err);
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
  const rules::AttrRule *a = s ? rules::findAttr(*s, name) : nullptr;
  return a ? int64_t(a->numericDefault) : 0;
}

double attrFloat(const Node &node, const char *name) {
  auto it = node.attrs.find(name);
  if (it != node.attrs.end()) return it->second.f;
  const OpSchema *s = findOpSchema(node.op);
  const rules::AttrRule *a = s ? rules::findAttr(*s, name) : nullptr;
  return a ? a->numericDefault : 0.0;
}

std::string attrString(const Node &node, const char *name) {
  auto it = node.attrs.find(name);
  if (it != node.attrs.end()) return it->second.s;
  const OpSchema *s = findOpSchema(node.op);
  const rules::AttrRule *a = s ? rules::findAttr(*s, name) : nullptr;
  return a && a->stringDefault ? a->stringDefault : "";
}

}  // namespace tfmrt
