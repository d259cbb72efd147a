// The oneDNN objects shared by a Model's kernels: the CPU device. Only kernels/onednn/*.cpp include this.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <vector>

#include "device.h"
#include "format.h"
#include "kernels/fast_kernels.h"
#include "kernels/gemm/bf16_weight_copies.h"

namespace tfmrt {

// Spellings shared by the oneDNN kernels (`using namespace dnnl_names;` in their .cpp files).
namespace dnnl_names {
using memory = dnnl::memory;
using tag = dnnl::memory::format_tag;
constexpr dnnl::memory::dim kRT = DNNL_RUNTIME_DIM_VAL;  // a run-time dimension
constexpr dnnl::memory::data_type kF32 = dnnl::memory::data_type::f32;
constexpr dnnl::memory::data_type kBf16 = dnnl::memory::data_type::bf16;
}  // namespace dnnl_names

// One CPU engine + stream, shared by all kernels of a Model, and the bf16 weight copies its bf16
// GEMMs share (calls of a Model take turns, so the copies need no lock).
class CpuDevice : public Device {
public:
  const char *name() const override { return "cpu"; }
  dnnl::engine engine;
  dnnl::stream stream;
  gemm::Bf16WeightCopies bf16Weights;
};

// The device a oneDNN kernel was prepared with; null when the Model has no CPU device.
inline CpuDevice *cpuDevice(Device *device) { return dynamic_cast<CpuDevice *>(device); }

inline Status dnnlError(const char *what, const dnnl::error &e) {
  return internalError(cat("oneDNN ", what, " failed: ", e.what(), " (status ", int(e.status), ")"));
}

// Runs a primitive with a prebuilt C argument array. The C++ execute() converts its
// unordered_map into a fresh std::vector on every call; this keeps steady-state runs allocation-free.
inline void dnnlExecute(const dnnl::primitive &prim, const dnnl::stream &stream,
                        const std::vector<dnnl_exec_arg_t> &args) {
  dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), stream.get(), int(args.size()), args.data()),
                          "could not execute a primitive");
}

}  // namespace tfmrt
