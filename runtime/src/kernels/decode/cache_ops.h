// Fast tfm.cache_write and tfm.cache_reorder: the reference kernels' copies, rows split over the
// threads. Each copy goes to memory no other row touches, so the result is the same bytes. Also
// tfm.to_bf16, whose chunks are as independent.
#pragma once

#include "kernel_registry.h"

namespace tfmrt {

void registerFastCacheOps(KernelRegistry &r);  // called by registerDnnlKernels

}  // namespace tfmrt
