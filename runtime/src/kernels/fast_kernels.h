// The fast CPU backend (KernelBackend::Dnnl): oneDNN-backed kernels (kernels/onednn/) and our own
// vectorised ones (kernels/cpu/, kernels/attention/, kernels/decode/). This header does not
// include oneDNN, so callers stay cheap to compile.
#pragma once

#include <memory>

#include "kernel_registry.h"

namespace tfmrt {

void registerDnnlMatmul(KernelRegistry &r);  // tfm.matmul and tfm.linear, plain and packed
void registerDnnlBatchMatmul(KernelRegistry &r);
void registerDnnlSoftmax(KernelRegistry &r);
void registerFastLayerNorm(KernelRegistry &r);   // layer_norm, add_layer_norm
void registerFastLayerNormGrad(KernelRegistry &r);  // layer_norm_grad, layer_norm_gamma_grad
void registerFastElementwise(KernelRegistry &r);  // scale, relu, gelu, add, bias_add, mask
void registerFastCopy(KernelRegistry &r);         // split_heads, merge_heads, slice_last
void registerFastXent(KernelRegistry &r);         // label_smoothed_xent
void registerDnnlGrad(KernelRegistry &r);         // weight_grad, bias_grad, relu_grad, xent_grad
void registerFastInt8Gemm(KernelRegistry &r);     // tfm.linear and tfm.matmul, packed_int8
// The f32 packed tfm.linear / tfm.matmul kernel (what packed_int8 sites run without AVX512-VNNI).
std::unique_ptr<Kernel> makePackedGemmF32(bool linear);

inline KernelKey dnnlKey(const char *op, DType dtype = DType::F32) {
  return {op, dtype, Layout::Plain, KernelBackend::Dnnl};
}

}  // namespace tfmrt
