// What the compiler and the runtime both know about each tfm op, in one MLIR-free library:
//  - the op table (operands with element type and rank range, attributes with kind, default and
//    allowed values), generated from TfmOps.td by tfm-tblgen -gen-op-rules;
//  - the shape rules (ShapeRules.cpp), one function per rule named in TfmOps.td.
// The compiler's InferTypeOpInterface and ODS attribute constraints call these functions; the
// runtime calls them when it loads an artifact and whenever it sees new input shapes. A rule is
// therefore enforced once, the same way, at compile time and at load time.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::rules {

// A dimension bound only at run time (batch, sequence length): compatible with any size.
constexpr int64_t kDynamic = -1;
constexpr int kMaxRank = 8;
constexpr double kInf = std::numeric_limits<double>::infinity();

using Dims = std::vector<int64_t>;

// Element types of tfm tensors. Values are stable: they are stored in artifacts.
enum class ElementType : uint8_t { F32 = 0, I32 = 1, Bool = 2, BF16 = 3 };
const char *elementTypeName(ElementType t);
// Sets of element types an operand accepts, as bit masks.
constexpr uint32_t elementBit(ElementType t) { return 1u << unsigned(t); }
std::string elementTypesName(uint32_t types);  // "f32", "f32 or bf16"

enum class AttrKind : uint8_t { Int = 0, Float = 1, String = 2 };
const char *attrKindName(AttrKind k);

// How many operands one OperandRule stands for. Only an op's last operand may be Optional or
// Variadic, so operand positions stay unambiguous.
enum class Arity : uint8_t { One, Optional, Variadic };

struct OperandRule {
  const char *name;
  uint32_t types;  // elementBit()s
  int minRank;
  int maxRank;  // inclusive
  Arity arity;
  bool allows(ElementType t) const { return (types & elementBit(t)) != 0; }
};

struct AttrRule {
  const char *name;
  AttrKind kind;
  bool required;
  // Int and Float: the allowed range (Float bounds may be open); Int attrs hold integral values.
  double min, max;
  bool minOpen, maxOpen;
  double numericDefault;
  // String: the default and the allowed values, comma-separated ("" = any string).
  const char *stringDefault;
  const char *choices;
};

struct AttrValue {
  AttrKind kind = AttrKind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
};

class ShapeArgs;
// A shape rule: the result dims from the operand dims and attributes, or an error message that
// does not name the op (callers add the op and its location).
using ShapeRule = std::string (*)(const ShapeArgs &args, Dims &result);

struct OpRule {
  const char *name;  // "tfm.matmul"
  std::vector<OperandRule> operands;
  ElementType resultType;
  std::vector<AttrRule> attrs;
  ShapeRule shape;
  const char *shapeRuleName;
  // Operands that must share one element type (ODS's AllElementTypesMatch), e.g. a GEMM's two
  // operands, both f32 or both bf16.
  std::vector<const char *> sameElementType;
  // >= 0: the result's element type is this operand's (a result of several element types tied to
  // an operand by AllTypesMatch, e.g. a cache op's f32 or bf16 cache); resultType is then unused.
  int resultTypeOperand = -1;
};

// The element type of op's result for these operand element types (operand order).
ElementType resultElementType(const OpRule &op, const std::vector<ElementType> &operandTypes);

// "" if the operands named in op.sameElementType (given as their element types, in operand order)
// agree.
std::string checkSameElementType(const OpRule &op, const std::vector<ElementType> &operandTypes);

// Every op the runtime executes, in TfmOps.td order.
const std::vector<OpRule> &allOps();
const OpRule *findOp(std::string_view name);
const AttrRule *findAttr(const OpRule &op, std::string_view name);

// Value checks shared with the ODS attribute constraints (TfmOps.td calls them in its predicates).
bool intInRange(int64_t v, double lo, double hi);
bool floatInRange(double v, double lo, double hi, bool loOpen, bool hiOpen);
bool oneOf(std::string_view v, std::string_view commaSeparated);
// An op that only a training function holds: a gradient (named *_grad), gradient accumulation or
// the optimizer. A function with one computes gradients (the runtime's training entries; the
// functions tfm-quantize-int8 leaves in f32).
bool isTrainingOp(std::string_view name);
// "" if `v` satisfies `rule` (kind, range, choices), else why not.
std::string checkAttr(const AttrRule &rule, const AttrValue &v);
// "in [0, 1)", "one of 'plain', 'packed'".
std::string describeRange(const AttrRule &rule);

// "" if `count` operands fit the op's operand list (fixed ones, a trailing Optional or Variadic).
std::string checkOperandCount(const OpRule &op, size_t count);
// The rule describing operand `index` (a trailing Variadic rule covers every later operand).
const OperandRule &operandRule(const OpRule &op, size_t index);

// The inputs of a shape rule. Attribute lookups fall back to the op table's defaults.
class ShapeArgs {
public:
  ShapeArgs(const OpRule &op, std::vector<const Dims *> operands) : op_(op), operands_(std::move(operands)) {}
  virtual ~ShapeArgs() = default;

  size_t size() const { return operands_.size(); }
  const Dims &operand(size_t i) const { return *operands_[i]; }
  const Dims &operator[](size_t i) const { return *operands_[i]; }
  int64_t attrInt(const char *name) const;
  double attrFloat(const char *name) const;
  std::string attrString(const char *name) const;

protected:
  // The attribute as set on the op, or nullptr when absent.
  virtual const AttrValue *find(const char *name) const = 0;

private:
  const OpRule &op_;
  std::vector<const Dims *> operands_;
};

// Runs the op's shape rule; "" or the error.
std::string inferShape(const ShapeArgs &args, const OpRule &op, Dims &result);

// Dimension helpers for rules and their callers.
inline bool compatible(int64_t a, int64_t b) { return a == kDynamic || b == kDynamic || a == b; }
bool shapesCompatible(const Dims &declared, const Dims &inferred);
std::string dimsStr(const Dims &dims);  // "[2, ?, 512]"

// The shape rules themselves live in namespace tfm::rules::shape (ShapeRules.cpp); TfmOps.td names
// each op's rule (`shapeRule`) and the generated op table declares them.

}  // namespace tfm::rules
