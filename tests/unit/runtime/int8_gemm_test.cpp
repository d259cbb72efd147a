// The int8 GEMM (kernels/gemm/packed_gemm_int8.h, weight_layout "packed_int8"): the AVX512-VNNI
// body and row quantizer against the plain loops, bit for bit; the plain loops against the exact
// product within the quantization bound; rounding ties, tiny, zero and non-finite rows; and
// through a Model on each path (VNNI, plain loops, the f32 fallback): kernel names, batch
// independence, weight updates, the epilogues, and the f32 reference backend.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "kernels/gemm/packed_gemm_int8.h"
#include "test_util.h"

namespace tfmrt::test {
namespace {

namespace q8 = gemm::int8;

std::vector<float> randomVec(size_t n, uint64_t seed, float scale = 1.0f) {
  Tensor t = randomF32({int64_t(n)}, seed);
  std::vector<float> v(t.data<float>(), t.data<float>() + n);
  for (float &x : v) x *= scale;
  return v;
}

// A weight [n, k] (transposed) or [k, n], packed, with 64-byte aligned panels.
struct PackedInt8 {
  std::vector<int8_t> storage;
  std::vector<float> scales;
  std::vector<int32_t> offsets;
  q8::PackedWeight w;
  PackedInt8(const float *weight, int64_t k, int64_t n, bool transposed)
      : storage(size_t(q8::packedPanelBytes(k, n)) + 64), scales(size_t(q8::packedColumns(n))),
        offsets(size_t(q8::packedColumns(n))) {
    int8_t *panels = reinterpret_cast<int8_t *>((reinterpret_cast<uintptr_t>(storage.data()) + 63) / 64 * 64);
    q8::packWeight(weight, k, n, transposed, panels, scales.data(), offsets.data());
    w = {panels, scales.data(), offsets.data()};
  }
};

struct Quantized {
  std::vector<uint8_t> xq;
  std::vector<float> sx;
  Quantized(const float *x, int64_t m, int64_t k, bool vnni) : xq(size_t(m * q8::rowBytes(k))), sx(size_t(m)) {
    if (vnni) q8::quantizeRowsAvx512(x, m, k, xq.data(), sx.data());
    else q8::quantizeRowsReference(x, m, k, xq.data(), sx.data());
  }
};

struct Shape3 {
  int64_t m, k, n;
};
const Shape3 kShapes[] = {{1, 1, 1}, {1, 256, 8000}, {5, 3, 63}, {6, 4, 64}, {7, 17, 70},
                          {13, 256, 130}, {40, 1024, 256}, {130, 33, 200}};

// The VNNI body and quantizer give the plain loops' bits, for every epilogue, weight orientation
// and panel sub-range: none, bias, bias + relu, the output as the residual, and bias + relu + a
// separate residual.
TEST(Int8Gemm, VnniBodyEqualsThePlainLoops) {
  if (!q8::cpuHasAvx512Vnni()) GTEST_SKIP() << "this CPU has no AVX512-VNNI: the plain loops run";
  for (const Shape3 &s : kShapes)
    for (bool transposed : {true, false})
      for (int epilogue = 0; epilogue < 5; ++epilogue) {
        SCOPED_TRACE(::testing::Message() << s.m << " x " << s.k << " x " << s.n << " transposed " << transposed
                                          << " epilogue " << epilogue);
        std::vector<float> x = randomVec(size_t(s.m * s.k), uint64_t(s.m * 7 + s.k), 3.0f);
        if (s.m > 2) std::fill(x.begin() + s.k, x.begin() + 2 * s.k, 0.0f);  // a zero row
        const std::vector<float> w = randomVec(size_t(s.k * s.n), uint64_t(s.n + 5), 0.2f);
        const std::vector<float> bias = randomVec(size_t(s.n), 9), residual = randomVec(size_t(s.m * s.n), 10);
        const PackedInt8 packed(w.data(), s.k, s.n, transposed);
        const Quantized ref(x.data(), s.m, s.k, false), fast(x.data(), s.m, s.k, true);
        ASSERT_EQ(ref.xq, fast.xq);
        ASSERT_EQ(0, std::memcmp(ref.sx.data(), fast.sx.data(), ref.sx.size() * sizeof(float)));
        gemm::Epilogue e;
        e.bias = epilogue >= 1 ? bias.data() : nullptr;
        e.relu = epilogue == 2 || epilogue == 4;
        if (epilogue == 4) e.residual = residual.data();
        std::vector<float> want(size_t(s.m * s.n), -7.0f), got(want.size(), -7.0f), split(want.size(), -7.0f);
        if (epilogue == 3) {  // the output is the residual (a linear's in-place residual add)
          want = residual;
          got = residual;
          split = residual;
        }
        const int64_t panels = gemm::panelCount(s.n);
        gemm::Epilogue ew = e, eg = e, es = e;
        if (epilogue == 3) {
          ew.residual = want.data();
          eg.residual = got.data();
          es.residual = split.data();
        }
        q8::gemmReference(ref.xq.data(), ref.sx.data(), s.m, s.k, packed.w, s.n, 0, panels, ew, want.data());
        q8::gemmAvx512Vnni(fast.xq.data(), fast.sx.data(), s.m, s.k, packed.w, s.n, 0, panels, eg, got.data());
        for (int64_t p = 0; p < panels; ++p)
          q8::gemmAvx512Vnni(fast.xq.data(), fast.sx.data(), s.m, s.k, packed.w, s.n, p, p + 1, es, split.data());
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
        ASSERT_EQ(0, std::memcmp(want.data(), split.data(), want.size() * sizeof(float)));
      }
}

// The AMX body gives the plain loops' bits too (exact int32 sums, the same epilogue), on 32-row
// blocks and tails of 1-31 rows, every epilogue including the output as the residual, and any
// split of the panels; nothing is written past the result.
TEST(Int8Gemm, AmxBodyEqualsThePlainLoops) {
  if (!q8::cpuHasAmxInt8()) GTEST_SKIP() << "this CPU has no AMX-INT8 (or Linux refused the tile state)";
  const Shape3 shapes[] = {{1, 64, 1}, {15, 128, 17}, {16, 64, 64}, {17, 256, 65}, {31, 192, 100},
                           {32, 256, 256}, {33, 1024, 64}, {48, 64, 130}, {115, 256, 1000}, {128, 512, 96}};
  for (const Shape3 &s : shapes)
    for (int epilogue = 0; epilogue < 5; ++epilogue) {
      SCOPED_TRACE(::testing::Message() << s.m << " x " << s.k << " x " << s.n << " epilogue " << epilogue);
      ASSERT_TRUE(q8::amxInt8Fits(s.k));
      std::vector<float> x = randomVec(size_t(s.m * s.k), uint64_t(s.m * 5 + s.k), 3.0f);
      if (s.m > 2) std::fill(x.begin() + s.k, x.begin() + 2 * s.k, 0.0f);  // a zero row
      const std::vector<float> w = randomVec(size_t(s.k * s.n), uint64_t(s.n + 3), 0.2f);
      const std::vector<float> bias = randomVec(size_t(s.n), 19), residual = randomVec(size_t(s.m * s.n), 20);
      const PackedInt8 packed(w.data(), s.k, s.n, true);
      const Quantized q(x.data(), s.m, s.k, false);
      gemm::Epilogue e;
      e.bias = epilogue >= 1 ? bias.data() : nullptr;
      e.relu = epilogue == 2 || epilogue == 4;
      if (epilogue == 4) e.residual = residual.data();
      // One guard row past the result.
      std::vector<float> want(size_t((s.m + 1) * s.n), -7.0f), got(want), split(want);
      if (epilogue == 3) {  // the output is the residual
        std::copy(residual.begin(), residual.end(), want.begin());
        std::copy(residual.begin(), residual.end(), got.begin());
        std::copy(residual.begin(), residual.end(), split.begin());
      }
      gemm::Epilogue ew = e, eg = e, es = e;
      if (epilogue == 3) {
        ew.residual = want.data();
        eg.residual = got.data();
        es.residual = split.data();
      }
      const int64_t panels = gemm::panelCount(s.n);
      q8::gemmReference(q.xq.data(), q.sx.data(), s.m, s.k, packed.w, s.n, 0, panels, ew, want.data());
      q8::gemmAmxInt8(q.xq.data(), q.sx.data(), s.m, s.k, packed.w, s.n, 0, panels, eg, got.data());
      for (int part = 0; part < 3; ++part)
        q8::gemmAmxInt8(q.xq.data(), q.sx.data(), s.m, s.k, packed.w, s.n, panels * part / 3, panels * (part + 1) / 3, es,
                        split.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
      ASSERT_EQ(0, std::memcmp(want.data(), split.data(), want.size() * sizeof(float)));
    }
}

// Within the quantization bound of the exact product: x = sx qx + ex with |ex| <= sx / 2, and
// likewise w, so |x.w - (sx qx).(sw qw)| <= sx/2 sum|w| + sw/2 sum|x| + k sx sw / 4, plus the f32
// epilogue's rounding. The bound is tight enough to fail with a wrong scale or offset (tried: the
// weights quantized with 126/127 of their reciprocal scale; 127 instead of 128 times the column
// sum subtracted).
TEST(Int8Gemm, PlainLoopsWithinTheQuantizationBound) {
  for (const Shape3 &s : kShapes)
  for (bool transposed : {true, false}) {
    SCOPED_TRACE(::testing::Message() << s.m << " x " << s.k << " x " << s.n << " transposed " << transposed);
    const std::vector<float> x = randomVec(size_t(s.m * s.k), uint64_t(s.k + 1), 2.0f);
    const std::vector<float> w = randomVec(size_t(s.k * s.n), uint64_t(s.n + 2), 0.1f);
    const PackedInt8 packed(w.data(), s.k, s.n, transposed);
    const Quantized q(x.data(), s.m, s.k, false);
    std::vector<float> y(size_t(s.m * s.n));
    q8::gemmReference(q.xq.data(), q.sx.data(), s.m, s.k, packed.w, s.n, 0, gemm::panelCount(s.n), gemm::Epilogue(),
                      y.data());
    double worstRatio = 0;
    for (int64_t i = 0; i < s.m; ++i) {
      double sumX = 0, maxX = 0;
      for (int64_t kk = 0; kk < s.k; ++kk) {
        sumX += std::fabs(x[size_t(i * s.k + kk)]);
        maxX = std::max(maxX, double(std::fabs(x[size_t(i * s.k + kk)])));
      }
      for (int64_t j = 0; j < s.n; ++j) {
        double exact = 0, sumW = 0, maxW = 0, magnitude = 0;
        for (int64_t kk = 0; kk < s.k; ++kk) {
          const double a = x[size_t(i * s.k + kk)], b = w[size_t(transposed ? j * s.k + kk : kk * s.n + j)];
          exact += a * b;
          magnitude += std::fabs(a * b);
          sumW += std::fabs(b);
          maxW = std::max(maxW, std::fabs(b));
        }
        const double sx = maxX / 127, sw = maxW / 127;
        const double bound = sx / 2 * sumW + sw / 2 * sumX + double(s.k) * sx * sw / 4 + 1e-6 * (magnitude + 1e-3);
        const double err = std::fabs(double(y[size_t(i * s.n + j)]) - exact);
        ASSERT_LE(err, bound) << i << ", " << j;
        worstRatio = std::max(worstRatio, err / bound);
      }
    }
    // Rounding errors mostly cancel: the worst element uses well under the worst-case bound.
    EXPECT_LT(worstRatio, 0.75);
  }
}

// A zero row gives the bias exactly; a row holding NaN or an infinity gives NaN everywhere (as
// f32 would give NaN or inf); a weight column holding one gives NaN in that column only.
TEST(Int8Gemm, ZeroAndNonFiniteRowsAndColumns) {
  const int64_t m = 4, k = 20, n = 70;
  std::vector<float> x = randomVec(size_t(m * k), 3), w = randomVec(size_t(n * k), 4);
  std::fill(x.begin(), x.begin() + k, 0.0f);
  x[size_t(k + 3)] = std::numeric_limits<float>::quiet_NaN();
  x[size_t(2 * k + 5)] = std::numeric_limits<float>::infinity();
  w[size_t(7 * k + 2)] = -std::numeric_limits<float>::infinity();
  const std::vector<float> bias = randomVec(size_t(n), 5);
  const PackedInt8 packed(w.data(), k, n, true);
  for (bool vnni : {false, true}) {
    if (vnni && !q8::cpuHasAvx512Vnni()) continue;
    const Quantized q(x.data(), m, k, vnni);
    std::vector<float> y(size_t(m * n));
    gemm::Epilogue e;
    e.bias = bias.data();
    if (vnni) q8::gemmAvx512Vnni(q.xq.data(), q.sx.data(), m, k, packed.w, n, 0, gemm::panelCount(n), e, y.data());
    else q8::gemmReference(q.xq.data(), q.sx.data(), m, k, packed.w, n, 0, gemm::panelCount(n), e, y.data());
    for (int64_t j = 0; j < n; ++j) {
      SCOPED_TRACE(::testing::Message() << "vnni " << vnni << " column " << j);
      if (j == 7) {
        for (int64_t i = 0; i < m; ++i) EXPECT_TRUE(std::isnan(y[size_t(i * n + j)]));
        continue;
      }
      EXPECT_EQ(y[size_t(j)], bias[size_t(j)]);
      EXPECT_TRUE(std::isnan(y[size_t(n + j)]));
      EXPECT_TRUE(std::isnan(y[size_t(2 * n + j)]));
      EXPECT_TRUE(std::isfinite(y[size_t(3 * n + j)]));
    }
  }
}

// Rounding is to nearest even (a row whose maximum is 127 has reciprocal scale exactly 1, so its
// values are rounded as they are); a row whose largest magnitude is tiny quantizes to zeros with
// scale 0 (its reciprocal would overflow); K = 0 gives the bias.
TEST(Int8Gemm, RoundingTiesTinyRowsAndEmptyContraction) {
  const std::vector<float> x = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f, -126.5f, 0.0f,   // ties
                                1e-35f, -2e-36f, 0.0f, 1e-38f, 0.0f, 0.0f, 0.0f, 0.0f};  // tiny
  const std::vector<uint8_t> ties = {255, 130, 124, 128, 128, 130, 2, 128};
  for (bool vnni : {false, true}) {
    if (vnni && !q8::cpuHasAvx512Vnni()) continue;
    SCOPED_TRACE(vnni ? "vnni" : "plain");
    const Quantized q(x.data(), 2, 8, vnni);
    EXPECT_EQ(std::vector<uint8_t>(q.xq.begin(), q.xq.begin() + 8), ties);
    EXPECT_EQ(q.sx[0], 1.0f);
    EXPECT_EQ(std::vector<uint8_t>(q.xq.begin() + 8, q.xq.end()), std::vector<uint8_t>(8, 128));
    EXPECT_EQ(q.sx[1], 0.0f);
  }
  const std::vector<float> bias = randomVec(70, 12);
  std::vector<float> y(3 * 70, -7.0f), none;
  const PackedInt8 packed(none.data(), 0, 70, true);
  std::vector<uint8_t> xq;
  std::vector<float> sx(3);
  q8::quantizeRowsReference(none.data(), 3, 0, xq.data(), sx.data());
  gemm::Epilogue e;
  e.bias = bias.data();
  q8::gemmReference(xq.data(), sx.data(), 3, 0, packed.w, 70, 0, gemm::panelCount(70), e, y.data());
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 70; ++j) ASSERT_EQ(y[size_t(i * 70 + j)], bias[size_t(j)]) << i << ", " << j;
}

// Through a Model, on each path (TFMC_INT8_ISA unset: VNNI where the CPU has it, else f32;
// =portable: the plain int8 loops; =f32: the f32 packed GEMM) for a linear with relu, one with a
// residual, one with gelu and a residual, and a vocabulary matmul with log_softmax: the int8 paths
// give the same bits as each other, stay within the quantization bound of the reference backend's
// f32 but differ from it, give each row the same result alone as in the batch, and quantize new
// weights again; the f32 path gives the f32 artifact's bits.
TEST(Int8GemmModel, PathsBatchIndependenceAndBoundOfF32) {
  struct Site {
    const char *what;
    bool linear, relu, residual, logSoftmax, gelu = false;
  };
  struct Path {
    const char *isa;  // TFMC_INT8_ISA, or null
    q8::Int8Path path;
  };
  const Path paths[] = {{nullptr, q8::cpuHasAvx512Vnni() ? q8::Int8Path::Vnni : q8::Int8Path::F32},
                        {"portable", q8::Int8Path::Portable},
                        {"f32", q8::Int8Path::F32}};
  for (const Site &site : {Site{"linear relu", true, true, false, false}, Site{"linear + residual", true, false, true, false},
                           Site{"linear gelu + residual", true, false, true, false, true},
                           Site{"matmul log_softmax", false, false, false, true}}) {
    const int64_t k = 48, n = 200, m = 37;
    auto artifact = [&](const char *layout) {
      Artifact art;
      FunctionBuilder f(art, "forward");
      uint32_t x = f.input("x", DType::F32, {kDyn, k});
      Attrs attrs{{"weight_layout", AttrValue::ofString(layout)}};
      if (site.relu) attrs["activation"] = AttrValue::ofString("relu");
      if (site.gelu) attrs["activation"] = AttrValue::ofString("gelu");
      if (!site.linear) attrs["transpose_b"] = AttrValue::ofInt(1);
      if (site.logSoftmax) attrs["log_softmax"] = AttrValue::ofInt(1);
      std::vector<uint32_t> in{x, f.param("w", {n, k})};
      if (site.linear) in.push_back(f.param("b", {n}));
      if (site.residual) in.push_back(f.input("r", DType::F32, {kDyn, n}));
      f.output(f.op(site.linear ? "tfm.linear" : "tfm.matmul", in, DType::F32, {kDyn, n}, attrs));
      f.finish();
      return art;
    };
    const std::string what = site.linear ? "linear" : "matmul";
    auto ref = loadModel(artifact("packed_int8"), KernelBackend::Reference, 2);
    auto f32 = loadModel(artifact("packed"), KernelBackend::Dnnl, 2);
    ASSERT_TRUE(ref && f32);
    for (uint64_t seed : {81, 181}) {
      std::map<std::string, Tensor> weights{{"w", randomF32({n, k}, seed, -0.3f, 0.3f)}};
      if (site.linear) weights["b"] = randomF32({n}, seed + 1);
      std::vector<Tensor> in{randomF32({m, k}, seed + 2, -2.0f, 2.0f)}, exact, plain;
      if (site.residual) in.push_back(randomF32({m, n}, seed + 3));
      ASSERT_OK(ref->setWeights(weights));
      ASSERT_OK(f32->setWeights(weights));
      ASSERT_OK(ref->run("forward", in, exact));
      ASSERT_OK(f32->run("forward", in, plain));
      std::vector<Tensor> int8Results;
      for (const Path &path : paths) {
        SCOPED_TRACE(::testing::Message() << site.what << ", weights " << seed << ", TFMC_INT8_ISA "
                                          << (path.isa ? path.isa : "unset"));
        auto int8 = [&] {
          std::optional<ScopedEnv> isa;
          if (path.isa) isa.emplace("TFMC_INT8_ISA", path.isa);
          return loadModel(artifact("packed_int8"), KernelBackend::Dnnl, 2);
        }();
        ASSERT_TRUE(int8);
        ASSERT_OK(int8->setWeights(weights));
        std::vector<Tensor> all;
        ASSERT_OK(int8->run("forward", in, all));
        if (path.path == q8::Int8Path::F32) {
          EXPECT_EQ(int8->kernelName("forward", 0), "dnnl." + what + ".packed");
          ASSERT_EQ(0, std::memcmp(all[0].rawData(), plain[0].rawData(), plain[0].nbytes())) << "not the f32 kernel's bits";
          continue;
        }
        EXPECT_EQ(int8->kernelName("forward", 0),
                  std::string(path.path == q8::Int8Path::Vnni ? "fast." : "portable.") + what + ".packed_int8");
        // |x| <= 2, |w| <= 0.3, k = 48: the bound above is at most 2/127/2 * 14.4 + 0.3/127/2 * 96
        // + 48 * 2/127 * 0.3/127 / 4 ~ 0.23 per product (gelu's slope is at most 1.13;
        // log-probabilities: twice that, the normaliser's error included); typical errors are far
        // smaller.
        EXPECT_TRUE(allClose(all[0], exact[0], site.logSoftmax ? 0.46 : 0.26, 0.0));
        EXPECT_FALSE(allClose(all[0], exact[0], 1e-7, 0.0)) << "int8 gave the f32 results";
        for (const Tensor &other : int8Results)
          ASSERT_EQ(0, std::memcmp(all[0].rawData(), other.rawData(), other.nbytes())) << "the int8 paths differ";
        int8Results.push_back(all[0]);
        for (int64_t i = 0; i < m; i += 9) {
          std::vector<Tensor> one{Tensor::f32({1, k}, std::vector<float>(in[0].data<float>() + i * k, in[0].data<float>() + (i + 1) * k))}, y;
          if (site.residual)
            one.push_back(Tensor::f32({1, n}, std::vector<float>(in[1].data<float>() + i * n, in[1].data<float>() + (i + 1) * n)));
          ASSERT_OK(int8->run("forward", one, y));
          ASSERT_EQ(0, std::memcmp(y[0].rawData(), all[0].data<float>() + i * n, size_t(n) * sizeof(float))) << "row " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tfmrt::test
