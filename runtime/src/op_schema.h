// The tfm ops the runtime executes (dialects/tfm/README.md): operand dtypes and ranks, attributes
// with their kinds and defaults. Every node of an artifact is checked against this table when a
// Model is created, so kernels can trust arity, dtypes, ranks and attribute values.
#pragma once

#include <string>
#include <vector>

#include "tfmrt/artifact.h"
#include "tfmrt/status.h"

namespace tfmrt {

struct OperandSpec {
  const char *name;
  DType dtype;
  int minRank;
  int maxRank;  // inclusive
};

struct AttrSpec {
  const char *name;
  AttrValue::Kind kind;
  bool required;
  double defaultValue;  // for optional attrs (Int attrs store integral values)
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
// attributes known, of the right kind, present if required and in range). The message does not
// name the node: callers prefix it with nodeStr().
Status verifyNodeSchema(const EntryFunction &fn, const Node &node);

// Attribute accessors for verified nodes: the value, or the schema default when absent.
int64_t attrInt(const Node &node, const char *name);
double attrFloat(const Node &node, const char *name);

}  // namespace tfmrt
