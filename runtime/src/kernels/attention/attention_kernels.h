// Registration hooks of the tfm.fused_attention kernels (attention_kernels.cpp).
#pragma once

#include "kernel_registry.h"

namespace tfmrt {

void registerReferenceAttention(KernelRegistry &r);  // called by registerReferenceKernels
void registerFastAttention(KernelRegistry &r);       // called by registerDnnlKernels

}  // namespace tfmrt
