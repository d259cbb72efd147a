#include "kernels/onednn/onednn_util.h"

namespace tfmrt {

Status createCpuDevice(std::unique_ptr<Device> &out) {
  try {
    auto ctx = std::make_unique<CpuDevice>();
    ctx->engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
    out = std::move(ctx);
    return Status::OK();
  } catch (const dnnl::error &e) {
    return dnnlError("engine creation", e);
  }
}

}  // namespace tfmrt
