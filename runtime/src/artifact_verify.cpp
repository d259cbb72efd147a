// Structural validation of an Artifact (format level; op semantics are checked by the Model).
#include <set>

#include "format.h"
#include "tfmrt/artifact.h"

namespace tfmrt {
namespace {

// Largest tensor we accept anywhere in an artifact: 2^40 elements. Guards numel overflow.
constexpr int64_t kMaxElements = int64_t(1) << 40;

Status checkStaticShape(const std::vector<int64_t> &shape, const std::string &what, int64_t &numel) {
  if (shape.size() > kMaxRank) return invalidArgument(cat(what, ": rank ", shape.size(), " exceeds ", kMaxRank));
  if (!checkedNumel(shape, kMaxElements, numel))
    return invalidArgument(cat(what, ": invalid shape ", shapeStr(shape),
                               " (dims must be static and non-negative, at most 2^40 elements)"));
  return Status::OK();
}

Status validateFunction(const Artifact &a, const EntryFunction &fn) {
  const std::string where = "function '" + fn.name + "'";
  const size_t nvalues = fn.values.size();
  // defined[v]: the value is available (inputs, params, constants from the start; intermediates
  // once their producing node has been seen).
  std::vector<uint8_t> defined(nvalues, 0), isInput(nvalues, 0);
  std::set<uint32_t> stateSeen;
  for (size_t v = 0; v < nvalues; ++v) {
    const ValueInfo &info = fn.values[v];
    std::string vw = cat(where, ": value ", v, " ('", info.name, "')");
    if (info.shape.size() > kMaxRank) return invalidArgument(cat(vw, ": rank ", info.shape.size(), " exceeds ", kMaxRank));
    for (int64_t d : info.shape)
      if (d < kDynamicDim) return invalidArgument(cat(vw, ": invalid dim ", d, " in shape ", shapeStr(info.shape)));
    switch (info.kind) {
    case ValueKind::Parameter: {
      if (info.index >= a.params.size())
        return invalidArgument(cat(vw, ": parameter index ", info.index, " out of range (", a.params.size(), " params)"));
      const ParamInfo &p = a.params[info.index];
      if (p.dtype != info.dtype || p.shape != info.shape)
        return invalidArgument(cat(vw, ": declared ", dtypeName(info.dtype), shapeStr(info.shape), " but parameter '",
                                   p.name, "' is ", dtypeName(p.dtype), shapeStr(p.shape)));
      defined[v] = 1;
      break;
    }
    case ValueKind::Constant: {
      if (info.index >= a.constants.size())
        return invalidArgument(cat(vw, ": constant index ", info.index, " out of range (", a.constants.size(), " constants)"));
      const Constant &c = a.constants[info.index];
      if (c.dtype != info.dtype || c.shape != info.shape)
        return invalidArgument(cat(vw, ": declared ", dtypeName(info.dtype), shapeStr(info.shape), " but constant '",
                                   c.name, "' is ", dtypeName(c.dtype), shapeStr(c.shape)));
      defined[v] = 1;
      break;
    }
    case ValueKind::State: {
      if (info.index >= a.states.size())
        return invalidArgument(cat(vw, ": state index ", info.index, " out of range (", a.states.size(), " states)"));
      const StateInfo &st = a.states[info.index];
      if (st.dtype != info.dtype || st.shape != info.shape)
        return invalidArgument(cat(vw, ": declared ", dtypeName(info.dtype), shapeStr(info.shape), " but state '",
                                   st.name, "' is ", dtypeName(st.dtype), shapeStr(st.shape)));
      if (!stateSeen.insert(info.index).second)
        return invalidArgument(cat(vw, ": state '", st.name, "' has two values in one function"));
      defined[v] = 1;
      break;
    }
    case ValueKind::Input:
      defined[v] = 1;
      break;
    case ValueKind::Intermediate:
      break;
    default:
      return invalidArgument(cat(vw, ": unknown value kind ", int(info.kind)));
    }
    if (uint8_t(info.dtype) > uint8_t(DType::BF16)) return invalidArgument(cat(vw, ": unknown dtype ", int(info.dtype)));
  }
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    uint32_t id = fn.inputs[i];
    if (id >= nvalues)
      return invalidArgument(cat(where, ": input #", i, " refers to value ", id, ", but the function has ", nvalues, " values"));
    if (fn.values[id].kind != ValueKind::Input)
      return invalidArgument(cat(where, ": input #", i, " refers to value ", id, " ('", fn.values[id].name, "') which is not an Input value"));
    if (isInput[id]) return invalidArgument(cat(where, ": value ", id, " ('", fn.values[id].name, "') is listed twice as an input"));
    isInput[id] = 1;
  }
  for (size_t v = 0; v < nvalues; ++v)
    if (fn.values[v].kind == ValueKind::Input && !isInput[v])
      return invalidArgument(cat(where, ": Input value ", v, " ('", fn.values[v].name, "') is not listed in the function inputs"));

  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    const Node &node = fn.nodes[n];
    const std::string nw = where + ": " + nodeStr(n, node);
    if (node.op.empty()) return invalidArgument(cat(where, ": node ", n, " has an empty op name"));
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      uint32_t id = node.inputs[i];
      if (id >= nvalues)
        return invalidArgument(cat(nw, ": operand #", i, " refers to value ", id, ", but the function has ", nvalues, " values"));
      if (!defined[id])
        return invalidArgument(cat(nw, ": operand #", i, " uses value ", id, " ('", fn.values[id].name,
                                   "') before any node produces it"));
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      uint32_t id = node.outputs[i];
      if (id >= nvalues)
        return invalidArgument(cat(nw, ": result #", i, " refers to value ", id, ", but the function has ", nvalues, " values"));
      // A State result is the state updated in place (it was defined from the start).
      if (fn.values[id].kind == ValueKind::State) continue;
      if (fn.values[id].kind != ValueKind::Intermediate)
        return invalidArgument(cat(nw, ": result #", i, " writes value ", id, " ('", fn.values[id].name,
                                   "') which is neither an Intermediate nor a State"));
      if (defined[id])
        return invalidArgument(cat(nw, ": result #", i, " redefines value ", id, " ('", fn.values[id].name, "')"));
      defined[id] = 1;
    }
  }
  for (size_t i = 0; i < fn.outputs.size(); ++i) {
    uint32_t id = fn.outputs[i];
    if (id >= nvalues)
      return invalidArgument(cat(where, ": output #", i, " refers to value ", id, ", but the function has ", nvalues, " values"));
    if (!defined[id])
      return invalidArgument(cat(where, ": output #", i, " ('", fn.values[id].name, "') is never produced"));
    if (fn.values[id].kind == ValueKind::State)
      return invalidArgument(cat(where, ": output #", i, " ('", fn.values[id].name,
                                 "') is session state, which callers read through the Session, not as an output"));
  }
  return Status::OK();
}

}  // namespace

Status validateArtifact(const Artifact &a) {
  std::set<std::string> names;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const ParamInfo &p = a.params[i];
    std::string what = cat("parameter ", i, " ('", p.name, "')");
    if (p.name.empty()) return invalidArgument(cat("parameter ", i, " has an empty name"));
    if (!names.insert(p.name).second) return invalidArgument(cat(what, ": duplicate parameter name"));
    if (uint8_t(p.dtype) > uint8_t(DType::Bool)) return invalidArgument(cat(what, ": unknown dtype ", int(p.dtype)));
    if (uint8_t(p.init) > uint8_t(ParamInit::Normal)) return invalidArgument(cat(what, ": unknown init ", int(p.init)));
    int64_t numel;
    TFMRT_RETURN_IF_ERROR(checkStaticShape(p.shape, what, numel));
  }
  for (size_t i = 0; i < a.constants.size(); ++i) {
    const Constant &c = a.constants[i];
    std::string what = cat("constant ", i, " ('", c.name, "')");
    if (uint8_t(c.dtype) > uint8_t(DType::BF16)) return invalidArgument(cat(what, ": unknown dtype ", int(c.dtype)));
    int64_t numel;
    TFMRT_RETURN_IF_ERROR(checkStaticShape(c.shape, what, numel));
    uint64_t expected = uint64_t(numel) * dtypeSize(c.dtype);
    if (c.data.size() != expected)
      return invalidArgument(cat(what, ": has ", c.data.size(), " data bytes, but shape ", shapeStr(c.shape), " of ",
                                 dtypeName(c.dtype), " needs ", expected));
  }
  std::set<std::string> snames;
  for (size_t i = 0; i < a.states.size(); ++i) {
    const StateInfo &st = a.states[i];
    std::string what = cat("state ", i, " ('", st.name, "')");
    if (st.name.empty()) return invalidArgument(cat("state ", i, " has an empty name"));
    if (!snames.insert(st.name).second) return invalidArgument(cat(what, ": duplicate state name"));
    if (uint8_t(st.dtype) > uint8_t(DType::BF16)) return invalidArgument(cat(what, ": unknown dtype ", int(st.dtype)));
    if (st.shape.empty() || st.shape.size() > kMaxRank)
      return invalidArgument(cat(what, ": rank ", st.shape.size(), " is outside [1, ", kMaxRank, "]"));
    for (int64_t d : st.shape)
      if (d < kDynamicDim) return invalidArgument(cat(what, ": invalid dim ", d, " in shape ", shapeStr(st.shape)));
  }
  std::set<std::string> fnames;
  for (const auto &fn : a.functions) {
    if (fn.name.empty()) return invalidArgument("a function has an empty name");
    if (!fnames.insert(fn.name).second) return invalidArgument(cat("duplicate function '", fn.name, "'"));
    TFMRT_RETURN_IF_ERROR(validateFunction(a, fn));
  }
  return Status::OK();
}

}  // namespace tfmrt
