// Fast tfm.cached_attention and tfm.gathered_attention: (query row, head) pairs in parallel, an
// AVX-512 inner loop when the CPU has it and head_dim is a multiple of 16, else an AVX2 one when
// the CPU has AVX2 + FMA and head_dim is a multiple of 8; rows in parallel, all heads at once,
// for head_dim 64 on either ISA. Fast tfm.attention_weights: rows in parallel, all heads at once
// for head_dim 64 on AVX-512, else attentionWeightsReference.
#pragma once

#include <cstdint>

#include "kernel_registry.h"

namespace tfmrt {

void registerFastStepAttention(KernelRegistry &r);  // called by registerDnnlKernels

namespace decode {
// attendReference's contract (decode_common.h), vectorised; head_dim % 16 == 0. Defined in its
// own TU compiled for AVX-512 and entered only after a run-time CPU check.
void attendAvx512(const float *q, const float *k, int64_t kStride, const float *v, int64_t vStride,
                  const uint8_t *keep, int64_t n, int64_t dk, float scale, float *scores, float *out);
// The same on 8 lanes, head_dim % 8 == 0; entered only after attention::cpuHasAvx2Fma().
void attendAvx2(const float *q, const float *k, int64_t kStride, const float *v, int64_t vStride, const uint8_t *keep,
                int64_t n, int64_t dk, float scale, float *scores, float *out);
// Both with bf16 keys and values (tfm-lower-kv-precision), widened exactly to f32 as loaded.
void attendAvx512Bf16(const float *q, const uint16_t *k, int64_t kStride, const uint16_t *v, int64_t vStride,
                      const uint8_t *keep, int64_t n, int64_t dk, float scale, float *scores, float *out);
void attendAvx2Bf16(const float *q, const uint16_t *k, int64_t kStride, const uint16_t *v, int64_t vStride,
                    const uint8_t *keep, int64_t n, int64_t dk, float scale, float *scores, float *out);
// Every head of one query row at once, head_dim 64 (small and base), heads <= 64: q holds the
// heads side by side, key p's heads at k + p * kStride + h * 64 (likewise v), so each key and
// value row is read once, in order. `scores` holds heads x round_up(n, 16) floats; out heads x 64.
void attendAllHeads64Avx512(const float *q, const float *k, int64_t kStride, const float *v, int64_t vStride,
                            const uint8_t *keep, int64_t n, int64_t heads, float scale, float *scores, float *out);
// The same with bf16 keys and values (tfm-lower-kv-precision), widened exactly to f32.
void attendAllHeads64Avx512Bf16(const float *q, const uint16_t *k, int64_t kStride, const uint16_t *v, int64_t vStride,
                                const uint8_t *keep, int64_t n, int64_t heads, float scale, float *scores, float *out);
// The same on 8 lanes: `scores` holds heads x round_up(n, 8) floats. Enter only after
// attention::cpuHasAvx2Fma().
void attendAllHeads64Avx2(const float *q, const float *k, int64_t kStride, const float *v, int64_t vStride,
                          const uint8_t *keep, int64_t n, int64_t heads, float scale, float *scores, float *out);
void attendAllHeads64Avx2Bf16(const float *q, const uint16_t *k, int64_t kStride, const uint16_t *v, int64_t vStride,
                              const uint8_t *keep, int64_t n, int64_t heads, float scale, float *scores, float *out);
// tfm.attention_weights of one query row (attentionWeightsReference's contract), head_dim 64,
// heads <= 64, f32 or bf16 keys: the all-heads bodies' scores, then each head's softmax averaged
// into out[0, n). `scores` holds heads x round_up(n, 16) floats. Enter only after
// attention::cpuHasAvx512().
void attentionWeightsAllHeads64Avx512(const float *q, const float *k, int64_t kStride, const uint8_t *keep, int64_t n,
                                      int64_t heads, float scale, float *scores, float *out);
void attentionWeightsAllHeads64Avx512Bf16(const float *q, const uint16_t *k, int64_t kStride, const uint8_t *keep,
                                          int64_t n, int64_t heads, float scale, float *scores, float *out);
}  // namespace decode

}  // namespace tfmrt
