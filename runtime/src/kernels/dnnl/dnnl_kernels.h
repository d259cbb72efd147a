// oneDNN-backed and hand-optimized kernels (KernelBackend::Dnnl), and the oneDNN engine/stream
// they share. This header does not include oneDNN, so callers stay cheap to compile.
#pragma once

#include <memory>

#include "kernel_registry.h"

namespace tfmrt {

struct DnnlContextDeleter {
  void operator()(DnnlContext *ctx) const;
};
using DnnlContextPtr = std::unique_ptr<DnnlContext, DnnlContextDeleter>;

// One CPU engine + stream, shared by all kernels of a Model.
Status createDnnlContext(DnnlContextPtr &out);

void registerDnnlMatmul(KernelRegistry &r);  // tfm.matmul and tfm.linear, plain and packed
void registerDnnlBatchMatmul(KernelRegistry &r);
void registerDnnlSoftmax(KernelRegistry &r);
void registerFastLayerNorm(KernelRegistry &r);   // layer_norm, add_layer_norm
void registerFastElementwise(KernelRegistry &r);  // scale, relu, gelu, add, bias_add, mask
void registerFastCopy(KernelRegistry &r);         // split_heads, merge_heads, slice_last
void registerFastXent(KernelRegistry &r);         // label_smoothed_xent
void registerDnnlGrad(KernelRegistry &r);         // weight_grad, bias_grad, relu_grad, xent_grad

inline KernelKey dnnlKey(const char *op, DType dtype = DType::F32) {
  return {op, dtype, Layout::Plain, KernelBackend::Dnnl};
}

}  // namespace tfmrt
