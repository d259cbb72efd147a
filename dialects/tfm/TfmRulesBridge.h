// The compiler's side of dialects/tfm/rules: the ODS-generated ops call these to infer result types
// (InferTypeOpInterface) and to verify themselves (the ShapeRuleVerified trait), so the compiler
// applies the same shape rules, attribute ranges and operand ranks as the runtime.
#pragma once

#include <optional>
#include <type_traits>

#include "llvm/ADT/STLFunctionalExtras.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/ValueRange.h"

#include "tfm/rules/OpRules.h"

namespace tfm {

// The result type of `opName` applied to `operands` with attributes from `lookup` (null when
// absent). On failure the rule's message is emitted at `location` if one is given.
llvm::LogicalResult inferFromRules(mlir::MLIRContext *context, std::optional<mlir::Location> location,
                                   llvm::StringRef opName, mlir::ValueRange operands,
                                   llvm::function_ref<mlir::Attribute(llvm::StringRef)> lookup,
                                   llvm::SmallVectorImpl<mlir::Type> &inferred);

// Operand ranks and types, attribute ranges, and the shape rule against the declared result type:
// one error naming the first rule broken.
llvm::LogicalResult verifyWithRules(mlir::Operation *op);

namespace detail {
template <class T, class = void>
struct HasInherentAttrs : std::false_type {};
template <class T>
struct HasInherentAttrs<T, std::void_t<decltype(T::getInherentAttr(std::declval<mlir::MLIRContext *>(),
                                                                   std::declval<const typename T::Properties &>(),
                                                                   llvm::StringRef()))>> : std::true_type {};
}  // namespace detail

// inferReturnTypes of every op with a shape rule (TfmOps.td, Tfm_ExecOp).
template <class OpT>
llvm::LogicalResult inferResultType(mlir::MLIRContext *context, std::optional<mlir::Location> location,
                                    mlir::ValueRange operands, mlir::DictionaryAttr attributes,
                                    mlir::OpaqueProperties properties, llvm::SmallVectorImpl<mlir::Type> &inferred) {
  auto lookup = [&](llvm::StringRef name) -> mlir::Attribute {
    if constexpr (detail::HasInherentAttrs<OpT>::value) {
      if (const auto *props = properties.as<typename OpT::Properties *>())
        if (std::optional<mlir::Attribute> a = OpT::getInherentAttr(context, *props, name)) return *a;
    }
    return attributes ? attributes.get(name) : mlir::Attribute();
  };
  return inferFromRules(context, location, OpT::getOperationName(), operands, lookup, inferred);
}

namespace OpTrait {
// Verifies an op against its rule in dialects/tfm/rules (see verifyWithRules).
template <typename ConcreteType>
class ShapeRuleVerified : public mlir::OpTrait::TraitBase<ConcreteType, ShapeRuleVerified> {
public:
  static llvm::LogicalResult verifyTrait(mlir::Operation *op) { return verifyWithRules(op); }
};
}  // namespace OpTrait

}  // namespace tfm
