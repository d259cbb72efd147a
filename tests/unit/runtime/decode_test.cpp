// Incremental decoding in the runtime: the step-attention kernels (fast vs reference, and the
// reference vs tfm.fused_attention on the same keys), session state (bind, in-place reorder and
// write, independence of sessions, errors), and the artifact rules for state.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/attention/attention.h"
#include "kernels/cpu/log_softmax.h"
#include "kernels/decode/decode_common.h"
#include "kernels/decode/step_attention.h"
#include "test_util.h"

namespace tfmrt::test {
namespace {

Attrs stepAttrs(int64_t heads, int64_t dk, int64_t qOffset = 0) {
  return {{"heads", AttrValue::ofInt(heads)},
          {"head_dim", AttrValue::ofInt(dk)},
          {"q_offset", AttrValue::ofInt(qOffset)},
          {"scale", AttrValue::ofFloat(1.0 / std::sqrt(double(dk)))}};
}

// The fast kernel this CPU runs for a step attention op ("cached" or "gathered") of head_dim dk.
std::string stepKernel(const char *op, int64_t dk) {
  const char *isa = attention::cpuHasAvx512() && dk % 16 == 0 ? "avx512"
                    : attention::cpuHasAvx2Fma() && dk % 8 == 0 ? "avx2"
                                                                 : "portable";
  return std::string("fast.") + op + "_attention_" + isa;
}

// Rows [0, n) of positions [0, len) of a [R, T, D] tensor, as [n, len, D].
Tensor prefix(const Tensor &t, int64_t n, int64_t len) {
  const int64_t T = t.shape[1], D = t.shape[2];
  Tensor out(DType::F32, {n, len, D});
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(out.data<float>() + r * len * D, t.data<float>() + r * T * D, size_t(len * D) * sizeof(float));
  return out;
}

struct StepCase {
  int64_t rows, cacheRows, cacheLen, step, heads, dk, qExtra;
};

class CachedAttentionTest : public ::testing::TestWithParam<StepCase> {};

TEST_P(CachedAttentionTest, FastMatchesReferenceAndReferenceMatchesFusedAttention) {
  const StepCase c = GetParam();
  const int64_t D = c.heads * c.dk;
  Tensor q = randomF32({c.rows, 1, D + c.qExtra}, 1), k = randomF32({c.cacheRows, c.cacheLen, D}, 2),
         v = randomF32({c.cacheRows, c.cacheLen, D}, 3);
  Tensor step = Tensor::i32({}, {int32_t(c.step)});
  SingleOp op("tfm.cached_attention", {{q}, {k}, {v}, {step}}, stepAttrs(c.heads, c.dk, c.qExtra));
  op.compare(stepKernel("cached", c.dk), 1e-5, 1e-4);
  // The same attention as fused_attention over the first step + 1 keys of each row.
  Tensor keep = Tensor::boolean({c.rows, c.step + 1}, std::vector<uint8_t>(size_t(c.rows * (c.step + 1)), 1));
  Attrs fused = stepAttrs(c.heads, c.dk, c.qExtra);
  fused["k_offset"] = AttrValue::ofInt(0);
  fused["v_offset"] = AttrValue::ofInt(0);
  Tensor expected = SingleOp("tfm.fused_attention", {{q}, {prefix(k, c.rows, c.step + 1)}, {prefix(v, c.rows, c.step + 1)}, {keep}},
                             fused)
                        .run(KernelBackend::Reference);
  EXPECT_TRUE(allClose(op.run(KernelBackend::Reference), expected, 1e-5, 1e-4));
}

INSTANTIATE_TEST_SUITE_P(Shapes, CachedAttentionTest,
                         ::testing::Values(StepCase{1, 1, 1, 0, 1, 16, 0},     // the first position
                                           StepCase{5, 7, 9, 8, 2, 8, 3},      // portable path, q offset
                                           StepCase{16, 16, 40, 37, 8, 64, 0},  // parallel, AVX-512
                                           StepCase{3, 8, 130, 129, 4, 64, 64},
                                           // head_dim 64 on AVX-512 runs all heads of a row at once:
                                           // one key, 16 keys, a partial block of 16, 5 heads (a
                                           // pass of 4 and one of 1 over V), 8 heads (base)
                                           StepCase{2, 2, 1, 0, 4, 64, 0}, StepCase{2, 3, 16, 15, 4, 64, 0},
                                           StepCase{4, 4, 50, 20, 5, 64, 7}, StepCase{3, 3, 33, 32, 8, 64, 0}));

// Continuous batching: rows at different positions (step [R]). Fast matches reference, and
// each row equals that row alone at its own scalar step.
TEST(CachedAttention, PerRowStepsMatchEachRowAlone) {
  const int64_t R = 6, Tc = 40, H = 4, dk = 64, D = H * dk;
  const std::vector<int32_t> steps{0, 37, 5, 16, 39, 1};
  Tensor q = randomF32({R, 1, D}, 7), k = randomF32({R, Tc, D}, 8), v = randomF32({R, Tc, D}, 9);
  SingleOp op("tfm.cached_attention", {{q}, {k}, {v}, {Tensor::i32({R}, steps)}}, stepAttrs(H, dk));
  op.compare(stepKernel("cached", dk), 1e-5, 1e-4);
  for (KernelBackend backend : {KernelBackend::Reference, KernelBackend::Dnnl}) {
    Tensor all = op.run(backend);
    for (int64_t r = 0; r < R; ++r) {
      Tensor qr(DType::F32, {1, 1, D}), kr(DType::F32, {1, Tc, D}), vr(DType::F32, {1, Tc, D});
      std::memcpy(qr.data<float>(), q.data<float>() + r * D, size_t(D) * sizeof(float));
      std::memcpy(kr.data<float>(), k.data<float>() + r * Tc * D, size_t(Tc * D) * sizeof(float));
      std::memcpy(vr.data<float>(), v.data<float>() + r * Tc * D, size_t(Tc * D) * sizeof(float));
      Tensor one = SingleOp("tfm.cached_attention", {{qr}, {kr}, {vr}, {Tensor::i32({}, {steps[size_t(r)]})}},
                            stepAttrs(H, dk))
                       .run(backend);
      for (int64_t j = 0; j < D; ++j)
        ASSERT_EQ(all.data<float>()[r * D + j], one.data<float>()[j]) << backendName(backend) << " row " << r;
    }
  }
}

TEST(AddPositionAt, PerRowSteps) {
  const int64_t B = 3, L = 6, D = 5;
  Tensor x = randomF32({B, 1, D}, 10), table = randomF32({L, D}, 11);
  const std::vector<int32_t> steps{4, 0, 5};
  for (KernelBackend backend : {KernelBackend::Reference, KernelBackend::Dnnl}) {
    Tensor y = SingleOp("tfm.add_position_at", {{x}, {table}, {Tensor::i32({B}, steps)}}, {}).run(backend);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < D; ++j)
        EXPECT_EQ(y.data<float>()[b * D + j], x.data<float>()[b * D + j] + table.data<float>()[steps[size_t(b)] * D + j]);
  }
}

TEST(GatheredAttention, FastMatchesReference) {
  const int64_t R = 9, N = 3, S = 11, H = 4, dk = 64, D = H * dk;
  // k and v read from a merged [N, S, 2D + 5] buffer at odd offsets; sentence 2 fully masked.
  Tensor q = randomF32({R, 1, D}, 4), kv = randomF32({N, S, 2 * D + 5}, 5);
  std::vector<uint8_t> keepBits(size_t(N * S), 1);
  for (int64_t s = 7; s < S; ++s) keepBits[size_t(s)] = 0;   // sentence 0: 7 keys
  for (int64_t s = 0; s < S; ++s) keepBits[size_t(2 * S + s)] = 0;  // sentence 2: none
  Tensor keep = Tensor::boolean({N, S}, keepBits);
  Tensor rows = Tensor::i32({R}, {0, 0, 1, 2, 1, 0, 2, 2, 1});
  Attrs attrs = stepAttrs(H, dk);
  attrs["k_offset"] = AttrValue::ofInt(3);
  attrs["v_offset"] = AttrValue::ofInt(D + 5);
  SingleOp op("tfm.gathered_attention", {{q}, {kv}, {kv}, {keep}, {rows}}, attrs);
  op.compare(stepKernel("gathered", dk), 1e-5, 1e-4);
  Tensor out = op.run(KernelBackend::Dnnl);
  for (int64_t r : {3, 6, 7})  // rows of the fully masked sentence are zeros
    for (int64_t j = 0; j < D; ++j) EXPECT_EQ(out.data<float>()[r * D + j], 0.0f);
}

// Memory of 40 positions (several blocks of 16 keys) with masked keys inside a block, a fully
// masked block, and NaN in the values and keys of masked positions (stale slots): masked keys
// must be skipped, not weighted by 0.
TEST(GatheredAttention, FastMatchesReferenceAcrossKeyBlocksWithStaleMaskedKeys) {
  const int64_t R = 5, N = 2, S = 40, H = 8, dk = 64, D = H * dk;
  Tensor q = randomF32({R, 1, D}, 14), k = randomF32({N, S, D}, 15), v = randomF32({N, S, D}, 16);
  std::vector<uint8_t> keepBits(size_t(N * S), 1);
  for (int64_t s : {3, 17, 18, 39}) keepBits[size_t(s)] = 0;  // sentence 0: holes
  for (int64_t s = 16; s < S; ++s) keepBits[size_t(S + s)] = 0;  // sentence 1: 16 keys
  for (int64_t i = 0; i < N * S; ++i)
    if (!keepBits[size_t(i)])
      for (int64_t j = 0; j < D; ++j) k.data<float>()[i * D + j] = v.data<float>()[i * D + j] = std::nanf("");
  Tensor keep = Tensor::boolean({N, S}, keepBits);
  Tensor rows = Tensor::i32({R}, {1, 0, 0, 1, 1});
  Attrs attrs = stepAttrs(H, dk);
  attrs["k_offset"] = AttrValue::ofInt(0);
  attrs["v_offset"] = AttrValue::ofInt(0);
  SingleOp op("tfm.gathered_attention", {{q}, {k}, {v}, {keep}, {rows}}, attrs);
  op.compare(stepKernel("gathered", dk), 1e-5, 1e-4);
  Tensor out = op.run(KernelBackend::Dnnl);
  for (int64_t i = 0; i < out.numel(); ++i) ASSERT_TRUE(std::isfinite(out.data<float>()[i])) << i;
}

// The translator's slot memory is as long as the longest source of the whole call; the fast
// kernel reads only up to each sentence's last kept key. The result must be the same, to the bit,
// as on the memory cut to that length: sentences of 17, 1, 9 and 0 kept keys (one hole) in 48
// positions whose tail holds NaN (never read) on both backends.
TEST(GatheredAttention, TrailingMaskedKeysChangeNoBit) {
  const int64_t R = 6, N = 4, S = 48, cut = 17, H = 4, dk = 64, D = H * dk;
  const int64_t live[N] = {17, 1, 9, 0};
  Tensor q = randomF32({R, 1, D}, 21), k = randomF32({N, S, D}, 22), v = randomF32({N, S, D}, 23);
  std::vector<uint8_t> keepBits(size_t(N * S), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < live[n]; ++s) keepBits[size_t(n * S + s)] = s != 5;  // a hole at 5
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = cut; s < S; ++s)
      for (int64_t j = 0; j < D; ++j) k.data<float>()[(n * S + s) * D + j] = v.data<float>()[(n * S + s) * D + j] = std::nanf("");
  Tensor kCut = prefix(k, N, cut), vCut = prefix(v, N, cut);
  std::vector<uint8_t> keepCut(size_t(N * cut));
  for (int64_t n = 0; n < N; ++n)
    std::copy(keepBits.begin() + n * S, keepBits.begin() + n * S + cut, keepCut.begin() + n * cut);
  Tensor rows = Tensor::i32({R}, {0, 1, 2, 3, 0, 2});
  Attrs attrs = stepAttrs(H, dk);
  attrs["k_offset"] = AttrValue::ofInt(0);
  attrs["v_offset"] = AttrValue::ofInt(0);
  SingleOp full("tfm.gathered_attention", {{q}, {k}, {v}, {Tensor::boolean({N, S}, keepBits)}, {rows}}, attrs);
  SingleOp shorter("tfm.gathered_attention", {{q}, {kCut}, {vCut}, {Tensor::boolean({N, cut}, keepCut)}, {rows}}, attrs);
  for (KernelBackend backend : {KernelBackend::Reference, KernelBackend::Dnnl}) {
    Tensor a = full.run(backend), b = shorter.run(backend);
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << backendName(backend) << " element " << i;
  }
  full.compare(stepKernel("gathered", dk), 1e-5, 1e-4);
}

// The claim behind the gathered attention's trimming, on each body this CPU can run: masked keys
// at the end of a row (finite keys and values) leave the result unchanged to the bit when the
// keys are cut after the last kept one -- per (row, head) and all heads at once, with lengths
// that end inside and at the edge of the 8- and 16-key groups.
TEST(StepAttention, CuttingMaskedTailKeysChangesNoBit) {
  using Body = void (*)(const float *, const float *, int64_t, const float *, int64_t, const uint8_t *, int64_t, int64_t,
                        float, float *, float *);
  struct Variant {
    const char *name;
    Body body;
    bool allHeads;
  };
  std::vector<Variant> variants{{"reference", decode::attendReference, false}};
  if (attention::cpuHasAvx2Fma()) {
    variants.push_back({"avx2", decode::attendAvx2, false});
    variants.push_back({"avx2 all heads", decode::attendAllHeads64Avx2, true});
  }
  if (attention::cpuHasAvx512()) {
    variants.push_back({"avx512", decode::attendAvx512, false});
    variants.push_back({"avx512 all heads", decode::attendAllHeads64Avx512, true});
  }
  const int64_t S = 48, H = 4, dk = 64, stride = H * dk;
  Tensor q = randomF32({stride}, 61), k = randomF32({S, stride}, 62), v = randomF32({S, stride}, 63, -2.0f, 2.0f);
  for (const Variant &var : variants)
    for (int64_t live : {1, 7, 8, 16, 17, 33, 47}) {
      SCOPED_TRACE(::testing::Message() << var.name << ", " << live << " kept keys of " << S);
      std::vector<uint8_t> keep(size_t(S), 0);
      for (int64_t p = 0; p < live; ++p) keep[size_t(p)] = p != 3;  // and a hole
      const int64_t outs = var.allHeads ? H * dk : dk, heads = var.allHeads ? H : dk;
      std::vector<float> scores(static_cast<size_t>(H * (S + 16))), whole(static_cast<size_t>(outs)), cut(static_cast<size_t>(outs));
      var.body(q.data<float>(), k.data<float>(), stride, v.data<float>(), stride, keep.data(), S, heads, 0.125f,
               scores.data(), whole.data());
      var.body(q.data<float>(), k.data<float>(), stride, v.data<float>(), stride, keep.data(), live, heads, 0.125f,
               scores.data(), cut.data());
      for (int64_t j = 0; j < outs; ++j) ASSERT_EQ(whole[size_t(j)], cut[size_t(j)]) << j;
    }
}

// The AVX2 body on its own (AVX-512 machines run the AVX-512 one in the kernels), against
// attendReference: head sizes 8-72 (a 64-column pass plus a partial one), 1-41 keys (tails of the
// 8-key exp loop), keys masked inside and at the end with NaN in their keys and values (skipped,
// not weighted by 0), and a fully masked row (zeros).
TEST(StepAttention, Avx2BodyMatchesReference) {
  if (!attention::cpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2 + FMA";
  for (int64_t dk : {8, 16, 24, 64, 72})
    for (int64_t n : {1, 7, 8, 9, 17, 41})
      for (int mask = 0; mask < 3; ++mask) {
        SCOPED_TRACE(::testing::Message() << "dk " << dk << ", keys " << n << ", mask " << mask);
        const int64_t stride = dk + 3;  // rows of a wider buffer
        Tensor q = randomF32({dk}, 40 + uint64_t(dk)), k = randomF32({n, stride}, 41 + uint64_t(n)),
               v = randomF32({n, stride}, 42 + uint64_t(n));
        std::vector<uint8_t> keep(size_t(n), 1);
        for (int64_t p = 0; p < n; ++p) {
          if (mask == 1 && (p % 3 == 1 || p == n - 1) && n > 1) keep[size_t(p)] = 0;
          if (mask == 2) keep[size_t(p)] = 0;
          if (!keep[size_t(p)])
            for (int64_t j = 0; j < dk; ++j) k.data<float>()[p * stride + j] = v.data<float>()[p * stride + j] = std::nanf("");
        }
        const uint8_t *keepPtr = mask ? keep.data() : nullptr;
        std::vector<float> scores(size_t(n + 8)), fast(size_t(dk), -1.0f), ref(size_t(dk), -1.0f);
        const float scale = 0.125f;
        decode::attendAvx2(q.data<float>(), k.data<float>(), stride, v.data<float>(), stride, keepPtr, n, dk, scale,
                           scores.data(), fast.data());
        decode::attendReference(q.data<float>(), k.data<float>(), stride, v.data<float>(), stride, keepPtr, n, dk, scale,
                                scores.data(), ref.data());
        for (int64_t j = 0; j < dk; ++j) ASSERT_NEAR(fast[size_t(j)], ref[size_t(j)], 1e-5) << j;
      }
}

// The per-(row, head) bodies this CPU can run, on bf16 keys and values, against attendReference
// on the same bf16 values: head sizes the ISA takes (multiples of 8 for AVX2, 16 for AVX-512),
// 1-41 keys, masked keys (bf16 NaN in them, never read), a fully masked row.
TEST(StepAttention, PairBodiesOnBf16KeysAndValuesMatchReference) {
  using Body = void (*)(const float *, const uint16_t *, int64_t, const uint16_t *, int64_t, const uint8_t *, int64_t,
                        int64_t, float, float *, float *);
  struct Isa { const char *name; Body body; int64_t multiple; };
  std::vector<Isa> isas;
  if (attention::cpuHasAvx2Fma()) isas.push_back({"avx2", decode::attendAvx2Bf16, 8});
  if (attention::cpuHasAvx512()) isas.push_back({"avx512", decode::attendAvx512Bf16, 16});
  if (isas.empty()) GTEST_SKIP() << "no AVX2 + FMA";
  for (const Isa &isa : isas)
    for (int64_t dk : {8, 16, 24, 32, 72, 128}) {
      if (dk % isa.multiple) continue;
      for (int64_t n : {1, 7, 9, 17, 41})
        for (int mask = 0; mask < 3; ++mask) {
          SCOPED_TRACE(::testing::Message() << isa.name << ", dk " << dk << ", keys " << n << ", mask " << mask);
          const int64_t stride = dk + 3;
          Tensor q = randomF32({dk}, 70 + uint64_t(dk)), kf = randomF32({n, stride}, 71 + uint64_t(n)),
                 vf = randomF32({n, stride}, 72 + uint64_t(n));
          std::vector<uint16_t> k(size_t(n * stride)), v(size_t(n * stride));
          for (size_t i = 0; i < k.size(); ++i) k[i] = floatToBf16(kf.data<float>()[i]), v[i] = floatToBf16(vf.data<float>()[i]);
          std::vector<uint8_t> keep(size_t(n), 1);
          for (int64_t p = 0; p < n; ++p) {
            if (mask == 1 && (p % 3 == 1 || p == n - 1) && n > 1) keep[size_t(p)] = 0;
            if (mask == 2) keep[size_t(p)] = 0;
            if (!keep[size_t(p)])
              for (int64_t j = 0; j < dk; ++j) k[size_t(p * stride + j)] = v[size_t(p * stride + j)] = 0x7FC0;  // NaN
          }
          const uint8_t *keepPtr = mask ? keep.data() : nullptr;
          std::vector<float> scores(size_t(n + 16)), fast(size_t(dk), -1.0f), ref(size_t(dk), -1.0f);
          isa.body(q.data<float>(), k.data(), stride, v.data(), stride, keepPtr, n, dk, 0.125f, scores.data(), fast.data());
          decode::attendReference(q.data<float>(), k.data(), stride, v.data(), stride, keepPtr, n, dk, 0.125f,
                                  scores.data(), ref.data());
          for (int64_t j = 0; j < dk; ++j) ASSERT_NEAR(fast[size_t(j)], ref[size_t(j)], 1e-5) << j;
        }
    }
}

// The AVX2 all-heads body (head_dim 64) on its own, against attendReference per head: 1-8 heads,
// 1-41 keys (tails of the 8-key groups), keys masked inside a group, a fully masked group and at
// the end, with NaN in their keys and values, and a fully masked row (zeros).
TEST(StepAttention, Avx2AllHeadsBodyMatchesReference) {
  if (!attention::cpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2 + FMA";
  const int64_t dk = 64;
  for (int64_t heads : {1, 4, 5, 8})
    for (int64_t n : {1, 7, 8, 9, 17, 41})
      for (int mask = 0; mask < 3; ++mask) {
        SCOPED_TRACE(::testing::Message() << "heads " << heads << ", keys " << n << ", mask " << mask);
        const int64_t stride = heads * dk + 8;  // key rows of a wider buffer (merged K/V)
        Tensor q = randomF32({heads * dk}, 50 + uint64_t(heads)), k = randomF32({n, stride}, 51 + uint64_t(n)),
               v = randomF32({n, stride}, 52 + uint64_t(n), -2.0f, 2.0f);
        std::vector<uint8_t> keep(size_t(n), 1);
        for (int64_t p = 0; p < n; ++p) {
          if (mask == 1 && n > 1 && (p % 3 == 1 || p == n - 1 || (p >= 16 && p < 24))) keep[size_t(p)] = 0;
          if (mask == 2) keep[size_t(p)] = 0;
          if (!keep[size_t(p)])
            for (int64_t j = 0; j < stride; ++j) k.data<float>()[p * stride + j] = v.data<float>()[p * stride + j] = std::nanf("");
        }
        const uint8_t *keepPtr = mask ? keep.data() : nullptr;
        const float scale = 0.125f;
        std::vector<float> scores(size_t(heads * (n + 16))), fast(size_t(heads * dk), -1.0f), ref(size_t(dk), 0.0f);
        decode::attendAllHeads64Avx2(q.data<float>(), k.data<float>(), stride, v.data<float>(), stride, keepPtr, n, heads,
                                     scale, scores.data(), fast.data());
        for (int64_t h = 0; h < heads; ++h) {
          decode::attendReference(q.data<float>() + h * dk, k.data<float>() + h * dk, stride, v.data<float>() + h * dk,
                                  stride, keepPtr, n, dk, scale, scores.data(), ref.data());
          for (int64_t j = 0; j < dk; ++j) ASSERT_NEAR(fast[size_t(h * dk + j)], ref[size_t(j)], 1e-5) << h << " " << j;
        }
      }
}

// Both all-heads bodies this CPU can run, on bf16 keys and values (tfm-lower-kv-precision),
// against attendReference on the same bf16 values: heads 1-8, 1-41 keys across the 8- and
// 16-key groups, keys masked inside and at the end, and a fully masked row.
TEST(StepAttention, AllHeadsBodiesOnBf16KeysAndValuesMatchReference) {
  using Body = void (*)(const float *, const uint16_t *, int64_t, const uint16_t *, int64_t, const uint8_t *, int64_t,
                        int64_t, float, float *, float *);
  std::vector<std::pair<const char *, Body>> bodies;
  if (attention::cpuHasAvx2Fma()) bodies.push_back({"avx2", decode::attendAllHeads64Avx2Bf16});
  if (attention::cpuHasAvx512()) bodies.push_back({"avx512", decode::attendAllHeads64Avx512Bf16});
  if (bodies.empty()) GTEST_SKIP() << "no AVX2 + FMA";
  const int64_t dk = 64;
  for (const auto &[isa, body] : bodies)
    for (int64_t heads : {1, 4, 5, 8})
      for (int64_t n : {1, 7, 9, 16, 17, 41})
        for (int mask = 0; mask < 3; ++mask) {
          SCOPED_TRACE(::testing::Message() << isa << ", heads " << heads << ", keys " << n << ", mask " << mask);
          const int64_t stride = heads * dk + 8;
          Tensor q = randomF32({heads * dk}, 60 + uint64_t(heads));
          Tensor kf = randomF32({n, stride}, 61 + uint64_t(n)), vf = randomF32({n, stride}, 62 + uint64_t(n), -2.0f, 2.0f);
          std::vector<uint16_t> k(size_t(n * stride)), v(size_t(n * stride));
          for (size_t i = 0; i < k.size(); ++i) k[i] = floatToBf16(kf.data<float>()[i]), v[i] = floatToBf16(vf.data<float>()[i]);
          std::vector<uint8_t> keep(size_t(n), 1);
          for (int64_t p = 0; p < n; ++p) {
            if (mask == 1 && n > 1 && (p % 3 == 1 || p == n - 1)) keep[size_t(p)] = 0;
            if (mask == 2) keep[size_t(p)] = 0;
          }
          const uint8_t *keepPtr = mask ? keep.data() : nullptr;
          const float scale = 0.125f;
          std::vector<float> scores(size_t(heads * (n + 16))), fast(size_t(heads * dk), -1.0f), ref(size_t(dk), 0.0f);
          body(q.data<float>(), k.data(), stride, v.data(), stride, keepPtr, n, heads, scale, scores.data(), fast.data());
          for (int64_t h = 0; h < heads; ++h) {
            decode::attendReference(q.data<float>() + h * dk, k.data() + h * dk, stride, v.data() + h * dk, stride, keepPtr,
                                    n, dk, scale, scores.data(), ref.data());
            for (int64_t j = 0; j < dk; ++j) ASSERT_NEAR(fast[size_t(h * dk + j)], ref[size_t(j)], 1e-5) << h << " " << j;
          }
        }
}

TEST(LogSoftmax, FastMatchesReferenceAndNormalises) {
  // Rows of 8000 (a vocabulary) and of 3; large offsets to exercise the max subtraction.
  // Rows of 33 and 17: full vectors of 32 / 16 plus a masked tail.
  const char *fast = attention::cpuHasAvx512()   ? "fast.log_softmax_avx512"
                     : attention::cpuHasAvx2Fma() ? "fast.log_softmax_avx2"
                                                  : "fast.log_softmax";
  for (const Shape &shape : {Shape{37, 1, 8000}, Shape{5, 3}, Shape{4, 33}, Shape{2, 17}, Shape{3, 1}}) {
    Tensor x = randomF32(shape, 21, -30.0f, 30.0f);
    SingleOp op("tfm.log_softmax", {{x}}, {});
    op.compare(fast, 2e-5, 1e-5);
    Tensor y = op.run(KernelBackend::Reference);
    const int64_t n = shape.back();
    for (int64_t r = 0; r < x.numel() / n; ++r) {
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(double(y.data<float>()[r * n + j]));
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

// The AVX2 rows on their own, so AVX-512 machines (where the kernel picks the AVX-512 rows) test
// them too: against double-precision log-softmax, rows of every length 1..40 (tails of 0-7 lanes
// after 0-4 full vectors) and a vocabulary row, with -inf logits (masked) that must give -inf.
TEST(LogSoftmax, Avx2RowsMatchDoublePrecision) {
  if (!attention::cpuHasAvx2Fma()) GTEST_SKIP() << "no AVX2 + FMA";
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 40; ++n) lengths.push_back(n);
  lengths.push_back(8000);
  for (int64_t n : lengths) {
    Tensor x = randomF32({n}, 30 + int(n), -30.0f, 30.0f);
    float *xp = x.data<float>();
    if (n > 2) xp[n / 2] = -std::numeric_limits<float>::infinity();
    std::vector<float> y(size_t(n), 0.0f);
    fast::logSoftmaxRowAvx2(xp, n, y.data());
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, double(xp[j]));
    for (int64_t j = 0; j < n; ++j) sum += std::exp(double(xp[j]) - mx);
    const double lse = mx + std::log(sum);
    for (int64_t j = 0; j < n; ++j) {
      if (std::isinf(xp[j])) {
        EXPECT_TRUE(std::isinf(y[size_t(j)]) && y[size_t(j)] < 0) << n << " " << j;
        continue;
      }
      EXPECT_NEAR(y[size_t(j)], double(xp[j]) - lse, 1e-5 + 1e-6 * std::fabs(double(xp[j]) - lse)) << n << " " << j;
    }
  }
}

// A model whose `step` entry reorders a cache by `parents`, writes `update` at `step`, and
// returns the whole cache (scaled by 1, so the state itself is not an output). `step` is a
// scalar, or {kDyn} for one position per row.
Artifact cacheArtifact(Shape stepShape = {}, int64_t D = 4) {
  Artifact a;
  a.modelName = "cache";
  FunctionBuilder f(a, "step");
  uint32_t update = f.input("update", DType::F32, {kDyn, 1, D});
  uint32_t parents = f.input("parents", DType::I32, {kDyn});
  uint32_t step = f.input("step", DType::I32, stepShape);
  uint32_t cache = f.state("cache", {kDyn, kDyn, D});
  f.inPlace("tfm.cache_reorder", {cache, parents, step}, cache);
  f.inPlace("tfm.cache_write", {cache, update, step}, cache);
  f.output(f.op("tfm.scale", {cache}, DType::F32, {kDyn, kDyn, D}, {{"factor", AttrValue::ofFloat(1.0)}}));
  f.finish();
  return a;
}

// update_offset: the written row is update[r, 0, offset .. offset + D) of a wider update (the
// merged Q/K/V projection), on both backends.
TEST(SessionState, CacheWriteReadsTheColumnsAtTheOffset) {
  Artifact a;
  a.modelName = "cache";
  FunctionBuilder f(a, "step");
  uint32_t update = f.input("update", DType::F32, {kDyn, 1, 12});
  uint32_t step = f.input("step", DType::I32, {});
  uint32_t cache = f.state("cache", {kDyn, kDyn, 4});
  f.inPlace("tfm.cache_write", {cache, update, step}, cache, {{"update_offset", AttrValue::ofInt(4)}});
  f.output(f.op("tfm.scale", {cache}, DType::F32, {kDyn, kDyn, 4}, {{"factor", AttrValue::ofFloat(1.0)}}));
  f.finish();
  for (KernelBackend backend : {KernelBackend::Dnnl, KernelBackend::Reference}) {
    auto model = loadModel(a, backend);
    ASSERT_TRUE(model);
    std::unique_ptr<Session> s;
    ASSERT_TRUE(Session::create(*model, s).ok());
    ASSERT_TRUE(s->bindStates({2, 3}).ok());
    std::vector<float> upd(24);
    for (int i = 0; i < 24; ++i) upd[size_t(i)] = float(i);
    std::vector<Tensor> out;
    ASSERT_OK(s->run("step", {Tensor::f32({2, 1, 12}, upd), Tensor::i32({}, {1})}, out));
    ASSERT_EQ(out[0].shape, Shape({2, 3, 4}));
    for (int r = 0; r < 2; ++r)
      for (int p = 0; p < 3; ++p)
        for (int j = 0; j < 4; ++j)
          EXPECT_EQ(out[0].data<float>()[(r * 3 + p) * 4 + j], p == 1 ? float(r * 12 + 4 + j) : 0.0f) << r << p << j;
  }
}

TEST(SessionState, ReorderAndWriteInPlaceLikeABeam) {
  auto model = loadModel(cacheArtifact(), KernelBackend::Dnnl);
  ASSERT_TRUE(model);
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*model, s).ok());
  std::vector<Tensor> out;
  EXPECT_ERROR(s->run("step", {Tensor::f32({1, 1, 4}), Tensor::i32({1}, {0}), Tensor::i32({}, {0})}, out),
               "bindStates");
  ASSERT_TRUE(s->bindStates({4, 5}).ok());
  EXPECT_EQ(s->stateBytes(), 4 * 5 * 4 * 4);
  // Mirror: rows of token lists; the cache row r position p holds value 100 * token + feature.
  std::vector<std::vector<int>> mirror(4);
  const std::vector<std::vector<int32_t>> parentsPerStep{{0, 1, 2, 3}, {1, 1, 0, 3}, {3, 0, 2}, {2, 2, 1, 0}, {3, 1}};
  int token = 1;
  for (size_t t = 0; t < parentsPerStep.size(); ++t) {
    const auto &parents = parentsPerStep[t];
    const int64_t R = int64_t(parents.size());
    std::vector<std::vector<int>> next;
    std::vector<float> upd;
    for (int64_t r = 0; r < R; ++r) {
      next.push_back(mirror[parents[r]]);
      next.back().resize(t);
      next.back().push_back(token);
      for (int j = 0; j < 4; ++j) upd.push_back(float(100 * token + j));
      ++token;
    }
    tfmrt::Status st = s->run("step", {Tensor::f32({R, 1, 4}, upd), Tensor::i32({R}, parents), Tensor::i32({}, {int32_t(t)})}, out);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(out[0].shape, (Shape{4, 5, 4}));
    for (int64_t r = 0; r < R; ++r)
      for (size_t p = 0; p <= t; ++p)
        for (int j = 0; j < 4; ++j)
          ASSERT_EQ(out[0].data<float>()[(r * 5 + int64_t(p)) * 4 + j], float(100 * next[r][p] + j))
              << "step " << t << " row " << r << " position " << p;
    mirror = next;
    mirror.resize(4);
  }
  // Errors are clear and name the operand.
  EXPECT_ERROR(s->run("step", {Tensor::f32({2, 1, 4}), Tensor::i32({2}, {0, 4}), Tensor::i32({}, {1})}, out),
               "parents[1] = 4 is outside [0, 4)");
  EXPECT_ERROR(s->run("step", {Tensor::f32({2, 1, 4}), Tensor::i32({2}, {0, 1}), Tensor::i32({}, {6})}, out),
               "step 6 is outside [0, 6)");
  EXPECT_ERROR(s->run("step", {Tensor::f32({5, 1, 4}), Tensor::i32({5}, {0, 1, 2, 3, 0}), Tensor::i32({}, {1})}, out),
               "5 rows but the cache only 4");
  EXPECT_ERROR(s->bindStates({4}), "1 given");
  EXPECT_ERROR(s->bindStates({0, 3}), ">= 1");
}

// Sizes where the fast kernels split rows over threads (the cases above are below their
// thresholds): 96 rows of 128 features, random parents (sources that are themselves overwritten,
// cycles) for 60 calls, so copies span several 16-position blocks; with one step for all rows,
// and with a step per row (each row continues a random parent at its length, or enters at 0).
// Both backends must hold the mirror's contents, byte for byte.
TEST(SessionState, ReorderAndWriteManyRowsMatchTheMirrorOnBothBackends) {
  constexpr int64_t R = 96, D = 128, T = 40;
  for (bool perRow : {false, true}) {
    std::vector<std::unique_ptr<Model>> models;
    std::vector<std::unique_ptr<Session>> sessions;
    for (KernelBackend backend : {KernelBackend::Dnnl, KernelBackend::Reference}) {
      models.push_back(loadModel(cacheArtifact(perRow ? Shape{kDyn} : Shape{}, D), backend));
      ASSERT_TRUE(models.back());
      sessions.emplace_back();
      ASSERT_TRUE(Session::create(*models.back(), sessions.back()).ok());
      ASSERT_TRUE(sessions.back()->bindStates({R, T}).ok());
    }
    EXPECT_EQ(models[0]->kernelName("step", 0), "fast.cache_reorder");
    EXPECT_EQ(models[0]->kernelName("step", 1), "fast.cache_write");
    EXPECT_EQ(models[1]->kernelName("step", 0), "reference.cache_reorder");
    std::vector<std::vector<int>> mirror(R);  // per row: its tokens
    uint64_t rng = 12345;
    auto next = [&]() { return (rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
    int token = 1;
    int64_t copied = 0;  // positions copied from another row, so the test copies something
    for (int64_t t = 0; t < (perRow ? 60 : T); ++t) {
      std::vector<int32_t> parents(R), steps(R);
      std::vector<std::vector<int>> rows(R);
      std::vector<float> upd;
      for (int64_t r = 0; r < R; ++r) {
        int32_t p = next() % 4 == 0 ? int32_t(r) : int32_t(next() % R);
        int32_t step = int32_t(mirror[size_t(p)].size());
        if (perRow && (step >= T || next() % 10 == 0)) step = 0;  // a sentence enters this row
        parents[size_t(r)] = p, steps[size_t(r)] = step;
        if (step > 0) rows[size_t(r)] = mirror[size_t(p)];
        copied += p != r ? step : 0;
        rows[size_t(r)].push_back(token);
        for (int64_t j = 0; j < D; ++j) upd.push_back(float(token) + float(j) / 256);
        ++token;
      }
      const Tensor stepTensor = perRow ? Tensor::i32({R}, steps) : Tensor::i32({}, {int32_t(t)});
      for (auto &session : sessions) {
        std::vector<Tensor> out;
        ASSERT_OK(session->run("step", {Tensor::f32({R, 1, D}, upd), Tensor::i32({R}, parents), stepTensor}, out));
        for (int64_t r = 0; r < R; ++r)
          for (size_t p = 0; p < rows[size_t(r)].size(); ++p)
            for (int64_t j = 0; j < D; j += 17)
              ASSERT_EQ(out[0].data<float>()[(r * T + int64_t(p)) * D + j], float(rows[size_t(r)][p]) + float(j) / 256)
                  << (perRow ? "per-row steps" : "one step") << ", call " << t << " row " << r << " position " << p;
      }
      mirror = rows;
    }
    EXPECT_GT(copied, 10000) << "the calls must copy rows for this test to mean anything";
  }
}

// Continuous batching through the cache ops: step [R], rows at different positions. A row at
// step 0 (a sentence entering) copies nothing, whatever its parent; every other row copies
// positions [0, step[r]) of its parent (sources that are themselves overwritten included).
TEST(SessionState, ReorderAndWritePerRowSteps) {
  for (KernelBackend backend : {KernelBackend::Dnnl, KernelBackend::Reference}) {
    auto model = loadModel(cacheArtifact({kDyn}), backend);
    ASSERT_TRUE(model);
    std::unique_ptr<Session> s;
    ASSERT_TRUE(Session::create(*model, s).ok());
    ASSERT_TRUE(s->bindStates({4, 40}).ok());
    // Mirror per row: its tokens; cache row r position p holds 100 * token + feature.
    std::vector<std::vector<int>> mirror(4);
    std::vector<Tensor> out;
    // (parents, steps) per call; row r's step must equal its parent's length (or 0: entering).
    struct Call {
      std::vector<int32_t> parents, steps;
    };
    const std::vector<Call> calls{{{0, 1}, {0, 0}},
                                  {{0, 1, 0}, {1, 1, 0}},          // row 2 enters late (parent ignored)
                                  {{2, 0, 1, 3}, {1, 2, 2, 0}},    // a rotation; row 3 enters
                                  {{1, 3, 2, 3}, {3, 1, 3, 1}},
                                  {{2, 0, 1, 1}, {4, 4, 2, 2}},
                                  {{3, 2, 0, 1}, {3, 3, 5, 5}}};
    int token = 1;
    for (size_t t = 0; t < calls.size(); ++t) {
      const Call &c = calls[t];
      const int64_t R = int64_t(c.parents.size());
      std::vector<std::vector<int>> next = mirror;
      std::vector<float> upd;
      for (int64_t r = 0; r < R; ++r) {
        std::vector<int> row = c.steps[r] == 0 ? std::vector<int>{} : mirror[c.parents[r]];
        ASSERT_EQ(int64_t(row.size()), c.steps[r]) << "call " << t << " row " << r << ": test script";
        row.push_back(token);
        next[r] = row;
        for (int j = 0; j < 4; ++j) upd.push_back(float(100 * token + j));
        ++token;
      }
      tfmrt::Status st = s->run("step", {Tensor::f32({R, 1, 4}, upd), Tensor::i32({R}, c.parents), Tensor::i32({R}, c.steps)}, out);
      ASSERT_TRUE(st.ok()) << st.message();
      for (int64_t r = 0; r < R; ++r)
        for (size_t p = 0; p < next[r].size(); ++p)
          for (int j = 0; j < 4; ++j)
            ASSERT_EQ(out[0].data<float>()[(r * 40 + int64_t(p)) * 4 + j], float(100 * next[r][p] + j))
                << backendName(backend) << " call " << t << " row " << r << " position " << p;
      mirror = next;
    }
    EXPECT_ERROR(s->run("step", {Tensor::f32({2, 1, 4}), Tensor::i32({2}, {0, 1}), Tensor::i32({2}, {1, 40})}, out),
                 "step 40 (row 1) is outside [0, 40)");
    EXPECT_ERROR(s->run("step", {Tensor::f32({2, 1, 4}), Tensor::i32({2}, {0, 1}), Tensor::i32({3}, {1, 2, 3})}, out),
                 "one position per row");
  }
}

// One vector as inputs and outputs: the inputs stay valid for the whole call (results are
// computed in the arena and replace them at the end).
TEST(SessionState, SameVectorForInputsAndOutputs) {
  auto model = loadModel(cacheArtifact(), KernelBackend::Dnnl);
  ASSERT_TRUE(model);
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*model, s).ok());
  ASSERT_TRUE(s->bindStates({2, 3}).ok());
  std::vector<Tensor> io{Tensor::f32({2, 1, 4}, std::vector<float>(8, 5.0f)), Tensor::i32({2}, {0, 1}), Tensor::i32({}, {0})};
  tfmrt::Status st = s->run("step", io, io);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(io.size(), 1u);
  ASSERT_EQ(io[0].shape, (Shape{2, 3, 4}));
  EXPECT_EQ(io[0].data<float>()[0], 5.0f);             // row 0, position 0
  EXPECT_EQ(io[0].data<float>()[(1 * 3) * 4], 5.0f);   // row 1, position 0
}

TEST(SessionState, SessionsAreIndependentAndStatesReused) {
  auto model = loadModel(cacheArtifact(), KernelBackend::Reference);
  ASSERT_TRUE(model);
  std::unique_ptr<Session> a, b;
  ASSERT_TRUE(Session::create(*model, a).ok());
  ASSERT_TRUE(Session::create(*model, b).ok());
  ASSERT_TRUE(a->bindStates({2, 3}).ok());
  ASSERT_TRUE(b->bindStates({2, 3}).ok());
  std::vector<Tensor> outA, outB;
  ASSERT_TRUE(a->run("step", {Tensor::f32({2, 1, 4}, std::vector<float>(8, 7.0f)), Tensor::i32({2}, {0, 1}), Tensor::i32({}, {0})}, outA).ok());
  ASSERT_TRUE(b->run("step", {Tensor::f32({2, 1, 4}, std::vector<float>(8, 9.0f)), Tensor::i32({2}, {0, 1}), Tensor::i32({}, {0})}, outB).ok());
  EXPECT_EQ(a->state("cache")->data<float>()[0], 7.0f);
  EXPECT_EQ(b->state("cache")->data<float>()[0], 9.0f);
  // A smaller binding keeps the allocation (no re-allocation per batch); a larger one grows it.
  const void *before = a->state("cache")->rawData();
  ASSERT_TRUE(a->bindStates({1, 2}).ok());
  EXPECT_EQ(a->state("cache")->rawData(), before);
  ASSERT_TRUE(a->bindStates({3, 3}).ok());
  EXPECT_EQ(a->state("cache")->shape, (Shape{3, 3, 4}));
  // Growing one dim keeps the other's larger size (batches alternate between more rows and more
  // positions without re-allocating each time).
  ASSERT_TRUE(a->bindStates({2, 5}).ok());
  EXPECT_EQ(a->state("cache")->shape, (Shape{3, 5, 4}));
  EXPECT_EQ(a->state("nope"), nullptr);
}

TEST(SessionState, ArtifactRulesForState) {
  {  // state is read through the Session, never returned
    Artifact a = cacheArtifact();
    a.functions[0].outputs = {3};
    EXPECT_ERROR(validateArtifact(a), "session state");
  }
  {  // a state value must refer to an existing state with its shape
    Artifact a = cacheArtifact();
    a.functions[0].values[3].index = 5;
    EXPECT_ERROR(validateArtifact(a), "state index 5 out of range");
    a = cacheArtifact();
    a.states[0].shape = {kDyn, kDyn, 8};
    EXPECT_ERROR(validateArtifact(a), "but state 'cache' is");
  }
  {  // round trip through the file format
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(serializeArtifact(cacheArtifact(), bytes).ok());
    Artifact back;
    ASSERT_TRUE(deserializeArtifact(bytes.data(), bytes.size(), back).ok());
    ASSERT_EQ(back.states.size(), 1u);
    EXPECT_EQ(back.states[0].name, "cache");
    EXPECT_EQ(back.states[0].shape, (Shape{kDyn, kDyn, 4}));
  }
}


// bf16 keys and values (tfm-lower-kv-precision). `t` rounded to bf16, and the same values as f32
// (exact: bf16 widens to f32 without loss).
Tensor asBf16(const Tensor &t) { return Tensor::bf16(t.shape, std::vector<float>(t.data<float>(), t.data<float>() + t.numel())); }
Tensor widened(const Tensor &b) {
  Tensor out(DType::F32, b.shape);
  for (int64_t i = 0; i < b.numel(); ++i) out.data<float>()[i] = bf16ToFloat(b.data<uint16_t>()[i]);
  return out;
}

// With bf16 keys and values the step attentions compute what they compute on those values
// widened to f32: fast (the AVX-512 all-heads body where the CPU has it, else per (row, head)) and
// reference against the f32 kernels on the widened values, head_dim 64 and 32, masked keys in
// the gathered one.
TEST(Bf16KeysAndValues, StepAttentionEqualsF32OnTheWidenedValues) {
  for (int64_t dk : {64, 32}) {
    SCOPED_TRACE(dk);
    const int64_t R = 6, N = 3, S = 21, H = 4, D = H * dk, Tc = 19;
    Tensor q = randomF32({R, 1, D}, 41);
    Tensor kb = asBf16(randomF32({N, S, D}, 42)), vb = asBf16(randomF32({N, S, D}, 43));
    std::vector<uint8_t> keepBits(size_t(N * S), 1);
    for (int64_t s : {2, 16, 17, 20}) keepBits[size_t(S + s)] = 0;
    for (int64_t s = 9; s < S; ++s) keepBits[size_t(2 * S + s)] = 0;
    Tensor keep = Tensor::boolean({N, S}, keepBits), rows = Tensor::i32({R}, {2, 0, 1, 1, 2, 0});
    Attrs attrs = stepAttrs(H, dk);
    attrs["k_offset"] = AttrValue::ofInt(0);
    attrs["v_offset"] = AttrValue::ofInt(0);
    SingleOp gathered("tfm.gathered_attention", {{q}, {kb}, {vb}, {keep}, {rows}}, attrs);
    SingleOp gatheredF32("tfm.gathered_attention", {{q}, {widened(kb)}, {widened(vb)}, {keep}, {rows}}, attrs);
    Tensor ck = asBf16(randomF32({R, Tc, D}, 44)), cv = asBf16(randomF32({R, Tc, D}, 45));
    Tensor steps = Tensor::i32({R}, {0, 5, 18, 16, 1, 11});
    SingleOp cached("tfm.cached_attention", {{q}, {ck}, {cv}, {steps}}, stepAttrs(H, dk));
    SingleOp cachedF32("tfm.cached_attention", {{q}, {widened(ck)}, {widened(cv)}, {steps}}, stepAttrs(H, dk));
    for (KernelBackend backend : {KernelBackend::Dnnl, KernelBackend::Reference}) {
      EXPECT_TRUE(allClose(gathered.run(backend), gatheredF32.run(KernelBackend::Reference), 1e-5, 1e-4));
      EXPECT_TRUE(allClose(cached.run(backend), cachedF32.run(KernelBackend::Reference), 1e-5, 1e-4));
    }
  }
}

// tfm.attention_weights (the translator's word alignment) against its definition written out
// here: per row, the mean over heads of softmax(q_h k_h^T * scale) over the sentence's kept keys,
// with q and k read at offsets in wider buffers, holes in the mask, NaN in masked keys (stale
// slots: never read), and a fully masked sentence (zeros); then the same weights times V give
// tfm.gathered_attention's output (one head: the weights are that head's), and bf16 keys equal
// f32 keys widened.
TEST(AttentionWeights, MatchTheirDefinitionAndGatheredAttention) {
  // 7 rows of head_dim 16 (one thread; the fast kernel's portable loops), then 96 rows of
  // head_dim 64 over 40 keys (rows in parallel; the AVX-512 all-heads body where the CPU has it).
  for (int64_t R : {7, 96}) {
    SCOPED_TRACE(R);
    const int64_t N = 3, S = R == 7 ? 13 : 40, H = 4, dk = R == 7 ? 16 : 64, D = H * dk, qOff = 5, kOff = 3;
    Tensor q = randomF32({R, 1, D + qOff + 2}, 51), k = randomF32({N, S, D + kOff}, 52);
    std::vector<uint8_t> keepBits(size_t(N * S), 1);
    for (int64_t s : {1, 4, 12}) keepBits[size_t(s)] = 0;             // sentence 0: holes
    for (int64_t s = 6; s < S; ++s) keepBits[size_t(S + s)] = 0;      // sentence 1: 6 keys
    for (int64_t s = 0; s < S; ++s) keepBits[size_t(2 * S + s)] = 0;  // sentence 2: none
    for (int64_t i = 0; i < N * S; ++i)
      if (!keepBits[size_t(i)])
        for (int64_t j = 0; j < D + kOff; ++j) k.data<float>()[i * (D + kOff) + j] = std::nanf("");
    std::vector<int32_t> rowIds(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) rowIds[size_t(r)] = int32_t((r * 5 + r / 3) % N);
    Tensor keep = Tensor::boolean({N, S}, keepBits), rows = Tensor::i32({R}, rowIds);
    Attrs attrs = stepAttrs(H, dk, qOff);
    attrs["k_offset"] = AttrValue::ofInt(kOff);
    const double scale = 1.0 / std::sqrt(double(dk));
    SingleOp op("tfm.attention_weights", {{q}, {k}, {keep}, {rows}}, attrs);
    const bool allHeads = attention::cpuHasAvx512() && dk == 64;
    op.compare(allHeads ? "fast.attention_weights_avx512" : "fast.attention_weights_portable", 1e-6, 1e-5);
    Tensor w = op.run(KernelBackend::Dnnl);
    ASSERT_EQ(w.shape, (Shape{R, 1, S}));
    for (int64_t r = 0; r < R; ++r) {
      const int64_t n = rows.data<int32_t>()[r];
      std::vector<double> expected(size_t(S), 0.0);
      for (int64_t h = 0; h < H; ++h) {
        std::vector<double> e(size_t(S), 0.0);
        double mx = -INFINITY, sum = 0;
        for (int64_t p = 0; p < S; ++p) {
          if (!keepBits[size_t(n * S + p)]) continue;
          double dot = 0;
          for (int64_t j = 0; j < dk; ++j)
            dot += double(q.data<float>()[r * (D + qOff + 2) + qOff + h * dk + j]) *
                   double(k.data<float>()[(n * S + p) * (D + kOff) + kOff + h * dk + j]);
          e[size_t(p)] = dot * scale;
          mx = std::max(mx, e[size_t(p)]);
        }
        if (mx == -INFINITY) continue;
        for (int64_t p = 0; p < S; ++p)
          if (keepBits[size_t(n * S + p)]) sum += (e[size_t(p)] = std::exp(e[size_t(p)] - mx));
        for (int64_t p = 0; p < S; ++p)
          if (keepBits[size_t(n * S + p)]) expected[size_t(p)] += e[size_t(p)] / sum / double(H);
      }
      double total = 0;
      for (int64_t p = 0; p < S; ++p) {
        EXPECT_NEAR(w.data<float>()[r * S + p], expected[size_t(p)], 1e-6) << "row " << r << " key " << p;
        total += w.data<float>()[r * S + p];
      }
      EXPECT_NEAR(total, n == 2 ? 0.0 : 1.0, 1e-5) << "row " << r;
    }
  }
  const int64_t R = 7, N = 3, S = 13;
  std::vector<uint8_t> keepBits(size_t(N * S), 1);
  for (int64_t s = 6; s < S; ++s) keepBits[size_t(S + s)] = 0;
  for (int64_t s = 0; s < S; ++s) keepBits[size_t(2 * S + s)] = 0;
  Tensor keep = Tensor::boolean({N, S}, keepBits), rows = Tensor::i32({R}, {0, 1, 2, 1, 0, 0, 1});
  // One head: sum_p w_p v_p is gathered attention's output.
  const int64_t dk1 = 32;
  Tensor q1 = randomF32({R, 1, dk1}, 53), k1 = randomF32({N, S, dk1}, 54), v1 = randomF32({N, S, dk1}, 55);
  Attrs one = stepAttrs(1, dk1);
  Tensor w1 = SingleOp("tfm.attention_weights", {{q1}, {k1}, {keep}, {rows}}, one).run(KernelBackend::Dnnl);
  Tensor ctx = SingleOp("tfm.gathered_attention", {{q1}, {k1}, {v1}, {keep}, {rows}}, one).run(KernelBackend::Reference);
  for (int64_t r = 0; r < R; ++r) {
    const int64_t n = rows.data<int32_t>()[r];
    for (int64_t j = 0; j < dk1; ++j) {
      double y = 0;
      for (int64_t p = 0; p < S; ++p)
        if (keepBits[size_t(n * S + p)]) y += double(w1.data<float>()[r * S + p]) * double(v1.data<float>()[(n * S + p) * dk1 + j]);
      EXPECT_NEAR(ctx.data<float>()[r * dk1 + j], y, 1e-5) << "row " << r << " column " << j;
    }
  }
  // bf16 keys: the weights of the widened keys (up to the summation order of the two
  // instantiations), on the portable loops (head_dim 32) and the AVX-512 body (64).
  Tensor k64 = asBf16(randomF32({N, S, 4 * 64}, 56)), q64 = randomF32({R, 1, 4 * 64}, 57);
  Tensor wb64 = SingleOp("tfm.attention_weights", {{q64}, {k64}, {keep}, {rows}}, stepAttrs(4, 64)).run(KernelBackend::Dnnl);
  Tensor ww64 = SingleOp("tfm.attention_weights", {{q64}, {widened(k64)}, {keep}, {rows}}, stepAttrs(4, 64)).run(KernelBackend::Reference);
  EXPECT_TRUE(allClose(wb64, ww64, 1e-6, 1e-5));
  Tensor kb = asBf16(k1);
  Tensor wb = SingleOp("tfm.attention_weights", {{q1}, {kb}, {keep}, {rows}}, one).run(KernelBackend::Dnnl);
  Tensor ww = SingleOp("tfm.attention_weights", {{q1}, {widened(kb)}, {keep}, {rows}}, one).run(KernelBackend::Dnnl);
  EXPECT_TRUE(allClose(wb, ww, 1e-6, 1e-6));
}

// tfm.to_bf16 rounds to nearest, ties to even, on both backends: exact halfway cases both ways,
// values just past halfway, a negative, a large finite value (3e38: the rounding carries into
// the exponent), NaN (stays NaN), signed zeros, and a tensor long enough for the fast kernel's
// chunks and threads.
TEST(Bf16KeysAndValues, ToBf16RoundsToNearestEven) {
  const float tieDown = 1.0f + 0x1p-8f, tieUp = 1.0f + 3 * 0x1p-8f, past = 1.0f + 0x1p-8f + 0x1p-20f;
  std::vector<float> x{tieDown, tieUp, past, -tieUp, 3.0e38f, std::nanf(""), 0.0f, -0.0f};
  const std::vector<uint16_t> want{0x3F80, 0x3F82, 0x3F81, 0xBF82, 0x7F62, 0, 0x0000, 0x8000};
  Tensor big = randomF32({3, 40001}, 46);
  for (KernelBackend backend : {KernelBackend::Dnnl, KernelBackend::Reference}) {
    SingleOp small("tfm.to_bf16", {{Tensor::f32({int64_t(x.size())}, x)}}, {}, DType::BF16);
    Tensor y = small.run(backend);
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) EXPECT_TRUE(std::isnan(bf16ToFloat(y.data<uint16_t>()[i])));
      else EXPECT_EQ(y.data<uint16_t>()[i], want[i]) << i;
    }
    SingleOp many("tfm.to_bf16", {{big}}, {}, DType::BF16);
    Tensor z = many.run(backend);
    for (int64_t i = 0; i < big.numel(); ++i) ASSERT_EQ(z.data<uint16_t>()[i], floatToBf16(big.data<float>()[i])) << i;
  }
}

// A bf16 cache in session state: tfm.cache_write stores each row rounded to bf16, and
// tfm.cache_reorder moves bf16 rows like a beam (both backends).
TEST(Bf16KeysAndValues, CacheWriteRoundsAndReorderMovesBf16Rows) {
  const int64_t D = 6;
  Artifact a;
  a.modelName = "cache";
  FunctionBuilder f(a, "step");
  uint32_t update = f.input("update", DType::F32, {kDyn, 1, D});
  uint32_t parents = f.input("parents", DType::I32, {kDyn});
  uint32_t step = f.input("step", DType::I32, {kDyn});
  uint32_t cache = f.state("cache", {kDyn, kDyn, D}, DType::BF16);
  f.inPlace("tfm.cache_reorder", {cache, parents, step}, cache);
  f.inPlace("tfm.cache_write", {cache, update, step}, cache);
  // The cache is read back with Session::state; the entry returns its update.
  f.output(f.op("tfm.scale", {update}, DType::F32, {kDyn, 1, D}, {{"factor", AttrValue::ofFloat(1.0)}}));
  f.finish();
  for (KernelBackend backend : {KernelBackend::Dnnl, KernelBackend::Reference}) {
    SCOPED_TRACE(int(backend));
    auto model = loadModel(a, backend);
    ASSERT_TRUE(model);
    std::unique_ptr<Session> s;
    ASSERT_TRUE(Session::create(*model, s).ok());
    ASSERT_TRUE(s->bindStates({3, 4}).ok());
    EXPECT_EQ(s->stateBytes(), 3 * 4 * D * 2);
    std::vector<Tensor> out;
    // Step 0: rows 0..2 write 1/3, 2/3, 1 (+ column j / 1000): values bf16 cannot hold exactly.
    std::vector<float> upd;
    for (int r = 0; r < 3; ++r)
      for (int j = 0; j < D; ++j) upd.push_back(float(r + 1) / 3.0f + float(j) / 1000.0f);
    ASSERT_OK(s->run("step", {Tensor::f32({3, 1, D}, upd), Tensor::i32({3}, {0, 1, 2}), Tensor::i32({3}, {0, 0, 0})}, out));
    // Step 1: row 0 continues row 2, row 1 row 0, row 2 row 2; each writes -(r + 1) at position 1.
    std::vector<float> upd2;
    for (int r = 0; r < 3; ++r)
      for (int j = 0; j < D; ++j) upd2.push_back(-float(r + 1));
    ASSERT_OK(s->run("step", {Tensor::f32({3, 1, D}, upd2), Tensor::i32({3}, {2, 0, 2}), Tensor::i32({3}, {1, 1, 1})}, out));
    const Tensor *state = s->state("cache");
    ASSERT_NE(state, nullptr);
    ASSERT_EQ(state->dtype, DType::BF16);
    const uint16_t *c = state->data<uint16_t>();
    const int from[3] = {2, 0, 2};
    for (int r = 0; r < 3; ++r)
      for (int j = 0; j < D; ++j) {
        EXPECT_EQ(c[(r * 4 + 0) * D + j], floatToBf16(upd[size_t(from[r] * D + j)])) << r << " " << j;
        EXPECT_EQ(bf16ToFloat(c[(r * 4 + 1) * D + j]), -float(r + 1)) << r << " " << j;
      }
  }
}

}  // namespace
}  // namespace tfmrt::test
