// The tfm ops the runtime executes: the op table of dialects/tfm/rules, generated from the
// dialect's ODS (TfmOps.td), so the runtime accepts exactly what the compiler verifies. Every node
// of an artifact is checked against it when a Model is created, so kernels can trust arity,
// dtypes, ranks and attribute values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfm/rules/OpRules.h"
#include "tfmrt/artifact.h"
#include "tfmrt/status.h"

namespace tfmrt {

using OpSchema = tfm::rules::OpRule;

const std::vector<OpSchema> &opSchemas();
const OpSchema *findOpSchema(const std::string &op);
DType toDType(tfm::rules::ElementType t);
// The dtypes an operand accepts, in code order (kernels are keyed by their first operand's dtype).
std::vector<DType> operandDTypes(const tfm::rules::OperandRule &operand);
// A node attribute as the rules library sees it.
tfm::rules::AttrValue toRuleAttr(const AttrValue &a);

// Checks the node against its schema (op known, operand/result counts, dtypes and declared ranks,
// attributes known, of the right kind, present if required, in range or among the allowed
// strings). The message does not name the node: callers prefix it with nodeStr().
Status verifyNodeSchema(const EntryFunction &fn, const Node &node);

// Attribute accessors for verified nodes: the value, or the schema default when absent.
int64_t attrInt(const Node &node, const char *name);
double attrFloat(const Node &node, const char *name);
std::string attrString(const Node &node, const char *name);

}  // namespace tfmrt
