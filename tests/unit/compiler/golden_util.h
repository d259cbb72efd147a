// Shared by the golden-data tests: compile a spec in-process and load it on the runtime, and an
// elementwise closeness check that reports the worst element.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "Pipeline.h"
#include "tfmrt/runtime.h"

namespace tfmc::test {

inline const std::string kSource = TFMC_SOURCE_DIR;

// One golden-data configuration: a tiny spec on a kernel backend, fused or unfused.
struct GoldenCase {
  const char *spec;  // models/<spec>.yaml and tests/golden/<spec>.*.safetensors
  tfmrt::KernelBackend backend;
  const char *fusion;  // "all" (the default build) or "none" (the unfused program)
};
// Readable names in test output instead of gtest's byte dump.
void PrintTo(const GoldenCase &c, std::ostream *os);
std::string goldenCaseName(const testing::TestParamInfo<GoldenCase> &info);
// {tiny, tiny-prenorm} x {dnnl, reference} x {fusion all, none}.
std::vector<GoldenCase> allGoldenCases();

// models/<spec>.yaml compiled with --fusion=<fusion> (and the gradients / train_step entries if asked), loaded
// on `backend`. Null (with a test failure recorded) if any step fails.
std::unique_ptr<tfmrt::Model> compileAndLoad(const std::string &spec, tfmrt::KernelBackend backend,
                                             const char *fusion, bool gradients = false, bool trainStep = false,
                                             bool translate = false);

// models/<spec>.yaml parsed (a test failure recorded if it does not parse), to edit before compiling.
bool parseSpec(const std::string &spec, tfmc::ModelSpec &parsed);
// A parsed spec compiled with `pipeline` and loaded on `backend`; null (failure recorded) on error.
std::unique_ptr<tfmrt::Model> compileAndLoad(const tfmc::ModelSpec &spec, tfmrt::KernelBackend backend,
                                             const tfmc::PipelineOptions &pipeline);

// |actual - expected| <= rtol * |expected| + atol elementwise.
void expectClose(const tfmrt::Tensor &actual, const tfmrt::Tensor &expected, double rtol, double atol,
                 const std::string &what);

}  // namespace tfmc::test
