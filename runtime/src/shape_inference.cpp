#include "shape_inference.h"

#include "format.h"
#include "op_schema.h"

namespace tfmrt {
namespace rules = tfm::rules;
static_assert(kDynamicDim == rules::kDynamic, "the runtime and the shape rules mark dynamic dims alike");
static_assert(int(kMaxRank) == rules::kMaxRank, "the runtime and ODS agree on the largest rank");
static_assert(uint8_t(DType::F32) == uint8_t(rules::ElementType::F32) && uint8_t(DType::I32) == uint8_t(rules::ElementType::I32) &&
                  uint8_t(DType::Bool) == uint8_t(rules::ElementType::Bool) &&
                  uint8_t(DType::BF16) == uint8_t(rules::ElementType::BF16),
              "DType and rules::ElementType share their codes");

namespace {

// A node's attributes as the shape rules read them.
class NodeShapeArgs : public rules::ShapeArgs {
public:
  NodeShapeArgs(const rules::OpRule &op, const Node &node, std::vector<const Shape *> inputs)
      : ShapeArgs(op, std::move(inputs)) {
    for (const auto &[name, a] : node.attrs) values_.emplace_back(name, toRuleAttr(a));
  }

protected:
  const rules::AttrValue *find(const char *name) const override {
    for (const auto &[n, v] : values_)
      if (n == name) return &v;
    return nullptr;
  }

private:
  std::vector<std::pair<std::string, rules::AttrValue>> values_;
};

}  // namespace

Status inferShape(const Node &node, const std::vector<const Shape *> &in, Shape &out) {
  const OpSchema *op = findOpSchema(node.op);
  if (!op) return unimplemented(cat("no shape function for op '", node.op, "'"));
  NodeShapeArgs args(*op, node, in);
  std::string err = rules::inferShape(args, *op, out);
  return err.empty() ? Status::OK() : invalidArgument(err);
}

bool shapesCompatible(const Shape &declared, const Shape &inferred) { return rules::shapesCompatible(declared, inferred); }

}  // namespace tfmrt
