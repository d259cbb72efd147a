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

// One CPU engine, shared by all kernels of a Model, and the bf16 weight copies its bf16 GEMMs
// share. Sessions on several threads run kernels at once, so a oneDNN kernel executes its
// primitives through dnnlRun (a stream of its own call) with user-managed scratchpads
// (dnnlUserScratchpad): oneDNN's library scratchpad is one buffer per creating thread, which two
// primitives running at once on other threads would share.
class CpuDevice : public Device {
public:
  const char *name() const override { return "cpu"; }
  dnnl::engine engine;
  gemm::Bf16WeightCopies bf16Weights;
};

// Primitive attributes with the scratchpad provided by the caller: the kernel asks for
// scratchpad_desc().get_size() in scratchBytes() and passes the plan's scratch at run.
inline dnnl::primitive_attr dnnlUserScratchpad(dnnl::primitive_attr attr = {}) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// The device a oneDNN kernel was prepared with; null when the Model has no CPU device.
inline CpuDevice *cpuDevice(Device *device) { return dynamic_cast<CpuDevice *>(device); }

inline Status dnnlError(const char *what, const dnnl::error &e) {
  return internalError(cat("oneDNN ", what, " failed: ", e.what(), " (status ", int(e.status), ")"));
}

// Runs `prim` with `args` plus, when it needs one, its scratchpad (`scratchpad`, user-managed) over
// `scratch`, on a stream made for this call (a CPU stream is a small handle: cheap next to a
// GEMM), and waits. Nothing is shared between calls. Throws dnnl::error.
inline void dnnlRun(const CpuDevice &device, const dnnl::primitive &prim, std::vector<dnnl_exec_arg_t> args,
                    const dnnl::memory::desc &scratchpad, void *scratch) {
  dnnl::memory scratchpadMemory;
  if (scratchpad.get_size() != 0) {
    // (Scratch is planned for every run-time node; a node evaluated when weights are set has none.)
    if (!scratch) throw dnnl::error(dnnl_invalid_arguments, "no scratch was planned for the primitive's scratchpad");
    scratchpadMemory = dnnl::memory(scratchpad, device.engine, scratch);
    args.push_back({DNNL_ARG_SCRATCHPAD, scratchpadMemory.get()});
  }
  dnnl::stream stream(device.engine);
  dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), stream.get(), int(args.size()), args.data()),
                          "could not execute a primitive");
  stream.wait();
}

}  // namespace tfmrt
