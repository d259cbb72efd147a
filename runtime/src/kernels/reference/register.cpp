#include "kernels/reference/reference_kernels.h"
#include "kernels/attention/attention_kernels.h"

namespace tfmrt {

void registerReferenceKernels(KernelRegistry &r) {
  registerReferenceElementwise(r);
  registerReferenceEmbedding(r);
  registerReferenceMatmul(r);
  registerReferenceLayerNorm(r);
  registerReferenceHeads(r);
  registerReferenceMask(r);
  registerReferenceSoftmax(r);
  registerReferenceXent(r);
  registerReferenceFused(r);
  registerReferenceAttention(r);
  registerReferenceGrad(r);
  registerReferenceOptimizer(r);
  registerReferenceDecode(r);
}

}  // namespace tfmrt
