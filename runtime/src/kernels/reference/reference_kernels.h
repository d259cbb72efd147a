// Reference kernels: plain loops, one obviously-correct implementation per tfm op. They are the
// oracle every fast kernel is tested against and the fallback for ops without a fast kernel.
#pragma once

#include "kernel_registry.h"

namespace tfmrt {

void registerReferenceElementwise(KernelRegistry &r);
void registerReferenceEmbedding(KernelRegistry &r);
void registerReferenceMatmul(KernelRegistry &r);
void registerReferenceLayerNorm(KernelRegistry &r);
void registerReferenceHeads(KernelRegistry &r);
void registerReferenceMask(KernelRegistry &r);
void registerReferenceSoftmax(KernelRegistry &r);
// rows x n: y = log_softmax(x) per row, in double (tfm.log_softmax, tfm.matmul {log_softmax});
// y may be x.
void logSoftmaxRowsReference(const float *x, int64_t rows, int64_t n, float *y);
void registerReferenceXent(KernelRegistry &r);
void registerReferenceFused(KernelRegistry &r);
void registerReferenceGrad(KernelRegistry &r);   // gradient ops (tfm-autodiff)
void registerReferenceDecode(KernelRegistry &r);  // K/V cache, step attention
void registerReferenceOptimizer(KernelRegistry &r);  // lr_schedule, adam_update  // tfm.linear, tfm.concat, tfm.slice_last

inline KernelKey referenceKey(const char *op, DType dtype = DType::F32, Layout layout = Layout::Plain) {
  return {op, dtype, layout, KernelBackend::Reference};
}

}  // namespace tfmrt
