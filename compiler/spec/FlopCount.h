// Analytic FLOP count of one forward pass (GEMMs and attention contractions; 2 FLOPs per
// multiply-add; elementwise ops, softmax and LayerNorm excluded). Benchmarks divide by it to
// report GFLOP/s against the machine's matmul peak.
#pragma once

#include <cstdint>

#include "spec/ModelSpec.h"

namespace tfmc {

inline double forwardFlops(const ModelSpec &spec, int64_t batch, int64_t srcLen, int64_t tgtLen) {
  const double B = batch, S = srcLen, T = tgtLen;
  const double D = spec.model.d_model, F = spec.model.d_ff, V = spec.model.tgt_vocab_size;
  auto gemm = [](double m, double n, double k) { return 2.0 * m * n * k; };
  // Q K^T and P V over all heads: 2 contractions of [q x k x D] each.
  auto attention = [&](double q, double k) { return 2.0 * gemm(B * q, k, D); };
  const double encoderLayer =
      4 * gemm(B * S, D, D) + attention(S, S) + gemm(B * S, F, D) + gemm(B * S, D, F);
  const double decoderLayer = 4 * gemm(B * T, D, D) + attention(T, T)      // self-attention
                              + 2 * gemm(B * T, D, D) + 2 * gemm(B * S, D, D) +
                              attention(T, S)                               // cross-attention
                              + gemm(B * T, F, D) + gemm(B * T, D, F);     // FFN
  return spec.model.encoder_layers * encoderLayer + spec.model.decoder_layers * decoderLayer +
         gemm(B * T, V, D);
}

}  // namespace tfmc
