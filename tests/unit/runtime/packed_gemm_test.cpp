// The few-rows panel GEMM (kernels/gemm/packed_gemm.h): the AVX-512 and AVX2 bodies against the plain
// reference body and a naive product on odd shapes, every epilogue, panel sub-ranges; and through a
// Model: tfm.linear / tfm.matmul with packed weights on both sides of the few-rows limit, with the
// path on and off, against the reference backend, across weight updates and thread counts.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/gemm/bf16_weight_copies.h"
#include "kernels/gemm/packed_gemm.h"
#include "test_util.h"

namespace tfmrt::test {
namespace {

std::vector<float> randomVec(size_t n, uint64_t seed) {
  Tensor t = randomF32({int64_t(n)}, seed);
  return std::vector<float>(t.data<float>(), t.data<float>() + n);
}

struct GemmCase {
  int64_t m, k, n;
};

class PackedGemm : public ::testing::TestWithParam<GemmCase> {};

// The fast f32 bodies this CPU can run: AVX-512 and AVX2 + FMA on AVX-512 machines, AVX2 + FMA
// on the others.
using PanelBody = void (*)(const float *, int64_t, int64_t, const float *, int64_t, int64_t, int64_t,
                           const gemm::Epilogue &, float *);
struct NamedBody {
  const char *name;
  PanelBody fn;
  int64_t width;  // of the panels it reads
};
std::vector<NamedBody> fastBodies() {
  std::vector<NamedBody> bodies;
  if (attention::cpuHasAvx512()) bodies.push_back({"avx512", gemm::gemmPanelsAvx512, gemm::kPanelCols});
  if (attention::cpuHasAvx2Fma()) bodies.push_back({"avx2", gemm::gemmPanelsAvx2, gemm::kAvx2PanelCols});
  return bodies;
}

// `w` packed into panels of `width` columns, 64-byte aligned.
struct Packed {
  std::vector<float> storage;
  float *data;
  Packed(const float *w, int64_t k, int64_t n, bool transposed, int64_t width)
      : storage(size_t(gemm::packedFloats(k, n, width)) + 16) {
    data = reinterpret_cast<float *>((reinterpret_cast<uintptr_t>(storage.data()) + 63) / 64 * 64);
    gemm::packPanels(w, k, n, transposed, data, width);
  }
};

// Every fast body against the reference body and a naive product; panel sub-ranges give the same
// bits as one call; the AVX2 and AVX-512 bodies give the same bits (one FMA chain per element in
// kk order in both).
TEST_P(PackedGemm, FastBodiesMatchReferenceAndNaive) {
  const std::vector<NamedBody> bodies = fastBodies();
  if (bodies.empty()) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2 + FMA: the panel GEMM is not used here";
  const auto [m, k, n] = GetParam();
  const std::vector<float> x = randomVec(size_t(m * k), 1), w = randomVec(size_t(n * k), 2), bias = randomVec(size_t(n), 3),
                           residual = randomVec(size_t(m * n), 4);
  for (bool transposed : {true, false}) {
    // The same B either way: w is B^T [N, K]; its transpose is B [K, N].
    std::vector<float> b(size_t(k * n));
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < n; ++j) b[size_t(kk * n + j)] = w[size_t(j * k + kk)];
    for (int epi = 0; epi < 4; ++epi) {
      SCOPED_TRACE(::testing::Message() << (transposed ? "B^T given" : "B given") << ", epilogue " << epi);
      gemm::Epilogue e;
      e.bias = epi >= 1 ? bias.data() : nullptr;
      e.relu = epi >= 2;
      e.residual = epi == 3 ? residual.data() : nullptr;
      std::vector<float> first;
      for (const NamedBody &body : bodies) {
        const Packed packed(transposed ? w.data() : b.data(), k, n, transposed, body.width);
        const int64_t panels = gemm::panelCount(n, body.width);
        std::vector<float> fast(size_t(m * n), NAN), split(size_t(m * n), NAN), ref(size_t(m * n), NAN);
        gemm::gemmPanelsReference(x.data(), m, k, packed.data, n, 0, panels, e, ref.data(), body.width);
        body.fn(x.data(), m, k, packed.data, n, 0, panels, e, fast.data());
        // Three threads' worth of panel ranges give the same bits as one call.
        for (int part = 0; part < 3; ++part)
          body.fn(x.data(), m, k, packed.data, n, panels * part / 3, panels * (part + 1) / 3, e, split.data());
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double naive = e.bias ? e.bias[j] : 0.0;
            for (int64_t kk = 0; kk < k; ++kk) naive += double(x[size_t(i * k + kk)]) * double(w[size_t(j * k + kk)]);
            if (e.relu) naive = std::max(naive, 0.0);
            if (e.residual) naive += e.residual[i * n + j];
            const size_t at = size_t(i * n + j);
            const double tol = 1e-6 * double(k) + 1e-6;
            ASSERT_NEAR(ref[at], naive, tol) << "reference at " << i << ", " << j;
            ASSERT_NEAR(fast[at], naive, tol) << body.name << " at " << i << ", " << j;
            ASSERT_EQ(split[at], fast[at]) << body.name << ": panel split at " << i << ", " << j;
            if (!first.empty()) ASSERT_EQ(fast[at], first[at]) << body.name << " vs " << bodies[0].name << " at " << i << ", " << j;
          }
        if (first.empty()) first = fast;
      }
    }
  }
}

// bf16 operands: the AVX512-BF16 body equals the plain one (both multiply the same bf16 values
// exactly), and both stay within the rounding bound of the f32 product: each operand is rounded
// to 8 significant bits (relative error <= 2^-9), so |error| <= (2^-8 + 2^-18) sum_k |x_k w_k|
// plus the f32 summation error.
TEST_P(PackedGemm, Bf16WithinTheRoundingBound) {
  if (!gemm::cpuHasAvx512Bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const auto [m, k, n] = GetParam();
  const std::vector<float> x = randomVec(size_t(m * k), 11), w = randomVec(size_t(n * k), 12), bias = randomVec(size_t(n), 13),
                           residual = randomVec(size_t(m * n), 14);
  std::vector<uint16_t> packed(size_t(gemm::packedBf16Elements(k, n)) + 32);
  uint16_t *aligned = reinterpret_cast<uint16_t *>((reinterpret_cast<uintptr_t>(packed.data()) + 63) / 64 * 64);
  gemm::packPanelsBf16(w.data(), k, n, true, aligned);
  std::vector<uint32_t> pairsFast(size_t(m * gemm::pairCount(k)), 7u), pairsRef(pairsFast.size());
  gemm::toBf16PairsAvx512Bf16(x.data(), m, k, pairsFast.data());
  gemm::toBf16PairsReference(x.data(), m, k, pairsRef.data());
  ASSERT_EQ(pairsFast, pairsRef);
  gemm::Epilogue e;
  e.bias = bias.data();
  e.relu = true;
  e.residual = residual.data();
  const int64_t panels = gemm::panelCount(n);
  std::vector<float> fast(size_t(m * n)), ref(size_t(m * n));
  gemm::gemmPanelsBf16Avx512Bf16(pairsFast.data(), m, k, aligned, n, 0, panels, e, fast.data());
  gemm::gemmPanelsBf16Reference(pairsRef.data(), m, k, aligned, n, 0, panels, e, ref.data());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double exact = bias[size_t(j)], magnitude = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double p = double(x[size_t(i * k + kk)]) * double(w[size_t(j * k + kk)]);
        exact += p;
        magnitude += std::fabs(p);
      }
      exact = std::max(exact, 0.0) + residual[size_t(i * n + j)];
      const size_t at = size_t(i * n + j);
      ASSERT_NEAR(fast[at], ref[at], 1e-6 * double(k) + 1e-6) << i << ", " << j;
      ASSERT_NEAR(fast[at], exact, (std::ldexp(1.0, -8) + std::ldexp(1.0, -18)) * magnitude + 1e-6 * double(k) + 1e-6)
          << i << ", " << j;
    }
}

// The AMX body on the same panels and pairs: within the f32 summation error of the plain body
// (both multiply the same bf16 values exactly; the tiles sum in their own order), the same bits
// for any split of the panels, and every row of 32-row blocks and tails (1-31 rows, staged into
// a zeroed buffer) written, nothing past the m x n result.
TEST(PackedGemmAmx, MatchesThePlainBodyOnEveryBlockAndTail) {
  if (!gemm::cpuHasAmxBf16()) GTEST_SKIP() << "this CPU has no AMX-BF16 (or Linux refused the tile state)";
  for (const GemmCase c : {GemmCase{1, 32, 1}, GemmCase{15, 64, 17}, GemmCase{16, 32, 64}, GemmCase{17, 256, 65},
                           GemmCase{31, 96, 100}, GemmCase{32, 256, 256}, GemmCase{33, 1024, 64},
                           GemmCase{48, 64, 130}, GemmCase{115, 256, 1000}, GemmCase{128, 512, 96}}) {
    const auto [m, k, n] = c;
    SCOPED_TRACE(::testing::Message() << "M " << m << " K " << k << " N " << n);
    ASSERT_TRUE(gemm::amxFits(k));
    const std::vector<float> x = randomVec(size_t(m * k), 21), w = randomVec(size_t(n * k), 22),
                             bias = randomVec(size_t(n), 23), residual = randomVec(size_t(m * n), 24);
    std::vector<uint16_t> packed(size_t(gemm::packedBf16Elements(k, n)) + 32);
    uint16_t *aligned = reinterpret_cast<uint16_t *>((reinterpret_cast<uintptr_t>(packed.data()) + 63) / 64 * 64);
    gemm::packPanelsBf16(w.data(), k, n, true, aligned);
    std::vector<uint32_t> pairs(size_t(m * gemm::pairCount(k)));
    gemm::toBf16PairsReference(x.data(), m, k, pairs.data());
    for (int epi = 0; epi < 3; ++epi) {
      gemm::Epilogue e;
      e.bias = epi >= 1 ? bias.data() : nullptr;
      e.relu = epi >= 1;
      e.residual = epi == 2 ? residual.data() : nullptr;
      const int64_t panels = gemm::panelCount(n);
      // One guard row past the result: nothing may be written there.
      std::vector<float> amx(size_t((m + 1) * n), NAN), split(size_t(m * n), NAN), ref(size_t(m * n));
      gemm::gemmPanelsBf16Amx(pairs.data(), m, k, aligned, n, 0, panels, e, amx.data());
      for (int part = 0; part < 3; ++part)
        gemm::gemmPanelsBf16Amx(pairs.data(), m, k, aligned, n, panels * part / 3, panels * (part + 1) / 3, e, split.data());
      gemm::gemmPanelsBf16Reference(pairs.data(), m, k, aligned, n, 0, panels, e, ref.data());
      for (int64_t j = 0; j < n; ++j) ASSERT_TRUE(std::isnan(amx[size_t(m * n + j)])) << "written past the result";
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const size_t at = size_t(i * n + j);
          ASSERT_NEAR(amx[at], ref[at], 1e-6 * double(k) + 1e-6) << "epilogue " << epi << " at " << i << ", " << j;
          ASSERT_EQ(split[at], amx[at]) << "panel split at " << i << ", " << j;
        }
    }
  }
}

// ONEDNN_MAX_CPU_ISA as oneDNN 2.6 reads it: its names in any case cap; unset, empty or unknown
// values do not (a garbage or empty value turned bf16 off while oneDNN ran uncapped).
TEST(PackedGemmBf16, IsaCapReadAsOneDnnReadsIt) {
  ScopedEnv restore("ONEDNN_MAX_CPU_ISA", "");  // the outer value comes back at the end
  ::unsetenv("ONEDNN_MAX_CPU_ISA");
  // The cap itself, on every CPU (below, the CPU checks are false without AVX512-BF16 / AMX
  // whatever the cap says).
  EXPECT_TRUE(gemm::isaCapAllows("AVX512_CORE_BF16"));
  for (const char *value : {"garbage", "", "avx512_core_bf16", "ALL", "AVX512_CORE_AMX", "avx512_core_amx", "all"}) {
    ::setenv("ONEDNN_MAX_CPU_ISA", value, 1);
    EXPECT_TRUE(gemm::isaCapAllows("AVX512_CORE_BF16")) << "'" << value << "'";
  }
  for (const char *value : {"AVX2", "avx512_core_vnni", "AVX512_CORE", "AVX2_VNNI", "SSE41", "avx512_mic_4ops"}) {
    ::setenv("ONEDNN_MAX_CPU_ISA", value, 1);
    EXPECT_FALSE(gemm::isaCapAllows("AVX512_CORE_BF16")) << "'" << value << "'";
    EXPECT_FALSE(gemm::isaCapAllows("AVX512_CORE_AMX")) << "'" << value << "'";
  }
  for (const char *value : {"garbage", "", "ALL", "avx512_core_amx"}) {
    ::setenv("ONEDNN_MAX_CPU_ISA", value, 1);
    EXPECT_TRUE(gemm::isaCapAllows("AVX512_CORE_AMX")) << "'" << value << "'";
  }
  ::setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", 1);
  EXPECT_FALSE(gemm::isaCapAllows("AVX512_CORE_AMX"));
  ::unsetenv("ONEDNN_MAX_CPU_ISA");
  // And the CPU checks follow it.
  const bool bf16 = gemm::cpuHasAvx512Bf16(), amx = gemm::amxAllowed("bf16");
  for (const char *value : {"garbage", "", "avx512_core_bf16", "ALL", "AVX512_CORE_AMX", "avx512_core_amx"}) {
    ::setenv("ONEDNN_MAX_CPU_ISA", value, 1);
    EXPECT_EQ(gemm::cpuHasAvx512Bf16(), bf16) << "'" << value << "'";
  }
  for (const char *value : {"AVX2", "avx512_core_vnni", "AVX512_CORE", "AVX2_VNNI", "SSE41"}) {
    ::setenv("ONEDNN_MAX_CPU_ISA", value, 1);
    EXPECT_FALSE(gemm::cpuHasAvx512Bf16()) << "'" << value << "'";
    EXPECT_FALSE(gemm::amxAllowed("bf16")) << "'" << value << "'";
  }
  for (const char *value : {"garbage", "", "ALL", "avx512_core_amx"}) {
    ::setenv("ONEDNN_MAX_CPU_ISA", value, 1);
    EXPECT_EQ(gemm::amxAllowed("bf16"), amx) << "'" << value << "'";
  }
  ::setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", 1);
  EXPECT_FALSE(gemm::amxAllowed("bf16"));
  EXPECT_EQ(gemm::cpuHasAvx512Bf16(), bf16);
}

TEST(PackedGemmBf16, RoundsToNearestEven) {
  EXPECT_EQ(gemm::floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(gemm::floatToBf16(std::ldexp(1.0f, -8) + 1.0f), 0x3F80);            // halfway: to even (down)
  EXPECT_EQ(gemm::floatToBf16(3 * std::ldexp(1.0f, -8) + 1.0f), 0x3F82);        // halfway: to even (up)
  EXPECT_EQ(gemm::floatToBf16(std::ldexp(1.0f, -8) * 1.5f + 1.0f), 0x3F81);     // above half: up
  EXPECT_TRUE(std::isnan(gemm::bf16ToFloat(gemm::floatToBf16(NAN))));
  EXPECT_EQ(gemm::bf16ToFloat(gemm::floatToBf16(-2.5f)), -2.5f);
}

// The Model-wide bf16 weight copies: converted once per weight and weights version, refreshed
// when the version changes, freed when a weight goes unused for a whole version.
TEST(Bf16WeightCopies, OneConversionPerWeightAndVersion) {
  if (!gemm::cpuHasAvx512Bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  Tensor w1 = randomF32({1001}, 81), w2 = randomF32({64}, 82);
  const float *p1 = w1.data<float>();
  gemm::Bf16WeightCopies copies;
  auto expectCopyOf = [](const uint16_t *copy, const Tensor &w) {
    for (int64_t i = 0; i < w.numel(); ++i) ASSERT_EQ(copy[i], gemm::floatToBf16(w.data<float>()[i])) << i;
  };
  const uint16_t *c1 = copies.get(p1, 1001, 1);
  expectCopyOf(c1, w1);
  EXPECT_EQ(copies.get(p1, 1001, 1), c1);
  expectCopyOf(copies.get(w2.data<float>(), 64, 1), w2);
  EXPECT_EQ(copies.conversions(), 2);
  w1.data<float>()[1000] += 1.0f;  // an optimizer step: a new version
  expectCopyOf(copies.get(p1, 1001, 2), w1);
  EXPECT_EQ(copies.conversions(), 3);
  EXPECT_EQ(copies.copies(), 2u);
  copies.get(p1, 1001, 3);  // w2 was not read during version 2
  EXPECT_EQ(copies.copies(), 1u);
  expectCopyOf(copies.get(w2.data<float>(), 64, 3), w2);
}

TEST(PackedGemmResidual, OutputMayBeTheResidual) {
  const std::vector<NamedBody> bodies = fastBodies();
  if (bodies.empty()) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2 + FMA";
  const int64_t m = 7, k = 33, n = 70;
  const std::vector<float> x = randomVec(size_t(m * k), 5), w = randomVec(size_t(n * k), 6);
  for (const NamedBody &body : bodies) {
    const Packed packed(w.data(), k, n, true, body.width);
    const int64_t panels = gemm::panelCount(n, body.width);
    std::vector<float> y = randomVec(size_t(m * n), 7), expected(size_t(m * n));
    gemm::Epilogue e;
    e.residual = y.data();
    gemm::gemmPanelsReference(x.data(), m, k, packed.data, n, 0, panels, e, expected.data(), body.width);
    body.fn(x.data(), m, k, packed.data, n, 0, panels, e, y.data());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], expected[i], 1e-4) << body.name << " " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PackedGemm,
                         ::testing::Values(GemmCase{1, 1, 1}, GemmCase{1, 7, 5}, GemmCase{5, 3, 16}, GemmCase{6, 64, 64},
                                           GemmCase{7, 64, 65}, GemmCase{13, 17, 130}, GemmCase{32, 256, 256},
                                           GemmCase{3, 256, 1000}, GemmCase{12, 1024, 64}, GemmCase{8, 33, 20},
                                           GemmCase{14, 40, 48}),
                         [](const auto &info) {
                           return "M" + std::to_string(info.param.m) + "K" + std::to_string(info.param.k) + "N" +
                                  std::to_string(info.param.n);
                         });

// Through a Model (an inference entry): the panels (few_rows_gemm on: every row count) and oneDNN
// (off) agree with the reference backend at row counts around the old limits (256 and 1024),
// follow weight updates, and the panels give the same bits on 1 and 2 threads.
TEST(PackedGemmModel, PanelsOnAndOffAtManyRowCounts) {
  Artifact art;
  FunctionBuilder f(art, "forward");
  uint32_t x = f.input("x", DType::F32, {kDyn, 48});
  Attrs packed{{"weight_layout", AttrValue::ofString("packed")}};
  Attrs relu = packed;
  relu["activation"] = AttrValue::ofString("relu");
  uint32_t h = f.op("tfm.linear", {x, f.param("w1", {200, 48}), f.param("b1", {200})}, DType::F32, {kDyn, 200}, relu);
  uint32_t h2 = f.op("tfm.linear", {h, f.param("w2", {200, 200}), f.param("b2", {200}), h}, DType::F32, {kDyn, 200}, packed);
  Attrs tb = packed;
  tb["transpose_b"] = AttrValue::ofInt(1);
  f.output(f.op("tfm.matmul", {h2, f.param("e", {300, 200})}, DType::F32, {kDyn, 300}, tb));
  f.finish();
  auto load = [&](KernelBackend backend, bool fewRows, int threads) {
    RuntimeOptions o;
    o.backend = backend;
    o.num_threads = threads;
    o.few_rows_gemm = fewRows;
    return loadModel(art, o);
  };
  auto on = load(KernelBackend::Dnnl, true, 2), on1 = load(KernelBackend::Dnnl, true, 1),
       off = load(KernelBackend::Dnnl, false, 2), ref = load(KernelBackend::Reference, true, 2);
  ASSERT_TRUE(on && on1 && off && ref);
  for (int version = 0; version < 2; ++version) {
    std::map<std::string, Tensor> weights{{"w1", randomF32({200, 48}, 10 + version)}, {"b1", randomF32({200}, 20 + version)},
                                          {"w2", randomF32({200, 200}, 30 + version)}, {"b2", randomF32({200}, 40 + version)},
                                          {"e", randomF32({300, 200}, 50 + version)}};
    for (Model *model : {on.get(), on1.get(), off.get(), ref.get()}) ASSERT_OK(model->setWeights(weights));
    for (int64_t m : {1, 6, 255, 256, 257, 600, 1024, 1025, 3}) {
      SCOPED_TRACE(::testing::Message() << "version " << version << ", M " << m);
      std::vector<Tensor> in{randomF32({m, 48}, uint64_t(m))}, a, a1, b, r;
      ASSERT_OK(on->run("forward", in, a));
      ASSERT_OK(on1->run("forward", in, a1));
      ASSERT_OK(off->run("forward", in, b));
      ASSERT_OK(ref->run("forward", in, r));
      EXPECT_TRUE(allClose(a[0], r[0], 1e-3, 1e-4));
      EXPECT_TRUE(allClose(b[0], r[0], 1e-3, 1e-4));
      EXPECT_EQ(0, std::memcmp(a[0].rawData(), a1[0].rawData(), a[0].nbytes())) << "1 vs 2 threads";
    }
  }
}

// An inference entry's products give each row the same bits whatever the number of rows in the
// call (translation's decoder steps have batch x beam rows, its encoder blocks sentences x longest
// source) and the thread count: every f32 and bf16 layout, relu, gelu, a residual, a transposed
// table. Rows 1-2100 of one input: every window's rows equal the
// whole call's; with oneDNN past 1024 (f32) / 256 (bf16) rows, or its gemv path below ~16 rows,
// they did not.
TEST(PackedGemmModel, RowsDoNotDependOnTheirCallsRowCount) {
  struct Site {
    const char *what, *layout, *activation;
    int64_t k, n;
    bool residual = false, matmul = false;
  };
  std::vector<Site> sites;
  for (const char *layout : {"packed", "packed_bf16"}) {
    sites.push_back({"linear relu", layout, "relu", 256, 200});
    sites.push_back({"linear relu, odd K", layout, "relu", 301, 70});  // K not a multiple of 32: no AMX
    sites.push_back({"linear, K 1024", layout, "", 1024, 64});
    sites.push_back({"linear gelu", layout, "gelu", 64, 130});
    sites.push_back({"linear gelu + residual", layout, "gelu", 96, 96, true});
    sites.push_back({"linear + residual", layout, "", 160, 160, true});
    sites.push_back({"transposed table", layout, "", 128, 300, false, true});
  }
  // On an AMX CPU also with AMX capped off: the vdpbf16ps body for every K.
  std::vector<const char *> caps{nullptr};
  if (gemm::cpuHasAmxBf16()) caps.push_back("AVX512_CORE_BF16");
  constexpr int64_t kRows = 2100, kChecked = 300;  // rows checked against the exact product
  for (const char *cap : caps)
  for (const Site &site : sites) {
    SCOPED_TRACE(::testing::Message() << site.what << ", " << site.layout << (cap ? ", ISA capped" : ""));
    std::optional<ScopedEnv> capScope;
    if (cap) capScope.emplace("ONEDNN_MAX_CPU_ISA", cap);
    Artifact art;
    FunctionBuilder f(art, "forward");
    const uint32_t x = f.input("x", DType::F32, {kDyn, site.k});
    Attrs attrs{{"weight_layout", AttrValue::ofString(site.layout)}};
    if (*site.activation) attrs["activation"] = AttrValue::ofString(site.activation);
    if (site.matmul) {
      attrs["transpose_b"] = AttrValue::ofInt(1);
      f.output(f.op("tfm.matmul", {x, f.param("w", {site.n, site.k})}, DType::F32, {kDyn, site.n}, attrs));
    } else {
      std::vector<uint32_t> in{x, f.param("w", {site.n, site.k}), f.param("b", {site.n})};
      if (site.residual) in.push_back(x);  // the residual is x itself (n == k)
      f.output(f.op("tfm.linear", in, DType::F32, {kDyn, site.n}, attrs));
    }
    f.finish();
    std::map<std::string, Tensor> weights{{"w", randomF32({site.n, site.k}, 81)}};
    if (!site.matmul) weights["b"] = randomF32({site.n}, 82);
    auto two = loadModel(art, KernelBackend::Dnnl, 2), one = loadModel(art, KernelBackend::Dnnl, 1);
    ASSERT_TRUE(two && one);
    for (Model *model : {two.get(), one.get()}) ASSERT_OK(model->setWeights(weights));
    const Tensor all = randomF32({kRows, site.k}, 83);
    std::vector<Tensor> whole;
    ASSERT_OK(two->run("forward", {all}, whole));
    // Against the exact product (double) on the first rows: bf16 operands round each product by
    // at most 2^-8 + 2^-18 of |x w|, GELU's slope is below 1.13 and its approximation within 1e-6;
    // f32 within summation error.
    const bool bf16 = std::string(site.layout) == "packed_bf16" && gemm::cpuHasAvx512Bf16();
    const float *xs = all.data<float>(), *w = weights["w"].data<float>(), *y = whole[0].data<float>();
    for (int64_t i = 0; i < kChecked; ++i)
      for (int64_t j = 0; j < site.n; ++j) {
        double pre = site.matmul ? 0.0 : weights["b"].data<float>()[j], magnitude = 0;
        for (int64_t kk = 0; kk < site.k; ++kk) {
          const double prod = double(xs[i * site.k + kk]) * double(w[j * site.k + kk]);
          pre += prod;
          magnitude += std::fabs(prod);
        }
        const std::string act = site.activation;
        double exact = act == "relu" ? std::max(pre, 0.0) : act == "gelu" ? 0.5 * pre * (1.0 + std::erf(pre / std::sqrt(2.0))) : pre;
        if (site.residual) exact += xs[i * site.k + j];
        const double bound = (bf16 ? 1.13 * (std::ldexp(1.0, -8) + std::ldexp(1.0, -18)) : 1e-6) * magnitude +
                             1e-6 * double(site.k) + 1e-5 * std::fabs(exact) + 2e-6;
        ASSERT_NEAR(y[i * site.n + j], exact, bound) << "row " << i << ", column " << j;
      }
    const size_t rowBytes = size_t(site.n) * sizeof(float);
    for (int64_t rows : {int64_t(1), int64_t(3), int64_t(15), int64_t(16), int64_t(255), int64_t(257), int64_t(1024),
                         int64_t(1025), kRows - 7})
      for (int64_t first : {int64_t(0), int64_t(7)}) {
        SCOPED_TRACE(::testing::Message() << rows << " rows from row " << first);
        Tensor window = Tensor::f32({rows, site.k});
        std::memcpy(window.rawData(), all.data<float>() + first * site.k, size_t(rows * site.k) * sizeof(float));
        for (Model *model : {two.get(), one.get()}) {
          std::vector<Tensor> out;
          ASSERT_OK(model->run("forward", {window}, out));
          EXPECT_EQ(0, std::memcmp(out[0].rawData(), static_cast<const char *>(whole[0].rawData()) + size_t(first) * rowBytes,
                                   size_t(rows) * rowBytes))
              << (model == one.get() ? "1 thread" : "2 threads");
        }
      }
  }
}

// weight_layout "packed_bf16" through a Model: bf16 results within the rounding bound of the
// reference (f32) backend and different from the f32 kernel's; with ONEDNN_MAX_CPU_ISA capped
// below AVX512_CORE_BF16 the model says it runs bf16 sites as f32 and gives the f32 bits.
TEST(PackedGemmModel, Bf16LayoutAndTheIsaCap) {
  auto artifact = [](const char *layout) {
    Artifact art;
    FunctionBuilder f(art, "forward");
    uint32_t x = f.input("x", DType::F32, {kDyn, 48});
    Attrs attrs{{"weight_layout", AttrValue::ofString(layout)}, {"activation", AttrValue::ofString("relu")}};
    f.output(f.op("tfm.linear", {x, f.param("w", {200, 48}), f.param("b", {200})}, DType::F32, {kDyn, 200}, attrs));
    f.finish();
    return art;
  };
  const std::map<std::string, Tensor> weights{{"w", randomF32({200, 48}, 61)}, {"b", randomF32({200}, 62)}};
  const std::vector<Tensor> in{randomF32({9, 48}, 63)};
  auto runWith = [&](const char *layout, KernelBackend backend, bool &asF32, std::string &kernel) {
    auto model = loadModel(artifact(layout), backend, 2);
    EXPECT_TRUE(model && model->setWeights(weights).ok());
    std::vector<Tensor> out;
    EXPECT_TRUE(model->run("forward", in, out).ok());
    asF32 = model->bf16RunsAsF32();
    kernel = model->kernelName("forward", 0);
    return out[0];
  };
  bool asF32 = false;
  std::string kernel;
  const Tensor ref = runWith("packed_bf16", KernelBackend::Reference, asF32, kernel);
  EXPECT_TRUE(asF32) << "the reference backend computes bf16 sites in f32";
  const Tensor f32 = runWith("packed", KernelBackend::Dnnl, asF32, kernel);
  EXPECT_FALSE(asF32);
  const Tensor bf16 = runWith("packed_bf16", KernelBackend::Dnnl, asF32, kernel);
  EXPECT_EQ(kernel, "dnnl.linear.packed_bf16");
  EXPECT_EQ(asF32, !gemm::cpuHasAvx512Bf16());
  // |x|, |w| < 1, K = 48: sum |x w| < 48, rounding bound 2^-8 * 48 < 0.19; typical errors far less.
  EXPECT_TRUE(allClose(bf16, ref, 0.19, 0.0));
  if (gemm::cpuHasAvx512Bf16()) EXPECT_NE(0, std::memcmp(bf16.rawData(), f32.rawData(), f32.nbytes())) << "bf16 ran in f32";

  const Tensor capped = [&] {
    ScopedEnv cap("ONEDNN_MAX_CPU_ISA", "AVX512_CORE");
    return runWith("packed_bf16", KernelBackend::Dnnl, asF32, kernel);
  }();
  EXPECT_TRUE(asF32);
  EXPECT_EQ(0, std::memcmp(capped.rawData(), f32.rawData(), f32.nbytes())) << "the capped bf16 model runs the f32 path";
}

// packed_bf16 on the bf16 panels (every row count in this inference entry) and, with
// few_rows_gemm off, on oneDNN's bf16 primitive (what training's products over 256 rows run):
// every element within the rounding bound of the exact product, (2^-8 + 2^-18) sum_k |x_k w_k|
// plus f32 summation error, for a linear with relu and odd K, a linear with a residual, and a
// transposed matmul; and not the f32 kernel's bits (bf16 did run).
TEST(PackedGemmModel, Bf16ManyRowsWithinTheRoundingBound) {
  if (!gemm::cpuHasAvx512Bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16: bf16 sites run in f32";
  struct Site {
    const char *what;
    int64_t k, n;
    bool linear, relu, residual;
    bool transposed = true;  // the weight is [N, K]
  };
  for (const Site &site : {Site{"linear relu, odd K", 301, 200, true, true, false},
                           Site{"linear + residual", 64, 96, true, false, true},
                           Site{"matmul, transposed table", 128, 300, false, false, false},
                           Site{"matmul, [K, N] weight", 96, 130, false, false, false, false}}) {
    auto artifact = [&](const char *layout) {
      Artifact art;
      FunctionBuilder f(art, "forward");
      uint32_t x = f.input("x", DType::F32, {kDyn, site.k});
      Attrs attrs{{"weight_layout", AttrValue::ofString(layout)}};
      if (site.relu) attrs["activation"] = AttrValue::ofString("relu");
      if (!site.linear) attrs["transpose_b"] = AttrValue::ofInt(site.transposed ? 1 : 0);
      std::vector<uint32_t> in{x, f.param("w", site.transposed ? Shape{site.n, site.k} : Shape{site.k, site.n})};
      if (site.linear) in.push_back(f.param("b", {site.n}));
      if (site.residual) in.push_back(f.input("r", DType::F32, {kDyn, site.n}));
      f.output(f.op(site.linear ? "tfm.linear" : "tfm.matmul", in, DType::F32, {kDyn, site.n}, attrs));
      f.finish();
      return art;
    };
    for (const bool panels : {true, false}) {
    SCOPED_TRACE(panels ? "bf16 panels" : "oneDNN's bf16 primitive");
    RuntimeOptions options;
    options.num_threads = 2;
    options.few_rows_gemm = panels;
    auto bf16 = loadModel(artifact("packed_bf16"), options);
    auto f32 = loadModel(artifact("packed"), options);
    ASSERT_TRUE(bf16 && f32);
    // Two weight sets: the second must replace the first's bf16 copy.
    for (uint64_t seed : {71, 171})
    for (int64_t m : {9, 256, 257, 600}) {
      SCOPED_TRACE(::testing::Message() << site.what << ", M " << m << ", weights " << seed);
      std::map<std::string, Tensor> weights{
          {"w", randomF32(site.transposed ? Shape{site.n, site.k} : Shape{site.k, site.n}, seed)}};
      if (site.linear) weights["b"] = randomF32({site.n}, seed + 1);
      if (m == 9) {
        ASSERT_OK(bf16->setWeights(weights));
        ASSERT_OK(f32->setWeights(weights));
      }
      const float *w = weights["w"].data<float>();
      std::vector<Tensor> in{randomF32({m, site.k}, uint64_t(m) + 73)}, a, b;
      if (site.residual) in.push_back(randomF32({m, site.n}, 74));
      ASSERT_OK(bf16->run("forward", in, a));
      ASSERT_OK(f32->run("forward", in, b));
      EXPECT_NE(0, std::memcmp(a[0].rawData(), b[0].rawData(), b[0].nbytes())) << "bf16 ran in f32";
      const float *x = in[0].data<float>(), *y = a[0].data<float>();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < site.n; ++j) {
          double exact = site.linear ? weights["b"].data<float>()[j] : 0.0, magnitude = 0;
          for (int64_t kk = 0; kk < site.k; ++kk) {
            const double p =
                double(x[i * site.k + kk]) * double(site.transposed ? w[j * site.k + kk] : w[kk * site.n + j]);
            exact += p;
            magnitude += std::fabs(p);
          }
          if (site.relu) exact = std::max(exact, 0.0);
          if (site.residual) exact += in[1].data<float>()[i * site.n + j];
          ASSERT_NEAR(y[i * site.n + j], exact,
                      (std::ldexp(1.0, -8) + std::ldexp(1.0, -18)) * magnitude + 1e-6 * double(site.k) + 1e-6)
              << i << ", " << j;
        }
    }
    }
  }
}

// tfm.matmul {log_softmax} (decode_step's vocabulary projection with its normaliser): on every
// layout and path (plain, packed with the panel GEMM on and off, packed_bf16) and on the reference
// backend, the result is the same model's plain product normalised per row in double here.
TEST(PackedGemmModel, LogSoftmaxEpilogueNormalisesTheProduct) {
  auto artifact = [](const char *layout, bool logSoftmax) {
    Artifact art;
    FunctionBuilder f(art, "forward");
    uint32_t x = f.input("x", DType::F32, {kDyn, 40});
    Attrs attrs{{"weight_layout", AttrValue::ofString(layout)}, {"transpose_b", AttrValue::ofInt(1)}};
    if (logSoftmax) attrs["log_softmax"] = AttrValue::ofInt(1);
    f.output(f.op("tfm.matmul", {x, f.param("e", {300, 40})}, DType::F32, {kDyn, 300}, attrs));
    f.finish();
    return art;
  };
  // Logits spread over ~[-20, 20], so the normaliser is far from zero and from the max.
  Tensor table = randomF32({300, 40}, 71);
  for (int64_t i = 0; i < table.numel(); ++i) table.data<float>()[i] *= 10.0f;
  const std::map<std::string, Tensor> weights{{"e", table}};
  for (const char *layout : {"plain", "packed", "packed_bf16"})
    for (KernelBackend backend : {KernelBackend::Dnnl, KernelBackend::Reference})
      for (bool fewRows : {true, false}) {
        RuntimeOptions o;
        o.backend = backend;
        o.num_threads = 2;
        o.few_rows_gemm = fewRows;
        auto fused = loadModel(artifact(layout, true), o), plain = loadModel(artifact(layout, false), o);
        ASSERT_TRUE(fused && plain);
        ASSERT_OK(fused->setWeights(weights));
        ASSERT_OK(plain->setWeights(weights));
        for (int64_t m : {1, 6, 115, 257, 1025}) {
          SCOPED_TRACE(::testing::Message() << layout << " " << backendName(backend) << " few rows " << fewRows << " M " << m);
          std::vector<Tensor> in{randomF32({m, 40}, uint64_t(m))}, y, z;
          ASSERT_OK(fused->run("forward", in, y));
          ASSERT_OK(plain->run("forward", in, z));
          double worst = 0;
          for (int64_t r = 0; r < m; ++r) {
            const float *zr = z[0].data<float>() + r * 300, *yr = y[0].data<float>() + r * 300;
            double mx = zr[0], sum = 0;
            for (int j = 0; j < 300; ++j) mx = std::max(mx, double(zr[j]));
            for (int j = 0; j < 300; ++j) sum += std::exp(double(zr[j]) - mx);
            const double lse = mx + std::log(sum);
            for (int j = 0; j < 300; ++j) worst = std::max(worst, std::abs(double(yr[j]) - (double(zr[j]) - lse)));
          }
          EXPECT_LT(worst, 2e-5);
        }
      }
}

}  // namespace
}  // namespace tfmrt::test
