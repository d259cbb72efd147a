// tfm.fused_attention: both flash kernels (AVX-512 when the CPU has it, portable always) against
// the reference kernel on raw buffers over odd lengths, cross-attention, Sq = 1, causal, merged
// QKV offsets, fully masked rows, forced key splits and 1/2 threads; the op through Model on both
// backends against the unfused primitive chain; schema and shape checks.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>

#include "kernels/attention/attention.h"
#include "kernels/gemm/packed_gemm.h"
#include "op_schema.h"
#include "shape_inference.h"
#include "test_util.h"

namespace tfmrt::test {
namespace {

namespace att = tfmrt::attention;

// How q, k, v are laid out in memory.
enum class Qkv {
  Separate,  // three tensors of width heads * head_dim, offsets 0
  Merged,    // self-attention: one [B, S, 3 * H * D] buffer, offsets 0, HD, 2 HD (Sq == Sk only)
  Wide,      // three tensors wider than heads * head_dim, with odd offsets
};

enum class Keep {
  All,        // no padding
  Tail,       // batch b keeps its first Sk - (b * 7 % (Sk + 1)) keys (b = 1 may lose them all)
  Random,     // ~30% of keys dropped at random
  NoneInB0,   // batch 0 has every key masked: all its rows must be zeros
};

struct Case {
  int64_t batch, sq, sk, heads, headDim;
  bool causal;
  Qkv qkv;
  Keep keep;
  float scale;  // 0 = 1 / sqrt(head_dim)
};

std::string caseName(const Case &c) {
  static const char *qkv[] = {"sep", "merged", "wide"};
  static const char *keep[] = {"all", "tail", "rand", "none0"};
  std::string s = "B" + std::to_string(c.batch) + "_Sq" + std::to_string(c.sq) + "_Sk" + std::to_string(c.sk) + "_H" +
                  std::to_string(c.heads) + "_D" + std::to_string(c.headDim) + (c.causal ? "_causal_" : "_") +
                  qkv[int(c.qkv)] + "_" + keep[int(c.keep)];
  if (c.scale != 0) s += "_scale" + std::to_string(int(c.scale));
  return s;
}

// Inputs of one case plus the Params that view them.
struct Problem {
  Tensor q, k, v, keep, out;
  att::Params p;

  explicit Problem(const Case &c, uint64_t seed = 1) {
    const int64_t HD = c.heads * c.headDim;
    p.batch = c.batch;
    p.sq = c.sq;
    p.sk = c.sk;
    p.heads = c.heads;
    p.headDim = c.headDim;
    p.causal = c.causal;
    p.scale = c.scale != 0 ? c.scale : float(1.0 / std::sqrt(double(c.headDim)));
    switch (c.qkv) {
    case Qkv::Separate:
      q = randomF32({c.batch, c.sq, HD}, seed);
      k = randomF32({c.batch, c.sk, HD}, seed + 1);
      v = randomF32({c.batch, c.sk, HD}, seed + 2);
      p.qWidth = p.kWidth = p.vWidth = HD;
      break;
    case Qkv::Merged:
      q = randomF32({c.batch, c.sq, 3 * HD}, seed);  // k, v alias q
      p.qWidth = p.kWidth = p.vWidth = 3 * HD;
      p.kOffset = HD;
      p.vOffset = 2 * HD;
      break;
    case Qkv::Wide:
      q = randomF32({c.batch, c.sq, HD + 5}, seed);
      k = randomF32({c.batch, c.sk, HD + 3}, seed + 1);
      v = randomF32({c.batch, c.sk, HD + 11}, seed + 2);
      p.qWidth = HD + 5, p.qOffset = 5;
      p.kWidth = HD + 3, p.kOffset = 1;
      p.vWidth = HD + 11, p.vOffset = 7;
      break;
    }
    keep = Tensor(DType::Bool, {c.batch, c.sk});
    std::mt19937_64 rng(seed + 3);
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t j = 0; j < c.sk; ++j) {
        uint8_t &x = keep.data<uint8_t>()[b * c.sk + j];
        switch (c.keep) {
        case Keep::All: x = 1; break;
        case Keep::Tail: x = j < c.sk - (b * 7) % (c.sk + 1) ? 1 : 0; break;
        case Keep::Random: x = rng() % 10 < 7 ? 1 : 0; break;
        case Keep::NoneInB0: x = b == 0 ? 0 : 1; break;
        }
      }
    out = Tensor(DType::F32, {c.batch, c.sq, HD});
    p.q = q.data<float>();
    p.k = c.qkv == Qkv::Merged ? q.data<float>() : k.data<float>();
    p.v = c.qkv == Qkv::Merged ? q.data<float>() : v.data<float>();
    p.keep = keep.data<uint8_t>();
  }

  Tensor runReference() {
    out = Tensor(DType::F32, out.shape);
    p.out = out.data<float>();
    att::reference(p);
    return out;
  }

  Tensor runFlash(att::Impl impl, const att::DriverOptions &opts) {
    out = Tensor(DType::F32, out.shape);
    std::fill(out.data<float>(), out.data<float>() + out.numel(), std::nanf(""));  // every element must be written
    p.out = out.data<float>();
    att::Workspace ws;
    att::run(impl, p, ws, opts);
    return out;
  }
};

std::vector<att::Impl> impls() {
  std::vector<att::Impl> v{att::Impl::Portable};
  if (att::cpuHasAvx512()) v.push_back(att::Impl::Avx512);
  return v;
}

// --- flash kernels vs reference ------------------------------------------------------------

class FlashAttention : public ::testing::TestWithParam<Case> {};

TEST_P(FlashAttention, MatchesReference) {
  const Case &c = GetParam();
  Problem prob(c);
  const Tensor ref = prob.runReference();
  // Automatic decomposition, forced key splits, one tile per task, 3 tiles per task (packed K/V,
  // a short last tile), both at once.
  const std::pair<int64_t, int64_t> decompositions[] = {{0, 0}, {3, 0}, {0, 1}, {0, 3}, {2, 3}};
  for (att::Impl impl : impls())
    for (int threads : {1, 2})
      for (auto [splitK, tiles] : decompositions) {
        att::DriverOptions opts;
        opts.threads = threads;
        opts.splitK = splitK;
        opts.tilesPerTask = tiles;
        const Tensor got = prob.runFlash(impl, opts);
        EXPECT_TRUE(allClose(got, ref, 2e-5, 2e-4)) << att::implName(impl) << ", threads " << threads
                                                    << ", splitK " << splitK << ", tiles/task " << tiles;
      }
}

// The bf16 kernel (precision "bf16"): q (pre-scaled) and k rounded to bf16 move each score by at
// most Delta = (2^-8 + 2^-16) scale max_{i,j} sum_d |q_id k_jd| (two roundings of 2^-9 each, exact
// products, f32 sums); that moves every normalised weight by a factor within e^(+-2 Delta), so the
// weighted mean moves by at most (e^(2 Delta) - 1) max|v|. Rounding p and v adds (2^-8 + 2^-16)
// max|v|, the kernel's degree-3 exp2 (relative error <= 7.5e-5, in p and in their sum) 1.5e-4
// max|v|. The measured error is printed beside the bound.
TEST_P(FlashAttention, Bf16WithinTheRoundingBound) {
  if (!att::cpuHasAvx512() || !gemm::cpuHasAvx512Bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const Case &c = GetParam();
  Problem prob(c);
  const Tensor ref = prob.runReference();
  const att::Params &p = prob.p;
  double maxDot = 0, maxV = 0;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t j = 0; j < c.sk; ++j) {
        for (int64_t d = 0; d < c.headDim; ++d) maxV = std::max(maxV, double(std::fabs(p.vRow(b, j, h)[d])));
        for (int64_t i = 0; i < c.sq; ++i) {
          double dot = 0;
          for (int64_t d = 0; d < c.headDim; ++d) dot += std::fabs(double(p.qRow(b, i, h)[d]) * p.kRow(b, j, h)[d]);
          maxDot = std::max(maxDot, dot);
        }
      }
    }
  const double unit = std::ldexp(1.0, -8) + std::ldexp(1.0, -16);
  const double delta = unit * double(p.scale) * maxDot;
  const double bound = (std::expm1(2 * delta) + unit + 1.5e-4) * maxV + 1e-5;
  att::DriverOptions opts;
  for (int threads : {1, 2})
    for (int64_t tiles : {0, 3}) {
      opts.threads = threads;
      opts.tilesPerTask = tiles;
      const Tensor got = prob.runFlash(att::Impl::Avx512Bf16, opts);
      double worst = 0;
      for (int64_t e = 0; e < ref.numel(); ++e)
        worst = std::max(worst, std::fabs(double(got.data<float>()[e]) - ref.data<float>()[e]));
      EXPECT_TRUE(allClose(got, ref, bound, 0)) << "threads " << threads << ", tiles/task " << tiles << ": bound " << bound;
      if (threads == 1 && tiles == 0) std::printf("[ bf16 ] max |error| %.3g, bound %.3g\n", worst, bound);
    }
  // Tiles with even head_dim and visible keys must really run in bf16 (any number of rows).
  const uint8_t *keep = prob.keep.data<uint8_t>();
  if (c.headDim % 2 == 0 && std::any_of(keep, keep + prob.keep.numel(), [](uint8_t x) { return x != 0; })) {
    const Tensor f32 = prob.runFlash(att::Impl::Avx512, {});
    const Tensor bf16 = prob.runFlash(att::Impl::Avx512Bf16, {});
    EXPECT_NE(0, std::memcmp(f32.rawData(), bf16.rawData(), f32.nbytes())) << "the bf16 kernel ran in f32";
  }
}

std::vector<Case> flashCases() {
  std::vector<Case> cases;
  // Odd lengths in self-attention, every mask kind, causal or not, separate / merged / wide inputs.
  for (int64_t s : {1, 3, 17, 63, 65, 129})
    for (bool causal : {false, true}) {
      cases.push_back({2, s, s, 2, 64, causal, Qkv::Separate, Keep::Tail, 0});
      cases.push_back({1, s, s, 3, 32, causal, Qkv::Merged, Keep::Random, 0});
      cases.push_back({3, s, s, 2, 128, causal, Qkv::Wide, Keep::NoneInB0, 0});
    }
  // Cross-attention (Sq != Sk) and decoder steps (Sq = 1 against long keys), incl. causal with
  // Sq < Sk (the diagonal aligned to the end of the keys) and Sq > Sk (leading rows see nothing).
  for (auto [sq, sk] : std::vector<std::pair<int64_t, int64_t>>{{17, 65}, {65, 17}, {1, 129}, {1, 1000}, {3, 300}, {40, 7}})
    for (bool causal : {false, true}) {
      cases.push_back({2, sq, sk, 4, 64, causal, Qkv::Separate, Keep::Tail, 0});
      cases.push_back({1, sq, sk, 2, 32, causal, Qkv::Wide, Keep::Random, 0});
    }
  // Any head_dim works (blocks have tails); heads * head_dim != width via Wide.
  for (int64_t d : {1, 5, 8, 24, 33, 100, 160})
    for (int64_t s : {3, 40}) cases.push_back({2, s, s + 9, 3, d, s == 40, Qkv::Wide, Keep::Random, 0});
  // Peaky softmax (large scores) and all-equal scores (scale 0 is "default", use tiny instead).
  cases.push_back({2, 33, 70, 2, 64, false, Qkv::Separate, Keep::Random, 8.0f});
  cases.push_back({1, 64, 64, 2, 64, true, Qkv::Merged, Keep::All, 30.0f});
  // Full tiles, many chunks.
  cases.push_back({1, 256, 256, 2, 64, true, Qkv::Merged, Keep::Tail, 0});
  cases.push_back({2, 96, 200, 1, 128, false, Qkv::Separate, Keep::Tail, 0});
  // Empty key side: every row is fully masked.
  cases.push_back({2, 5, 0, 2, 32, false, Qkv::Separate, Keep::All, 0});
  cases.push_back({2, 20, 0, 2, 32, true, Qkv::Separate, Keep::All, 0});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttention, ::testing::ValuesIn(flashCases()),
                         [](const ::testing::TestParamInfo<Case> &info) { return caseName(info.param); });

// Every kernel this CPU has, bf16 included.
std::vector<att::Impl> kernelsWithBf16() {
  std::vector<att::Impl> kernels = impls();
  if (gemm::cpuHasAvx512Bf16() && att::cpuHasAvx512()) kernels.push_back(att::Impl::Avx512Bf16);
  return kernels;
}

// A batch whose last sequence is the one under test: sequence b is row (rows of q/k/v) - batch + b
// of q, k, v ([*, maxS, H * D]), each padded to Sq queries and Sk keys; the last keeps its first
// L keys, the others keep all.
struct PaddedBatch {
  const Tensor &q, &k, &v;
  int64_t heads, headDim, batch, sq, sk, L, rows;  // rows: how many output rows to return
  bool causal;
};

// The first `rows` output rows of the batch's last sequence.
std::vector<float> lastSequenceRows(att::Impl impl, const PaddedBatch &c, int threads, int splitTasks = -1) {
  const int64_t HD = c.heads * c.headDim, maxS = c.q.shape[1], from0 = c.q.shape[0] - c.batch;
  Tensor qs(DType::F32, {c.batch, c.sq, HD}), ks(DType::F32, {c.batch, c.sk, HD}), vs(DType::F32, {c.batch, c.sk, HD}),
      keep(DType::Bool, {c.batch, c.sk}), out(DType::F32, {c.batch, c.sq, HD});
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t from = (from0 + b) * maxS * HD;
    std::memcpy(qs.data<float>() + b * c.sq * HD, c.q.data<float>() + from, size_t(c.sq * HD) * sizeof(float));
    std::memcpy(ks.data<float>() + b * c.sk * HD, c.k.data<float>() + from, size_t(c.sk * HD) * sizeof(float));
    std::memcpy(vs.data<float>() + b * c.sk * HD, c.v.data<float>() + from, size_t(c.sk * HD) * sizeof(float));
    for (int64_t j = 0; j < c.sk; ++j) keep.data<uint8_t>()[b * c.sk + j] = b < c.batch - 1 || j < c.L ? 1 : 0;
  }
  att::Params p;
  p.batch = c.batch;
  p.sq = c.sq;
  p.sk = c.sk;
  p.heads = c.heads;
  p.headDim = c.headDim;
  p.causal = c.causal;
  p.scale = 0.125f;
  p.qWidth = p.kWidth = p.vWidth = HD;
  p.q = qs.data<float>();
  p.k = ks.data<float>();
  p.v = vs.data<float>();
  p.keep = keep.data<uint8_t>();
  p.out = out.data<float>();
  att::Workspace ws;
  att::DriverOptions opts;
  opts.threads = threads;
  opts.splitTasks = splitTasks;
  att::run(impl, p, ws, opts);
  const float *first = out.data<float>() + (c.batch - 1) * c.sq * HD;
  return std::vector<float>(first, first + c.rows * HD);
}

// A sequence's rows do not depend on how far it is padded (an encoder block pads every source to
// its longest, a full-prefix decoder batch every prefix), on the other sequences beside it, or on
// the thread count: real lengths 1-3 (tiles of 1-3 rows), 5, 33-35 (a last tile of 1-3 rows) and
// 64, padded by 0-40 positions, alone and third in a batch of three, causal or not, on every
// kernel this CPU has. Last tiles of 1-3 rows once took a separate one-row path that rounded
// differently.
TEST(FlashAttention, RowsDoNotDependOnPaddingOrBatch) {
  constexpr int64_t H = 2, D = 64, HD = H * D, kMaxS = 104;
  const Tensor q = randomF32({3, kMaxS, HD}, 91), k = randomF32({3, kMaxS, HD}, 92), v = randomF32({3, kMaxS, HD}, 93);
  for (const att::Impl impl : kernelsWithBf16())
    for (const bool causal : {false, true})
      for (const int64_t L : {1, 2, 3, 5, 33, 34, 35, 64}) {
        // The last sequence of `batch` (each padded to S) keeps its first L keys.
        auto run = [&](int64_t batch, int64_t S, int threads) {
          return lastSequenceRows(impl, PaddedBatch{q, k, v, H, D, batch, S, S, L, L, causal}, threads);
        };
        const std::vector<float> alone = run(1, L, 1);
        for (const int64_t pad : {1, 2, 3, 13, 29, 31, 40})
          for (const int64_t batch : {1, 3})
            for (const int threads : {1, 2}) {
              SCOPED_TRACE(::testing::Message() << att::implName(impl) << (causal ? " causal" : "") << ", length " << L
                                                << " padded by " << pad << ", batch " << batch << ", " << threads
                                                << " threads");
              const std::vector<float> got = run(batch, L + pad, threads);
              EXPECT_EQ(0, std::memcmp(got.data(), alone.data(), alone.size() * sizeof(float)));
            }
      }
}

// Semantics spot checks of the reference itself: a fully masked row is zeros, a single visible key
// returns its value row, causal hides later keys.
TEST(ReferenceAttention, ByHand) {
  Case c{2, 3, 3, 1, 2, true, Qkv::Separate, Keep::All, 1.0f};
  Problem prob(c);
  uint8_t *keep = prob.keep.data<uint8_t>();
  keep[3] = keep[4] = keep[5] = 0;  // batch 1: no keys
  const Tensor out = prob.runReference();
  const float *v = prob.v.data<float>();
  // Batch 0, query 0 sees key 0 only (causal): out = v[0].
  EXPECT_FLOAT_EQ(out.data<float>()[0], v[0]);
  EXPECT_FLOAT_EQ(out.data<float>()[1], v[1]);
  for (int64_t i = 6; i < 12; ++i) EXPECT_EQ(out.data<float>()[i], 0.0f) << i;
  // Batch 0, query 1: softmax over keys 0, 1 by hand.
  const float *q = prob.q.data<float>(), *k = prob.k.data<float>();
  const double s0 = q[2] * k[0] + q[3] * k[1], s1 = q[2] * k[2] + q[3] * k[3];
  const double p0 = 1.0 / (1.0 + std::exp(s1 - s0));
  EXPECT_NEAR(out.data<float>()[2], p0 * v[0] + (1 - p0) * v[2], 1e-6);
}

// Every split count (incl. more splits than keys) merges to the same result.
TEST(FlashAttentionSplits, AnySplitCountMerges) {
  for (bool causal : {false, true}) {
    Problem prob({2, 5, 77, 2, 40, causal, Qkv::Wide, Keep::Random, 0});
    const Tensor ref = prob.runReference();
    for (att::Impl impl : impls())
      for (int64_t splitK : {1, 2, 5, 16, 77, 200}) {
        att::DriverOptions opts;
        opts.threads = 2;
        opts.splitK = splitK;
        EXPECT_TRUE(allClose(prob.runFlash(impl, opts), ref, 2e-5, 2e-4))
            << att::implName(impl) << " causal " << causal << " splitK " << splitK;
      }
  }
}

// Past kSplitKeys keys a row's sums are taken in fixed key ranges: its bits depend on neither how
// far its sequence is padded, nor the batch beside it, nor the thread count, nor whether the
// ranges run as tasks of their own. Queries of a cross-attention (16 rows: one tile, so at 2+
// threads a batch of one has too few tasks and the ranges become tasks) against 300-1100 real
// keys, and a causal self-attention of 520-700 positions; on every kernel this CPU has. The ranges
// were once chosen by load (threads and batch), and such rows changed in the last bits.
TEST(FlashAttentionSplits, LongRowsDoNotDependOnPaddingBatchOrThreads) {
  constexpr int64_t H = 2, D = 64, HD = H * D, kMaxS = 1400;
  const Tensor q = randomF32({2, kMaxS, HD}, 81), k = randomF32({2, kMaxS, HD}, 82), v = randomF32({2, kMaxS, HD}, 83);
  for (const att::Impl impl : kernelsWithBf16()) {
    for (const int64_t L : {300, 512, 513, 700, 1100}) {
      auto run = [&](int64_t batch, int64_t pad, int threads, int splitTasks) {
        return lastSequenceRows(impl, PaddedBatch{q, k, v, H, D, batch, 16, L + pad, L, 16, false}, threads, splitTasks);
      };
      const std::vector<float> alone = run(1, 0, 1, -1);
      for (const int64_t pad : {0, 13, 300})
        for (const int64_t batch : {1, 2})
          for (const int threads : {1, 2, 3, 8})
            for (const int splitTasks : {-1, 0, 1}) {
              SCOPED_TRACE(::testing::Message() << att::implName(impl) << ", cross-attention over " << L
                                                << " keys padded by " << pad << ", batch " << batch << ", "
                                                << threads << " threads, splitTasks " << splitTasks);
              const std::vector<float> got = run(batch, pad, threads, splitTasks);
              ASSERT_EQ(0, std::memcmp(got.data(), alone.data(), alone.size() * sizeof(float)));
            }
    }
    for (const int64_t L : {520, 700}) {
      auto run = [&](int64_t batch, int64_t pad, int threads, int splitTasks) {
        return lastSequenceRows(impl, PaddedBatch{q, k, v, H, D, batch, L + pad, L + pad, L, L, true}, threads, splitTasks);
      };
      const std::vector<float> alone = run(1, 0, 1, -1);
      for (const int64_t pad : {0, 200})
        for (const int64_t batch : {1, 2})
          for (const int threads : {1, 2, 8}) {
            SCOPED_TRACE(::testing::Message() << att::implName(impl) << ", causal self-attention over " << L
                                              << " positions padded by " << pad << ", batch " << batch << ", "
                                              << threads << " threads");
            const std::vector<float> got = run(batch, pad, threads, 1);
            ASSERT_EQ(0, std::memcmp(got.data(), alone.data(), alone.size() * sizeof(float)));
          }
    }
  }
}

// The bf16 kernel packs each key range's K/V (at most kSplitKeys rows), so a short row padded
// past 8 MB of K/V (9000 keys at head_dim 128) still runs in bf16: it once fell back to the f32
// kernel there, and its bits changed with the padding.
TEST(FlashAttentionSplits, Bf16RowsPaddedPastThePackBuffer) {
  if (!att::cpuHasAvx512() || !gemm::cpuHasAvx512Bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  constexpr int64_t H = 1, D = 128, kMaxS = 9000;
  const Tensor q = randomF32({1, kMaxS, H * D}, 71), k = randomF32({1, kMaxS, H * D}, 72), v = randomF32({1, kMaxS, H * D}, 73);
  for (const int64_t L : {40, 700}) {
    auto run = [&](int64_t Sk) {
      return lastSequenceRows(att::Impl::Avx512Bf16, PaddedBatch{q, k, v, H, D, 1, 4, Sk, L, 4, false}, 2);
    };
    const std::vector<float> alone = run(L);
    const std::vector<float> padded = run(kMaxS);
    EXPECT_EQ(0, std::memcmp(padded.data(), alone.data(), alone.size() * sizeof(float))) << L << " keys";
  }
}

// Key ranges of unequal size on either side of the pack limit (8 MB of K/V): 16385 keys at
// head_dim 128 in 2 ranges, 8193 keys (not packed) and 8192 (packed, with 64 query rows). The
// driver once sized the scratch for the longer range only, which does not pack, and the shorter
// one packed past it.
TEST(FlashAttentionSplits, UnevenRangesAcrossThePackLimit) {
  Problem prob({1, 64, 16385, 1, 128, false, Qkv::Separate, Keep::All, 0});
  const Tensor ref = prob.runReference();
  for (att::Impl impl : impls())
    for (const int threads : {1, 2}) {
      att::DriverOptions opts;
      opts.threads = threads;
      opts.splitK = 2;
      EXPECT_TRUE(allClose(prob.runFlash(impl, opts), ref, 2e-5, 2e-4)) << att::implName(impl) << ", " << threads << " threads";
    }
}

// A decoder step at B * H = 2 with long keys takes the automatic key split on 2 threads.
TEST(FlashAttentionSplits, DecoderStepAutoSplit) {
  Problem prob({1, 1, 4096, 2, 64, false, Qkv::Separate, Keep::Tail, 0});
  const Tensor ref = prob.runReference();
  for (att::Impl impl : impls()) {
    att::DriverOptions opts;
    opts.threads = 2;
    EXPECT_TRUE(allClose(prob.runFlash(impl, opts), ref, 2e-5, 2e-4)) << att::implName(impl);
  }
}

// --- through Model: fused node vs the unfused primitive chain --------------------------------

Attrs fusedAttrs(int64_t heads, int64_t headDim, int64_t qOff, int64_t kOff, int64_t vOff, double scale, bool causal,
                 double dropout = -1) {
  Attrs a{{"heads", AttrValue::ofInt(heads)},       {"head_dim", AttrValue::ofInt(headDim)},
          {"q_offset", AttrValue::ofInt(qOff)},     {"k_offset", AttrValue::ofInt(kOff)},
          {"v_offset", AttrValue::ofInt(vOff)},     {"scale", AttrValue::ofFloat(scale)},
          {"causal", AttrValue::ofInt(causal ? 1 : 0)}};
  if (dropout >= 0) a["dropout_rate"] = AttrValue::ofFloat(dropout);
  return a;
}

// forward(q [B, Sq, HD], k [B, Sk, HD], v [B, Sk, HD], keep [B, Sk]) as split_heads x3,
// batch_matmul(transpose_b), scale, mask, softmax, batch_matmul, merge_heads.
Artifact unfusedArtifact(int64_t H, int64_t D, double scale, bool causal) {
  Artifact a;
  a.modelName = "unfused";
  FunctionBuilder f(a, "forward");
  const int64_t HD = H * D;
  uint32_t q = f.input("q", DType::F32, {kDyn, kDyn, HD});
  uint32_t k = f.input("k", DType::F32, {kDyn, kDyn, HD});
  uint32_t v = f.input("v", DType::F32, {kDyn, kDyn, HD});
  uint32_t keep = f.input("key_keep", DType::Bool, {kDyn, kDyn});
  Attrs heads{{"heads", AttrValue::ofInt(H)}};
  uint32_t qh = f.op("tfm.split_heads", {q}, DType::F32, {kDyn, H, kDyn, D}, heads);
  uint32_t kh = f.op("tfm.split_heads", {k}, DType::F32, {kDyn, H, kDyn, D}, heads);
  uint32_t vh = f.op("tfm.split_heads", {v}, DType::F32, {kDyn, H, kDyn, D}, heads);
  uint32_t s = f.op("tfm.batch_matmul", {qh, kh}, DType::F32, {kDyn, H, kDyn, kDyn}, {{"transpose_b", AttrValue::ofInt(1)}});
  s = f.op("tfm.scale", {s}, DType::F32, {kDyn, H, kDyn, kDyn}, {{"factor", AttrValue::ofFloat(scale)}});
  s = f.op("tfm.mask", {s, keep}, DType::F32, {kDyn, H, kDyn, kDyn}, {{"causal", AttrValue::ofInt(causal ? 1 : 0)}});
  s = f.op("tfm.softmax", {s}, DType::F32, {kDyn, H, kDyn, kDyn});
  uint32_t o = f.op("tfm.batch_matmul", {s, vh}, DType::F32, {kDyn, H, kDyn, D});
  f.output(f.op("tfm.merge_heads", {o}, DType::F32, {kDyn, kDyn, HD}));
  f.finish();
  return a;
}

Artifact fusedArtifact(int64_t H, int64_t D, double scale, bool causal, double dropout = -1) {
  Artifact a;
  a.modelName = "fused";
  FunctionBuilder f(a, "forward");
  const int64_t HD = H * D;
  uint32_t q = f.input("q", DType::F32, {kDyn, kDyn, HD});
  uint32_t k = f.input("k", DType::F32, {kDyn, kDyn, HD});
  uint32_t v = f.input("v", DType::F32, {kDyn, kDyn, HD});
  uint32_t keep = f.input("key_keep", DType::Bool, {kDyn, kDyn});
  f.output(f.op("tfm.fused_attention", {q, k, v, keep}, DType::F32, {kDyn, kDyn, HD},
                fusedAttrs(H, D, 0, 0, 0, scale, causal, dropout)));
  f.finish();
  return a;
}

// Self-attention on one merged [B, S, 3 HD] input read in place by all three operands.
Artifact mergedArtifact(int64_t H, int64_t D, double scale, bool causal) {
  Artifact a;
  a.modelName = "merged";
  FunctionBuilder f(a, "forward");
  const int64_t HD = H * D;
  uint32_t qkv = f.input("qkv", DType::F32, {kDyn, kDyn, 3 * HD});
  uint32_t keep = f.input("key_keep", DType::Bool, {kDyn, kDyn});
  f.output(f.op("tfm.fused_attention", {qkv, qkv, qkv, keep}, DType::F32, {kDyn, kDyn, HD},
                fusedAttrs(H, D, 0, HD, 2 * HD, scale, causal)));
  f.finish();
  return a;
}

Tensor runModel(const Artifact &a, KernelBackend backend, const std::vector<Tensor> &inputs,
                std::string *kernel = nullptr) {
  auto model = loadModel(a, backend);
  if (!model) return Tensor();
  std::vector<Tensor> outputs;
  Status s = model->run("forward", inputs, outputs);
  EXPECT_TRUE(s.ok()) << s.message();
  if (kernel) *kernel = model->kernelName("forward", 0);
  return outputs.empty() ? Tensor() : outputs[0];
}


std::vector<std::pair<const char *, std::string>> flashVariants() {
  std::vector<std::pair<const char *, std::string>> v{{"portable", "fast.fused_attention_portable"}};
  if (att::cpuHasAvx512()) v.push_back({"avx512", "fast.fused_attention_avx512"});
  return v;
}

struct ModelCase {
  int64_t batch, sq, sk, heads, headDim;
  bool causal;
};

class FusedVsUnfused : public ::testing::TestWithParam<ModelCase> {};

TEST_P(FusedVsUnfused, SameOutputs) {
  const ModelCase &c = GetParam();
  const int64_t HD = c.heads * c.headDim;
  const double scale = 1.0 / std::sqrt(double(c.headDim));
  Tensor keep(DType::Bool, {c.batch, c.sk});
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t j = 0; j < c.sk; ++j) keep.data<uint8_t>()[b * c.sk + j] = j < c.sk - (b * 5) % (c.sk + 1) ? 1 : 0;
  const std::vector<Tensor> inputs{randomF32({c.batch, c.sq, HD}, 11), randomF32({c.batch, c.sk, HD}, 12),
                                   randomF32({c.batch, c.sk, HD}, 13), keep};
  const Artifact unfused = unfusedArtifact(c.heads, c.headDim, scale, c.causal);
  const Artifact fused = fusedArtifact(c.heads, c.headDim, scale, c.causal, c.causal ? 0.1 : -1);
  const Tensor expected = runModel(unfused, KernelBackend::Reference, inputs);
  EXPECT_TRUE(allClose(runModel(unfused, KernelBackend::Dnnl, inputs), expected, 2e-5, 2e-4)) << "unfused dnnl";
  std::string name;
  EXPECT_TRUE(allClose(runModel(fused, KernelBackend::Reference, inputs, &name), expected, 2e-5, 2e-4));
  EXPECT_EQ(name, "reference.fused_attention");
  for (const auto &[env, kernel] : flashVariants()) {
    ScopedEnv scope("TFMRT_ATTENTION_IMPL", env);
    EXPECT_TRUE(allClose(runModel(fused, KernelBackend::Dnnl, inputs, &name), expected, 2e-5, 2e-4)) << env;
    EXPECT_EQ(name, kernel);
  }
}

// tfm.mask's causal rule is j > i, the fused op's j > i + (Sk - Sq): equal for Sq == Sk only.
INSTANTIATE_TEST_SUITE_P(Shapes, FusedVsUnfused,
                         ::testing::Values(ModelCase{1, 1, 1, 1, 8, false}, ModelCase{2, 17, 17, 4, 16, true},
                                           ModelCase{3, 63, 63, 2, 64, true}, ModelCase{1, 129, 129, 8, 64, false},
                                           ModelCase{2, 65, 65, 8, 32, true}, ModelCase{2, 1, 65, 4, 64, false},
                                           ModelCase{2, 17, 129, 2, 128, false}, ModelCase{4, 40, 3, 3, 24, false}),
                         [](const ::testing::TestParamInfo<ModelCase> &info) {
                           const ModelCase &c = info.param;
                           return "B" + std::to_string(c.batch) + "_Sq" + std::to_string(c.sq) + "_Sk" +
                                  std::to_string(c.sk) + "_H" + std::to_string(c.heads) + "_D" +
                                  std::to_string(c.headDim) + (c.causal ? "_causal" : "");
                         });

// One [B, S, 3 HD] buffer feeds q, k and v in place: the same as slicing it into three inputs
// for the unfused chain. Runs twice so the second call reuses the cached plan and workspace.
TEST(FusedAttentionModel, MergedQkvReadInPlace) {
  const int64_t B = 2, S = 37, H = 4, D = 32, HD = H * D;
  for (bool causal : {false, true}) {
    const Tensor qkv = randomF32({B, S, 3 * HD}, 21);
    Tensor keep(DType::Bool, {B, S});
    for (int64_t j = 0; j < B * S; ++j) keep.data<uint8_t>()[j] = (j % 5) != 3;
    std::vector<Tensor> split(3, Tensor(DType::F32, {B, S, HD}));
    for (int64_t r = 0; r < B * S; ++r)
      for (int part = 0; part < 3; ++part)
        std::copy_n(qkv.data<float>() + r * 3 * HD + part * HD, HD, split[part].data<float>() + r * HD);
    const double scale = 1.0 / std::sqrt(double(D));
    const Tensor expected =
        runModel(unfusedArtifact(H, D, scale, causal), KernelBackend::Reference, {split[0], split[1], split[2], keep});
    const Artifact merged = mergedArtifact(H, D, scale, causal);
    EXPECT_TRUE(allClose(runModel(merged, KernelBackend::Reference, {qkv, keep}), expected, 2e-5, 2e-4));
    for (const auto &[env, kernel] : flashVariants()) {
      ScopedEnv scope("TFMRT_ATTENTION_IMPL", env);
      auto model = loadModel(merged, KernelBackend::Dnnl);
      ASSERT_TRUE(model);
      EXPECT_EQ(model->kernelName("forward", 0), kernel);
      for (int call = 0; call < 2; ++call) {
        std::vector<Tensor> outputs;
        ASSERT_OK(model->run("forward", {qkv, keep}, outputs));
        EXPECT_TRUE(allClose(outputs[0], expected, 2e-5, 2e-4)) << env << " call " << call;
      }
    }
  }
}

// The flash kernel's workspace is part of the shape plan: sized by the driver for the run's
// thread count, allocated with the arena, reported in lastMemoryPlan, and grown with the shapes.
TEST(FusedAttentionModel, WorkspaceIsPlannedScratch) {
  const int64_t H = 4, D = 32, HD = H * D;
  const Artifact fused = fusedArtifact(H, D, 1.0 / std::sqrt(double(D)), false);
  auto inputsFor = [&](int64_t b, int64_t s) {
    Tensor keep(DType::Bool, {b, s});
    std::fill_n(keep.data<uint8_t>(), b * s, uint8_t(1));
    return std::vector<Tensor>{randomF32({b, s, HD}, 31), randomF32({b, s, HD}, 32), randomF32({b, s, HD}, 33), keep};
  };
  for (int threads : {1, 2}) {
    std::unique_ptr<Model> m;
    RuntimeOptions options;
    options.num_threads = threads;
    ASSERT_OK(Model::fromArtifact(fused, options, m));
    int64_t previous = 0;
    for (int64_t s : {40, 300}) {
      const std::vector<Tensor> in = inputsFor(2, s);
      std::vector<Tensor> out;
      ASSERT_OK(m->run("forward", in, out));
      att::Params p;
      p.batch = 2, p.sq = s, p.sk = s, p.heads = H, p.headDim = D;
      const int64_t want = int64_t(att::workspaceBytes(p, {threads}));
      EXPECT_GT(want, previous) << "longer keys need a larger key list";
      EXPECT_EQ(m->lastMemoryPlan("forward").scratch_bytes, want) << threads << " threads, S = " << s;
      EXPECT_EQ(m->lastMemoryPlan("forward").peakBytes(), m->lastMemoryPlan("forward").arena_bytes + want);
      EXPECT_TRUE(allClose(out[0], runModel(fused, KernelBackend::Reference, in), 2e-5, 2e-4));
      previous = want;
    }
  }
  // The reference kernel needs no scratch; neither does planArtifactMemory know of any.
  std::unique_ptr<Model> ref;
  ASSERT_OK(Model::fromArtifact(fused, RuntimeOptions{KernelBackend::Reference}, ref));
  std::vector<Tensor> out;
  ASSERT_OK(ref->run("forward", inputsFor(2, 40), out));
  EXPECT_EQ(ref->lastMemoryPlan("forward").scratch_bytes, 0);
}

// precision "bf16" through Model: the bf16 kernel where the CPU has AVX512-BF16 (and no AMX, or
// AMX capped off), the f32 kernel's bits on AMX CPUs, and with oneDNN's ISA capped below
// AVX512-BF16 (the same switch as the bf16 GEMMs) the f32 kernel's bits and the notice flag.
TEST(FusedAttentionModel, Bf16PrecisionAndTheIsaCap) {
  const int64_t H = 2, D = 32, HD = H * D;
  Artifact f32 = fusedArtifact(H, D, 1.0 / std::sqrt(double(D)), true);
  Artifact bf16 = f32;
  bf16.functions[0].nodes[0].attrs["precision"] = AttrValue::ofString("bf16");
  Tensor keep(DType::Bool, {2, 40});
  std::fill_n(keep.data<uint8_t>(), keep.numel(), uint8_t(1));
  const std::vector<Tensor> in{randomF32({2, 40, HD}, 41), randomF32({2, 40, HD}, 42), randomF32({2, 40, HD}, 43), keep};
  auto run = [&](const Artifact &art, std::string &kernel, bool &asF32) {
    auto model = loadModel(art, KernelBackend::Dnnl, 2);
    EXPECT_TRUE(model);
    std::vector<Tensor> out;
    EXPECT_TRUE(model->run("forward", in, out).ok());
    kernel = model->kernelName("forward", 0);
    asF32 = model->bf16RunsAsF32();
    return out[0];
  };
  std::string kernel;
  bool asF32 = false;
  const Tensor a = run(f32, kernel, asF32);
  EXPECT_FALSE(asF32);
  // On an AMX CPU the bf16 site runs the f32 kernel (faster there) unless the ISA cap excludes AMX.
  const bool amx = gemm::cpuHasAmxBf16();
  const Tensor b = [&] {
    std::optional<ScopedEnv> cap;
    if (amx) cap.emplace("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16");
    return run(bf16, kernel, asF32);
  }();
  if (gemm::cpuHasAvx512Bf16() && att::cpuHasAvx512()) {
    EXPECT_EQ(kernel, "fast.fused_attention_avx512_bf16");
    EXPECT_FALSE(asF32);
    EXPECT_NE(0, std::memcmp(a.rawData(), b.rawData(), a.nbytes()));
    EXPECT_TRUE(allClose(b, a, 0.02, 0));
  }
  if (amx) {
    const Tensor onAmx = run(bf16, kernel, asF32);
    EXPECT_EQ(kernel, "fast.fused_attention_avx512");
    EXPECT_FALSE(asF32);  // the GEMMs still run in bf16
    EXPECT_EQ(0, std::memcmp(a.rawData(), onAmx.rawData(), a.nbytes())) << "not the f32 kernel's bits";
  }
  const Tensor capped = [&] {
    ScopedEnv cap("ONEDNN_MAX_CPU_ISA", "AVX512_CORE");
    return run(bf16, kernel, asF32);
  }();
  EXPECT_TRUE(asF32);
  EXPECT_NE(kernel, "fast.fused_attention_avx512_bf16");
  EXPECT_EQ(0, std::memcmp(capped.rawData(), a.rawData(), a.nbytes())) << "the capped bf16 model runs the f32 kernel";
  if (att::cpuHasAvx512()) {  // TFMRT_ATTENTION_IMPL=avx512 forces the f32 kernel on a bf16 site
    ScopedEnv scope("TFMRT_ATTENTION_IMPL", "avx512");
    const Tensor forced = run(bf16, kernel, asF32);
    EXPECT_EQ(kernel, "fast.fused_attention_avx512");
    EXPECT_EQ(0, std::memcmp(forced.rawData(), a.rawData(), a.nbytes()));
  }
  if (att::cpuHasAvx512() && gemm::cpuHasAvx512Bf16()) {
    // TFMRT_ATTENTION_IMPL=avx512_bf16: the bf16 kernel on the bf16 site (also on AMX CPUs), and
    // an f32 site stays f32 (it ran bf16 products without a word).
    ScopedEnv scope("TFMRT_ATTENTION_IMPL", "avx512_bf16");
    const Tensor forcedBf16 = run(bf16, kernel, asF32);
    EXPECT_EQ(kernel, "fast.fused_attention_avx512_bf16");
    EXPECT_NE(0, std::memcmp(forcedBf16.rawData(), a.rawData(), a.nbytes()));
    const Tensor f32Site = run(f32, kernel, asF32);
    EXPECT_EQ(kernel, "fast.fused_attention_avx512");
    EXPECT_EQ(0, std::memcmp(f32Site.rawData(), a.rawData(), a.nbytes())) << "an f32 site ran bf16 products";
  }
}

// Causal attention of 40 new queries at the end of 40 + shift keys: the first 32-row tile sees the
// keys below 32 + shift, an odd count for odd shifts, so its last probability pairs with the first
// key it cannot see. That key's value must not leak in, even as Inf or NaN (the f32 kernel never
// reads it). shift 31: the odd pair ends a 64-key chunk; shift 33: it is a chunk of its own.
TEST(FlashAttentionBf16, InvisiblePartnerKeyDoesNotLeak) {
  if (!att::cpuHasAvx512() || !gemm::cpuHasAvx512Bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const int64_t sq = 40, H = 2, D = 32, HD = H * D;
  for (int64_t shift : {31, 33}) {
    Problem prob({1, sq, sq + shift, H, D, true, Qkv::Separate, Keep::All, 0}, 7);
    att::DriverOptions opts;
    opts.threads = 1;
    const Tensor clean = prob.runFlash(att::Impl::Avx512Bf16, opts);
    float *v = prob.v.data<float>();
    for (int64_t j = 32 + shift; j < sq + shift; ++j)
      for (int64_t c = 0; c < HD; ++c) v[j * HD + c] = (j % 2) ? INFINITY : NAN;
    const Tensor poisoned = prob.runFlash(att::Impl::Avx512Bf16, opts);
    for (int64_t i = 0; i < 32; ++i)
      for (int64_t c = 0; c < HD; ++c)
        ASSERT_EQ(clean.data<float>()[i * HD + c], poisoned.data<float>()[i * HD + c]) << "shift " << shift << ", row " << i;
  }
}

TEST(FusedAttentionModel, BadImplEnvIsALoadError) {
  ScopedEnv scope("TFMRT_ATTENTION_IMPL", "sse9");
  std::unique_ptr<Model> m;
  EXPECT_ERROR(Model::fromArtifact(fusedArtifact(2, 8, 0.5, false), RuntimeOptions{}, m), "TFMRT_ATTENTION_IMPL",
               "sse9");
}

// --- schema and shapes ---------------------------------------------------------------------

Node attentionNode(Attrs attrs) {
  Node n;
  n.op = "tfm.fused_attention";
  n.attrs = std::move(attrs);
  return n;
}

Status infer(const Node &n, std::vector<Shape> in, Shape &out) {
  std::vector<const Shape *> ptrs;
  for (auto &s : in) ptrs.push_back(&s);
  return inferShape(n, ptrs, out);
}

TEST(FusedAttentionShapes, Inference) {
  Shape out;
  // Merged QKV [2, 5, 96] with heads 4 x 8: offsets 0, 32, 64.
  ASSERT_OK(infer(attentionNode(fusedAttrs(4, 8, 0, 32, 64, 0.5, false)), {{2, 5, 96}, {2, 5, 96}, {2, 5, 96}, {2, 5}}, out));
  EXPECT_EQ(out, Shape({2, 5, 32}));
  // Cross-attention, dynamic dims propagate.
  ASSERT_OK(infer(attentionNode(fusedAttrs(2, 8, 0, 0, 0, 0.5, false)), {{kDyn, kDyn, 16}, {3, kDyn, 16}, {kDyn, 7, 20}, {kDyn, kDyn}}, out));
  EXPECT_EQ(out, Shape({3, kDyn, 16}));
  // Dynamic width: checked later, on concrete shapes.
  ASSERT_OK(infer(attentionNode(fusedAttrs(2, 8, 100, 0, 0, 0.5, false)), {{1, 2, kDyn}, {1, 3, 16}, {1, 3, 16}, {1, 3}}, out));

  EXPECT_ERROR(infer(attentionNode(fusedAttrs(4, 8, 0, 70, 64, 0.5, false)), {{2, 5, 96}, {2, 5, 96}, {2, 5, 96}, {2, 5}}, out),
               "k columns [70, 102)", "exceed its width", "[2, 5, 96]");
  EXPECT_ERROR(infer(attentionNode(fusedAttrs(2, 8, 0, 0, 0, 0.5, false)), {{2, 5, 16}, {3, 5, 16}, {3, 5, 16}, {3, 5}}, out),
               "batch dims");
  EXPECT_ERROR(infer(attentionNode(fusedAttrs(2, 8, 0, 0, 0, 0.5, false)), {{2, 5, 16}, {2, 6, 16}, {2, 5, 16}, {2, 6}}, out),
               "key lengths");
  EXPECT_ERROR(infer(attentionNode(fusedAttrs(2, 8, 0, 0, 0, 0.5, false)), {{2, 5, 16}, {2, 6, 16}, {2, 6, 16}, {2, 5}}, out),
               "key lengths");
}

Status loadOne(Attrs attrs, Shape qShape = {kDyn, kDyn, 16}, DType keepType = DType::Bool) {
  Artifact a;
  a.modelName = "one";
  FunctionBuilder f(a, "forward");
  uint32_t q = f.input("q", DType::F32, qShape);
  uint32_t keep = f.input("key_keep", keepType, {kDyn, kDyn});
  f.output(f.op("tfm.fused_attention", {q, q, q, keep}, DType::F32, {kDyn, kDyn, kDyn}, std::move(attrs)));
  f.finish();
  std::unique_ptr<Model> m;
  return Model::fromArtifact(a, RuntimeOptions{}, m);
}

TEST(FusedAttentionShapes, LoadChecks) {
  ASSERT_OK(loadOne(fusedAttrs(2, 8, 0, 0, 0, 0.5, true, 0.1)));
  Attrs noScale = fusedAttrs(2, 8, 0, 0, 0, 0.5, false);
  noScale.erase("scale");
  EXPECT_ERROR(loadOne(noScale), "missing required attribute 'scale'");
  EXPECT_ERROR(loadOne(fusedAttrs(2, 0, 0, 0, 0, 0.5, false)), "'head_dim' must be in [1, 1048576], got 0");
  EXPECT_ERROR(loadOne(fusedAttrs(2, 8, -1, 0, 0, 0.5, false)), "'q_offset' must be in [0, 1099511627776], got -1");
  EXPECT_ERROR(loadOne(fusedAttrs(2, 8, 0, 0, 0, 0.5, false, 1.0)), "'dropout_rate' must be in [0, 1)");
  Attrs badCausal = fusedAttrs(2, 8, 0, 0, 0, 0.5, false);
  badCausal["causal"] = AttrValue::ofInt(2);
  EXPECT_ERROR(loadOne(badCausal), "'causal' must be in [0, 1], got 2");
  EXPECT_ERROR(loadOne(fusedAttrs(2, 8, 4, 0, 0, 0.5, false)), "q columns [4, 20)", "exceed its width");
  EXPECT_ERROR(loadOne(fusedAttrs(2, 8, 0, 0, 0, 0.5, false), {kDyn, kDyn, 16}, DType::I32), "key_keep", "must be bool");
}

// A width that is dynamic in the artifact is checked on the concrete shape of the call.
TEST(FusedAttentionShapes, RunTimeWidthCheck) {
  Artifact a;
  a.modelName = "dyn";
  FunctionBuilder f(a, "forward");
  uint32_t q = f.input("q", DType::F32, {kDyn, kDyn, kDyn});
  uint32_t keep = f.input("key_keep", DType::Bool, {kDyn, kDyn});
  f.output(f.op("tfm.fused_attention", {q, q, q, keep}, DType::F32, {kDyn, kDyn, 16}, fusedAttrs(2, 8, 8, 0, 0, 0.5, false)));
  f.finish();
  auto model = loadModel(a, KernelBackend::Dnnl);
  ASSERT_TRUE(model);
  std::vector<Tensor> outputs;
  ASSERT_OK(model->run("forward", {randomF32({1, 3, 24}, 1), Tensor(DType::Bool, {1, 3})}, outputs));
  EXPECT_ERROR(model->run("forward", {randomF32({1, 3, 16}, 1), Tensor(DType::Bool, {1, 3})}, outputs),
               "q columns [8, 24)", "exceed its width");
}

}  // namespace
}  // namespace tfmrt::test
