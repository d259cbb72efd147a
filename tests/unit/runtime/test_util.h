// Helpers for runtime tests: building artifacts by hand, random tensors, comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "tfmrt/artifact.h"
#include "tfmrt/runtime.h"
#include "tfmrt/tensor.h"

namespace tfmrt::test {

using Shape = std::vector<int64_t>;
using Attrs = std::map<std::string, AttrValue>;
constexpr int64_t kDyn = kDynamicDim;

// Builds one entry function of `artifact`, value by value; finish() appends it.
class FunctionBuilder {
public:
  FunctionBuilder(Artifact &artifact, std::string name);
  uint32_t input(const std::string &name, DType dtype, Shape shape);
  // Adds the parameter to the artifact if it is new; one value per parameter per function.
  uint32_t param(const std::string &name, Shape shape, ParamInit init = ParamInit::XavierUniform);
  uint32_t constant(const std::string &name, const Tensor &data);
  // Session state `name` (added to the artifact's states if new).
  uint32_t state(const std::string &name, Shape shape, DType dtype = DType::F32);
  // A node updating state `stateValue` in place (its result is the state value itself).
  void inPlace(const std::string &op, std::vector<uint32_t> operands, uint32_t stateValue, Attrs attrs = {});
  // Each node gets loc "test.yaml:<node index + 1>:3".
  uint32_t op(const std::string &op, std::vector<uint32_t> operands, DType dtype, Shape shape, Attrs attrs = {});
  void output(uint32_t id) { fn_.outputs.push_back(id); }
  EntryFunction &fn() { return fn_; }
  void finish();

private:
  uint32_t addValue(std::string name, ValueKind kind, DType dtype, Shape shape, uint32_t index);
  Artifact &artifact_;
  EntryFunction fn_;
  std::map<std::string, uint32_t> paramValues_;
};

Tensor randomF32(const Shape &shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
Tensor randomIds(const Shape &shape, int32_t lo, int32_t hiExclusive, uint64_t seed);
// Sinusoidal position table [rows, dim] per dialects/tfm/README.md.
Tensor sinusoidTable(int64_t rows, int64_t dim);

// |a - b| <= atol + rtol * |b| elementwise, same dtype/shape; NaNs never match.
::testing::AssertionResult allClose(const Tensor &actual, const Tensor &expected, double atol, double rtol);

// A fresh path in this test process's temp dir, which is removed when the tests end.
std::string tempPath(const std::string &name);

std::unique_ptr<Model> loadModel(const Artifact &artifact, KernelBackend backend, int threads = 0);
std::unique_ptr<Model> loadModel(const Artifact &artifact, const RuntimeOptions &options);

struct Operand {
  Tensor t;
  bool param = false;  // a model weight (static shape) rather than a caller input (all dims dynamic)
};

// A one-node artifact over the given operands (inputs "in<i>", weights "p<i>"); the result is
// declared with dynamic dims. Used to test single kernels on both backends.
class SingleOp {
public:
  SingleOp(const std::string &op, const std::vector<Operand> &operands, const Attrs &attrs,
           DType resultType = DType::F32);
  // Runs on `backend`; optionally reports the kernel chosen for the node.
  Tensor run(KernelBackend backend, std::string *kernel = nullptr);
  // Both backends: the Dnnl one uses `fastKernel` and matches the reference kernel.
  void compare(const std::string &fastKernel, double atol, double rtol);
  const Artifact &artifact() const { return artifact_; }

private:
  Artifact artifact_;
  std::map<std::string, Tensor> weights_;
  std::vector<Tensor> inputs_;
};

// Sets an environment variable for a scope and restores what it was (set or not) after it, so a
// test run under an outer setting (e.g. ONEDNN_MAX_CPU_ISA=AVX2) keeps it for the tests after.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name)) saved_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (saved_) ::setenv(name_.c_str(), saved_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  std::string name_;
  std::optional<std::string> saved_;
};

}  // namespace tfmrt::test

// Expects a failed status whose message contains every given substring.
#define EXPECT_ERROR(status_expr, ...)                                                            \
  do {                                                                                            \
    ::tfmrt::Status _s = (status_expr);                                                           \
    EXPECT_FALSE(_s.ok()) << "expected an error";                                                 \
    for (const std::string &_sub : std::initializer_list<std::string>{__VA_ARGS__})               \
      EXPECT_NE(_s.message().find(_sub), std::string::npos)                                       \
          << "message \"" << _s.message() << "\" lacks \"" << _sub << "\"";                      \
  } while (0)

#define ASSERT_OK(status_expr)                                                                    \
  do {                                                                                            \
    ::tfmrt::Status _s = (status_expr);                                                           \
    ASSERT_TRUE(_s.ok()) << _s.message();                                                         \
  } while (0)
