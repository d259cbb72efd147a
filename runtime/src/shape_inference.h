// Result shapes of nodes, by the shape rules of dialects/tfm/rules (the functions the compiler's
// InferTypeOpInterface calls). Used twice: at load on the declared shapes (dims may be
// kDynamicDim, which is compatible with anything and propagates), and at run time on concrete
// shapes whenever a new set of input shapes is seen.
#pragma once

#include <cstdint>
#include <vector>

#include "tfmrt/artifact.h"
#include "tfmrt/status.h"

namespace tfmrt {

using Shape = std::vector<int64_t>;

// `inputs` are the operand shapes of a node that passed verifyNodeSchema. The message of an error
// does not name the node: callers prefix it.
Status inferShape(const Node &node, const std::vector<const Shape *> &inputs, Shape &out);

// Declared (possibly dynamic) vs inferred shape: same rank and equal wherever both are static.
bool shapesCompatible(const Shape &declared, const Shape &inferred);

}  // namespace tfmrt
