// The tfm ops the runtime executes (dialects/tfm/README.md): operand dtypes and ranks, attributes
// with their kinds and defaults. Every node of an artifact is checked against this table when a
// Model is created, so kernels can trust arity, dtypes, ranks and attribute values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfmrt/artifact.h"
#include "tfmrt/status.h"

namespace tfmrt {

// How many node operands one OperandSpec stands for. Only an op's last spec may be Optional or
// Variadic, so operand positions stay unambiguous.
enum class Arity : uint8_t {
  One,
  Optional,  // 0 or 1 (tfm.linear's residual)
  Variadic,  // 1 or more (tfm.concat's inputs)
};

struct OperandSpec {
  const char *name;
  DType dtype;
  int minRank;
  int maxRank;  // inclusive
  Arity arity = Arity::One;
};

struct AttrSpec {
  const char *name;
  AttrValue::Kind kind;
  bool required;
  double defaultValue;  // for optional attrs (Int attrs store integral values)
  // String attrs: the value when absent, and the allowed values.
  const char *stringDefault = nullptr;
  std::vector<const char *> choices = {};
};

struct OpSchema {
  const char *name;
  std::vector<OperandSpec> operands;
  DType resultDtype;
  std::vector<AttrSpec> attrs;
};

const std::vector<OpSchema> &opSchemas();
const OpSchema *findOpSchema(const std::string &op);

// Checks the node against its schema (op known, operand/result counts, dtypes and declared ranks,
// attributes known, of the right kind, present if required, in range or among the allowed
// strings). The message does not name the node: callers prefix it with nodeStr().
Status verifyNodeSchema(const EntryFunction &fn, const Node &node);

// Attribute accessors for verified nodes: the value, or the schema default when absent.
int64_t attrInt(const Node &node, const char *name);
double attrFloat(const Node &node, const char *name);
std::string attrString(const Node &node, const char *name);

}  // namespace tfmrt
