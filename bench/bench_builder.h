// Minimal artifact builder over the runtime's public structs, for the runtime-only benchmarks
// (attention_bench, gemm_bench): one entry "forward", static or dynamic shapes, f32 parameters.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tfmrt/artifact.h"

namespace bench {

// Threads a runtime-only benchmark runs on: `fallback`, or the environment variable `var` when it
// holds 1-256 (1 shows what the second thread adds).
inline int threadsFromEnv(const char *var, int fallback) {
  const char *env = std::getenv(var);
  const int n = env ? std::atoi(env) : fallback;
  return n >= 1 && n <= 256 ? n : fallback;
}

class Builder {
public:
  using Shape = std::vector<int64_t>;
  Builder(const char *model, const char *where) : where_(where) {
    artifact_.modelName = model;
    fn_.name = "forward";
  }
  uint32_t input(const std::string &name, tfmrt::DType dtype, Shape shape) {
    const uint32_t id = value(name, tfmrt::ValueKind::Input, dtype, std::move(shape));
    fn_.inputs.push_back(id);
    return id;
  }
  uint32_t param(const std::string &name, Shape shape) {
    tfmrt::ParamInfo p;
    p.name = name;
    p.shape = shape;
    artifact_.params.push_back(p);
    return value(name, tfmrt::ValueKind::Parameter, tfmrt::DType::F32, std::move(shape),
                 uint32_t(artifact_.params.size() - 1));
  }
  uint32_t op(const std::string &op, std::vector<uint32_t> in, Shape shape,
              std::map<std::string, tfmrt::AttrValue> attrs = {}) {
    tfmrt::Node n;
    n.op = op;
    n.inputs = std::move(in);
    n.attrs = std::move(attrs);
    n.loc = where_;
    n.outputs = {value("%" + std::to_string(fn_.values.size()), tfmrt::ValueKind::Intermediate, tfmrt::DType::F32,
                       std::move(shape))};
    fn_.nodes.push_back(std::move(n));
    return fn_.nodes.back().outputs[0];
  }
  tfmrt::Artifact finish(uint32_t output) {
    fn_.outputs = {output};
    artifact_.functions = {fn_};
    return artifact_;
  }

private:
  uint32_t value(std::string name, tfmrt::ValueKind kind, tfmrt::DType dtype, Shape shape, uint32_t index = 0) {
    tfmrt::ValueInfo v;
    v.name = std::move(name);
    v.kind = kind;
    v.dtype = dtype;
    v.shape = std::move(shape);
    v.index = index;
    fn_.values.push_back(std::move(v));
    return uint32_t(fn_.values.size() - 1);
  }
  std::string where_;
  tfmrt::Artifact artifact_;
  tfmrt::EntryFunction fn_;
};

}  // namespace bench
