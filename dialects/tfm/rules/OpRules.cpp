#include "OpRules.h"

#include <cmath>
#include <sstream>

namespace tfm::rules {

// Generated from TfmOps.td by tfm-tblgen -gen-op-rules: the declarations of the shape rules it
// names and `buildOpTable()`.
#include "TfmOpRules.inc"

namespace {
std::string numberStr(double v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(int64_t(v));
  std::ostringstream os;
  os << v;
  return os.str();
}
}  // namespace

const char *elementTypeName(ElementType t) {
  switch (t) {
  case ElementType::F32: return "f32";
  case ElementType::I32: return "i32";
  case ElementType::Bool: return "bool";
  case ElementType::BF16: return "bf16";
  }
  return "?";
}

std::string elementTypesName(uint32_t types) {
  std::string out;
  for (ElementType t : {ElementType::F32, ElementType::BF16, ElementType::I32, ElementType::Bool})
    if (types & elementBit(t)) out += (out.empty() ? "" : " or ") + std::string(elementTypeName(t));
  return out;
}

std::string checkSameElementType(const OpRule &op, const std::vector<ElementType> &operandTypes) {
  const ElementType *first = nullptr;
  const char *firstName = nullptr;
  for (const char *name : op.sameElementType)
    for (size_t i = 0; i < op.operands.size() && i < operandTypes.size(); ++i) {
      if (std::string_view(op.operands[i].name) != name) continue;
      if (!first) {
        first = &operandTypes[i];
        firstName = name;
      } else if (operandTypes[i] != *first) {
        return std::string("operands '") + firstName + "' and '" + name + "' must have the same element type, got " +
               elementTypeName(*first) + " and " + elementTypeName(operandTypes[i]);
      }
    }
  return "";
}

ElementType resultElementType(const OpRule &op, const std::vector<ElementType> &operandTypes) {
  if (op.resultTypeOperand >= 0 && size_t(op.resultTypeOperand) < operandTypes.size())
    return operandTypes[size_t(op.resultTypeOperand)];
  return op.resultType;
}

const char *attrKindName(AttrKind k) {
  switch (k) {
  case AttrKind::Int: return "Int";
  case AttrKind::Float: return "Float";
  case AttrKind::String: return "String";
  }
  return "?";
}

const std::vector<OpRule> &allOps() {
  static const std::vector<OpRule> ops = buildOpTable();
  return ops;
}

const OpRule *findOp(std::string_view name) {
  for (const OpRule &op : allOps())
    if (name == op.name) return &op;
  return nullptr;
}

const AttrRule *findAttr(const OpRule &op, std::string_view name) {
  for (const AttrRule &a : op.attrs)
    if (name == a.name) return &a;
  return nullptr;
}

bool intInRange(int64_t v, double lo, double hi) { return double(v) >= lo && double(v) <= hi; }

bool floatInRange(double v, double lo, double hi, bool loOpen, bool hiOpen) {
  if (!std::isfinite(v)) return false;
  if (loOpen ? !(v > lo) : !(v >= lo)) return false;
  if (hiOpen ? !(v < hi) : !(v <= hi)) return false;
  return true;
}

bool isTrainingOp(std::string_view name) {
  constexpr std::string_view grad = "_grad";
  return name == "tfm.adam_update" || name == "tfm.grad_accumulate" ||
         (name.size() > grad.size() && name.substr(name.size() - grad.size()) == grad);
}

bool oneOf(std::string_view v, std::string_view choices) {
  if (choices.empty()) return true;
  size_t start = 0;
  while (start <= choices.size()) {
    size_t end = choices.find(',', start);
    if (end == std::string_view::npos) end = choices.size();
    if (choices.substr(start, end - start) == v) return true;
    start = end + 1;
  }
  return false;
}

std::string describeRange(const AttrRule &rule) {
  switch (rule.kind) {
  case AttrKind::String: {
    std::string out = "one of ";
    std::string_view c = rule.choices;
    size_t start = 0;
    while (start <= c.size()) {
      size_t end = c.find(',', start);
      if (end == std::string_view::npos) end = c.size();
      out += (start ? ", '" : "'") + std::string(c.substr(start, end - start)) + "'";
      start = end + 1;
    }
    return out;
  }
  case AttrKind::Int:
  case AttrKind::Float:
    return std::string("in ") + (rule.minOpen ? "(" : "[") + numberStr(rule.min) + ", " + numberStr(rule.max) +
           (rule.maxOpen ? ")" : "]");
  }
  return "";
}

std::string checkAttr(const AttrRule &rule, const AttrValue &v) {
  const std::string name = std::string("attribute '") + rule.name + "'";
  if (v.kind != rule.kind) return name + " must be " + attrKindName(rule.kind) + ", got " + attrKindName(v.kind);
  switch (rule.kind) {
  case AttrKind::Int:
    if (!intInRange(v.i, rule.min, rule.max)) return name + " must be " + describeRange(rule) + ", got " + std::to_string(v.i);
    break;
  case AttrKind::Float:
    if (!floatInRange(v.f, rule.min, rule.max, rule.minOpen, rule.maxOpen))
      return name + " must be " + describeRange(rule) + ", got " + numberStr(v.f);
    break;
  case AttrKind::String:
    if (!oneOf(v.s, rule.choices)) return name + " must be " + describeRange(rule) + ", got '" + v.s + "'";
    break;
  }
  return "";
}

std::string checkOperandCount(const OpRule &op, size_t count) {
  size_t fixed = 0;
  Arity tail = Arity::One;
  for (const OperandRule &o : op.operands) {
    if (o.arity == Arity::One) ++fixed;
    else tail = o.arity;
  }
  const std::string plural = fixed == 1 && tail == Arity::One ? "" : "s";
  const std::string got = ", got " + std::to_string(count);
  switch (tail) {
  case Arity::One:
    if (count != fixed) return "expects " + std::to_string(fixed) + " operand" + plural + got;
    break;
  case Arity::Optional:
    if (count != fixed && count != fixed + 1)
      return "expects " + std::to_string(fixed) + " or " + std::to_string(fixed + 1) + " operands" + got;
    break;
  case Arity::Variadic:
    if (count < fixed + 1) return "expects at least " + std::to_string(fixed + 1) + " operand" + (fixed ? "s" : "") + got;
    break;
  }
  return "";
}

const OperandRule &operandRule(const OpRule &op, size_t index) {
  return op.operands[index < op.operands.size() ? index : op.operands.size() - 1];
}

int64_t ShapeArgs::attrInt(const char *name) const {
  if (const AttrValue *v = find(name)) return v->i;
  const AttrRule *r = findAttr(op_, name);
  return r ? int64_t(r->numericDefault) : 0;
}

double ShapeArgs::attrFloat(const char *name) const {
  if (const AttrValue *v = find(name)) return v->f;
  const AttrRule *r = findAttr(op_, name);
  return r ? r->numericDefault : 0.0;
}

std::string ShapeArgs::attrString(const char *name) const {
  if (const AttrValue *v = find(name)) return v->s;
  const AttrRule *r = findAttr(op_, name);
  return r && r->stringDefault ? r->stringDefault : "";
}

std::string inferShape(const ShapeArgs &args, const OpRule &op, Dims &result) {
  // No clearing first: `result` may be an operand's own dims (a state updated in place).
  return op.shape(args, result);
}

bool shapesCompatible(const Dims &declared, const Dims &inferred) {
  if (declared.size() != inferred.size()) return false;
  for (size_t i = 0; i < declared.size(); ++i)
    if (!compatible(declared[i], inferred[i])) return false;
  return true;
}

std::string dimsStr(const Dims &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += dims[i] == kDynamic ? std::string("?") : std::to_string(dims[i]);
  }
  return s + "]";
}

}  // namespace tfm::rules
