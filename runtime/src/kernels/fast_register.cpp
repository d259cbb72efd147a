#include "kernels/fast_kernels.h"
#include "kernels/attention/attention_kernels.h"
#include "kernels/decode/cache_ops.h"
#include "kernels/decode/step_attention.h"

namespace tfmrt {

void registerDnnlKernels(KernelRegistry &r) {
  registerDnnlMatmul(r);
  registerFastInt8Gemm(r);
  registerDnnlBatchMatmul(r);
  registerDnnlSoftmax(r);
  registerFastLayerNorm(r);
  registerFastLayerNormGrad(r);
  registerFastElementwise(r);
  registerFastCopy(r);
  registerFastXent(r);
  registerDnnlGrad(r);
  registerFastAttention(r);
  registerFastStepAttention(r);
  registerFastCacheOps(r);
}

}  // namespace tfmrt
