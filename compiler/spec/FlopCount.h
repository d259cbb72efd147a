// Analytic FLOP count of one forward pass (GEMMs and attention contractions; 2 FLOPs per
// multiply-add; elementwise ops, softmax and LayerNorm excluded). Benchmarks divide by it to
// report GFLOP/s against the machine's matmul peak.
#pragma once

#include <cstdint>

#include "spec/ModelSpec.h"

namespace tfmc {

struct ForwardFlops {
  double projections = 0;  // GEMMs with a weight operand (Q/K/V/output projections, FFN, vocabulary)
  double attention = 0;    // Q K^T and P V
  double total() const { return projections + attention; }
};

inline ForwardFlops forwardFlopsSplit(const ModelSpec &spec, int64_t batch, int64_t srcLen, int64_t tgtLen) {
  const double B = batch, S = srcLen, T = tgtLen;
  const double D = spec.model.d_model, F = spec.model.d_ff, V = spec.model.tgt_vocab_size;
  auto gemm = [](double m, double n, double k) { return 2.0 * m * n * k; };
  // Q K^T and P V over all heads: 2 contractions of [q x k x D] each.
  auto attention = [&](double q, double k) { return 2.0 * gemm(B * q, k, D); };
  const double encoderLayer = 4 * gemm(B * S, D, D) + gemm(B * S, F, D) + gemm(B * S, D, F);
  const double decoderLayer = 4 * gemm(B * T, D, D)                          // self-attention
                              + 2 * gemm(B * T, D, D) + 2 * gemm(B * S, D, D)  // cross-attention
                              + gemm(B * T, F, D) + gemm(B * T, D, F);        // FFN
  ForwardFlops f;
  f.projections = spec.model.encoder_layers * encoderLayer + spec.model.decoder_layers * decoderLayer +
                  gemm(B * T, V, D);
  f.attention = spec.model.encoder_layers * attention(S, S) + spec.model.decoder_layers * (attention(T, T) + attention(T, S));
  return f;
}

inline double forwardFlops(const ModelSpec &spec, int64_t batch, int64_t srcLen, int64_t tgtLen) {
  return forwardFlopsSplit(spec, batch, srcLen, tgtLen).total();
}

}  // namespace tfmc
