#include "TfmRulesBridge.h"

#include <deque>

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace tfm {
namespace {

rules::Dims toDims(ArrayRef<int64_t> shape) {
  rules::Dims dims(shape.begin(), shape.end());
  for (int64_t &d : dims)
    if (ShapedType::isDynamic(d)) d = rules::kDynamic;
  return dims;
}

SmallVector<int64_t> fromDims(const rules::Dims &dims) {
  SmallVector<int64_t> shape(dims.begin(), dims.end());
  for (int64_t &d : shape)
    if (d == rules::kDynamic) d = ShapedType::kDynamic;
  return shape;
}

Type elementType(MLIRContext *context, rules::ElementType t) {
  switch (t) {
  case rules::ElementType::F32: return Float32Type::get(context);
  case rules::ElementType::I32: return IntegerType::get(context, 32);
  case rules::ElementType::Bool: return IntegerType::get(context, 1);
  case rules::ElementType::BF16: return BFloat16Type::get(context);
  }
  return {};
}

// The result's element type: the rule's, or (a result tied to an operand) that operand's.
Type resultElementType(MLIRContext *context, const rules::OpRule &rule, TypeRange operands) {
  if (rule.resultTypeOperand >= 0 && size_t(rule.resultTypeOperand) < operands.size())
    if (auto t = dyn_cast<ShapedType>(operands[size_t(rule.resultTypeOperand)])) return t.getElementType();
  return elementType(context, rule.resultType);
}

// An MLIR attribute as the rules see it; false for attribute kinds no rule uses.
bool toAttrValue(Attribute attr, rules::AttrValue &out) {
  if (auto b = dyn_cast<BoolAttr>(attr)) {
    out.kind = rules::AttrKind::Int;
    out.i = b.getValue();
  } else if (auto i = dyn_cast<IntegerAttr>(attr)) {
    out.kind = rules::AttrKind::Int;
    out.i = i.getValue().getSExtValue();
  } else if (auto f = dyn_cast<FloatAttr>(attr)) {
    out.kind = rules::AttrKind::Float;
    out.f = f.getValueAsDouble();
  } else if (auto s = dyn_cast<StringAttr>(attr)) {
    out.kind = rules::AttrKind::String;
    out.s = s.getValue().str();
  } else {
    return false;
  }
  return true;
}

class MlirShapeArgs : public rules::ShapeArgs {
public:
  MlirShapeArgs(const rules::OpRule &op, std::vector<const rules::Dims *> dims,
                llvm::function_ref<Attribute(StringRef)> lookup)
      : ShapeArgs(op, std::move(dims)), lookup_(lookup) {}

protected:
  const rules::AttrValue *find(const char *name) const override {
    Attribute a = lookup_(name);
    if (!a) return nullptr;
    rules::AttrValue v;
    if (!toAttrValue(a, v)) return nullptr;
    values_.push_back(std::move(v));
    return &values_.back();
  }

private:
  llvm::function_ref<Attribute(StringRef)> lookup_;
  mutable std::deque<rules::AttrValue> values_;
};

// Everything but the comparison with declared results: "" or the first rule broken.
std::string applyRules(const rules::OpRule &rule, TypeRange operandTypes,
                       llvm::function_ref<Attribute(StringRef)> lookup, std::deque<rules::Dims> &dims,
                       rules::Dims &result) {
  std::string err = rules::checkOperandCount(rule, operandTypes.size());
  if (!err.empty()) return err;
  std::vector<const rules::Dims *> ptrs;
  std::vector<rules::ElementType> elementTypes;
  for (auto [i, type] : llvm::enumerate(operandTypes)) {
    const rules::OperandRule &o = rules::operandRule(rule, i);
    auto ranked = dyn_cast<RankedTensorType>(type);
    const std::string what = "operand #" + std::to_string(i) + " (" + o.name + ")";
    if (!ranked) return what + " must be a ranked tensor";
    std::optional<rules::ElementType> et;
    for (rules::ElementType t : {rules::ElementType::F32, rules::ElementType::I32, rules::ElementType::Bool,
                                 rules::ElementType::BF16})
      if (ranked.getElementType() == elementType(type.getContext(), t)) et = t;
    if (!et || !o.allows(*et)) return what + " must have element type " + rules::elementTypesName(o.types);
    elementTypes.push_back(*et);
    if (ranked.getRank() < o.minRank || ranked.getRank() > o.maxRank)
      return what + " must have rank " +
             (o.minRank == o.maxRank ? std::to_string(o.minRank)
                                     : std::to_string(o.minRank) + ".." + std::to_string(o.maxRank)) +
             ", got rank " + std::to_string(ranked.getRank());
    dims.push_back(toDims(ranked.getShape()));
    ptrs.push_back(&dims.back());
  }
  err = rules::checkSameElementType(rule, elementTypes);
  if (!err.empty()) return err;
  for (const rules::AttrRule &a : rule.attrs) {
    Attribute attr = lookup(a.name);
    if (!attr) {
      if (a.required) return std::string("missing required attribute '") + a.name + "'";
      continue;
    }
    rules::AttrValue v;
    if (!toAttrValue(attr, v)) return std::string("attribute '") + a.name + "' has an unsupported kind";
    err = rules::checkAttr(a, v);
    if (!err.empty()) return err;
  }
  MlirShapeArgs args(rule, std::move(ptrs), lookup);
  return rules::inferShape(args, rule, result);
}

}  // namespace

LogicalResult inferFromRules(MLIRContext *context, std::optional<Location> location, StringRef opName,
                             ValueRange operands, llvm::function_ref<Attribute(StringRef)> lookup,
                             SmallVectorImpl<Type> &inferred) {
  const rules::OpRule *rule = rules::findOp(opName);
  if (!rule) return emitOptionalError(location, "'", opName, "' op has no shape rule");
  std::deque<rules::Dims> dims;
  rules::Dims result;
  std::string err = applyRules(*rule, operands.getTypes(), lookup, dims, result);
  if (!err.empty()) return emitOptionalError(location, "'", opName, "' op ", err);
  inferred.push_back(RankedTensorType::get(fromDims(result), resultElementType(context, *rule, operands.getTypes())));
  return success();
}

LogicalResult verifyWithRules(Operation *op) {
  const rules::OpRule *rule = rules::findOp(op->getName().getStringRef());
  if (!rule) return op->emitOpError("has no shape rule");
  auto lookup = [&](StringRef name) -> Attribute {
    if (std::optional<Attribute> a = op->getInherentAttr(name)) return *a;
    return op->getAttr(name);
  };
  std::deque<rules::Dims> dims;
  rules::Dims inferred;
  std::string err = applyRules(*rule, op->getOperandTypes(), lookup, dims, inferred);
  if (!err.empty()) return op->emitOpError(err);
  auto declared = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  const Type want = resultElementType(op->getContext(), *rule, op->getOperandTypes());
  if (!declared || declared.getElementType() != want)
    return op->emitOpError() << "result must be a ranked tensor of " << want << ", got " << op->getResult(0).getType();
  const rules::Dims declaredDims = toDims(declared.getShape());
  if (!rules::shapesCompatible(declaredDims, inferred))
    return op->emitOpError() << "result shape " << rules::dimsStr(declaredDims) << " does not match the inferred "
                             << rules::dimsStr(inferred);
  return success();
}

}  // namespace tfm
