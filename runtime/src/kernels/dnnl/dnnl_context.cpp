#include "kernels/dnnl/dnnl_context.h"

namespace tfmrt {

void DnnlContextDeleter::operator()(DnnlContext *ctx) const { delete ctx; }

Status createDnnlContext(DnnlContextPtr &out) {
  try {
    auto ctx = DnnlContextPtr(new DnnlContext);
    ctx->engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
    ctx->stream = dnnl::stream(ctx->engine);
    out = std::move(ctx);
    return Status::OK();
  } catch (const dnnl::error &e) {
    return dnnlError("engine creation", e);
  }
}

}  // namespace tfmrt
