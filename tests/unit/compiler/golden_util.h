// Shared by the golden-data tests: compile a spec in-process and load it on the runtime, and an
// elementwise closeness check that reports the worst element.
#pragma once

#include <memory>
#include <string>

#include "Pipeline.h"
#include "tfmrt/runtime.h"

namespace tfmc::test {

inline const std::string kSource = TFMC_SOURCE_DIR;

// models/<spec>.yaml compiled with --fusion=<fusion> (and the gradients entry if asked), loaded
// on `backend`. Null (with a test failure recorded) if any step fails.
std::unique_ptr<tfmrt::Model> compileAndLoad(const std::string &spec, tfmrt::KernelBackend backend,
                                             const char *fusion, bool gradients = false);

// |actual - expected| <= rtol * |expected| + atol elementwise.
void expectClose(const tfmrt::Tensor &actual, const tfmrt::Tensor &expected, double rtol, double atol,
                 const std::string &what);

}  // namespace tfmc::test
