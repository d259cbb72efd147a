// Hand-built artifacts run end to end on both backends: compared with each other, with an
// independent double-precision implementation, and with hand-computed values. Also input
// validation messages, weight initialisation, plan caching and steady-state allocations.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>

#include "test_util.h"

// Counts global allocations so tests can check that steady-state run() calls do not allocate.
namespace {
std::atomic<bool> gCounting{false};
std::atomic<long> gAllocCount{0};
std::atomic<long> gAllocBytes{0};
}  // namespace

void *operator new(size_t n) {
  if (gCounting.load(std::memory_order_relaxed)) {
    gAllocCount.fetch_add(1, std::memory_order_relaxed);
    gAllocBytes.fetch_add(long(n), std::memory_order_relaxed);
  }
  void *p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }

namespace tfmrt::test {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

// --- embedding -> scale -> add_positions -> matmul -> bias_add -> relu / gelu -> layer_norm ---

struct FfnDims {
  int64_t vocab = 11, d = 8, f = 12, maxLen = 16;
  double scale = std::sqrt(8.0);
};

Artifact ffnArtifact(const FfnDims &k, const Tensor &positions) {
  Artifact a;
  a.modelName = "ffn";
  FunctionBuilder f(a, "forward");
  uint32_t ids = f.input("ids", DType::I32, {kDyn, kDyn});
  uint32_t table = f.param("embed.weight", {k.vocab, k.d});
  uint32_t pe = f.constant("pe", positions);
  uint32_t w = f.param("fc.weight", {k.f, k.d});
  uint32_t b = f.param("fc.bias", {k.f}, ParamInit::Zeros);
  uint32_t g = f.param("norm.weight", {k.f}, ParamInit::Ones);
  uint32_t be = f.param("norm.bias", {k.f}, ParamInit::Zeros);
  const Shape bsd{kDyn, kDyn, k.d}, bsf{kDyn, kDyn, k.f};
  uint32_t e = f.op("tfm.embedding", {table, ids}, DType::F32, bsd);
  uint32_t s = f.op("tfm.scale", {e}, DType::F32, bsd, {{"factor", AttrValue::ofFloat(k.scale)}});
  uint32_t p = f.op("tfm.add_positions", {s, pe}, DType::F32, bsd);
  uint32_t h = f.op("tfm.matmul", {p, w}, DType::F32, bsf, {{"transpose_b", AttrValue::ofInt(1)}});
  uint32_t hb = f.op("tfm.bias_add", {h, b}, DType::F32, bsf);
  uint32_t r = f.op("tfm.relu", {hb}, DType::F32, bsf);
  uint32_t y = f.op("tfm.layer_norm", {r, g, be}, DType::F32, bsf, {{"epsilon", AttrValue::ofFloat(1e-12)}});
  f.output(y);
  f.output(f.op("tfm.gelu", {hb}, DType::F32, bsf));
  f.finish();
  return a;
}

TEST(EndToEnd, FfnStackHandComputed) {
  // emb = [[1,2],[3,4]], ids = [1,0] -> [[3,4],[1,2]]; + pe [[0,1],[1,0]] -> [[3,5],[2,2]];
  // W = [[1,0],[1,-1]] (x W^T) -> [[3,-2],[2,0]]; + b [0.5,1] -> [[3.5,-1],[2.5,1]]; relu ->
  // [[3.5,0],[2.5,1]]; layer norm (eps 1e-12) -> [1,-1] per row; * gamma [2,1] + beta [0,0.5] -> [2,-0.5].
  FfnDims k{2, 2, 2, 2, 1.0};
  Artifact a = ffnArtifact(k, Tensor::f32({2, 2}, {0, 1, 1, 0}));
  std::map<std::string, Tensor> w{{"embed.weight", Tensor::f32({2, 2}, {1, 2, 3, 4})},
                                  {"fc.weight", Tensor::f32({2, 2}, {1, 0, 1, -1})},
                                  {"fc.bias", Tensor::f32({2}, {0.5f, 1})},
                                  {"norm.weight", Tensor::f32({2}, {2, 1})},
                                  {"norm.bias", Tensor::f32({2}, {0, 0.5f})}};
  auto gelu = [](double x) { return float(0.5 * x * (1 + std::erf(x / std::sqrt(2.0)))); };
  for (KernelBackend backend : {KernelBackend::Reference, KernelBackend::Dnnl}) {
    SCOPED_TRACE(backendName(backend));
    auto m = loadModel(a, backend);
    ASSERT_OK(m->setWeights(w));
    std::vector<Tensor> out;
    ASSERT_OK(m->run("forward", {Tensor::i32({1, 2}, {1, 0})}, out));
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(allClose(out[0], Tensor::f32({1, 2, 2}, {2, -0.5f, 2, -0.5f}), 1e-6, 1e-6));
    EXPECT_TRUE(allClose(out[1], Tensor::f32({1, 2, 2}, {gelu(3.5), gelu(-1), gelu(2.5), gelu(1)}), 1e-6, 1e-6));
  }
}

TEST(EndToEnd, FfnStackBackendsAgreeAcrossShapes) {
  FfnDims k;
  Artifact a = ffnArtifact(k, sinusoidTable(k.maxLen, k.d));
  auto ref = loadModel(a, KernelBackend::Reference);
  auto fast = loadModel(a, KernelBackend::Dnnl);
  ASSERT_OK(ref->initWeights(11));
  ASSERT_OK(fast->initWeights(11));
  EXPECT_EQ(fast->kernelName("forward", 3), "dnnl.matmul.plain");
  EXPECT_EQ(fast->kernelName("forward", 6), "fast.layer_norm");
  EXPECT_EQ(ref->kernelName("forward", 3), "reference.matmul");
  EXPECT_EQ(fast->kernelName("forward", 99), "");
  for (auto [b, s] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 5}, {3, 16}, {1, 7}, {2, 5}}) {
    std::vector<Tensor> in{randomIds({b, s}, 0, int32_t(k.vocab), uint64_t(b * 100 + s))}, x, y;
    ASSERT_OK(ref->run("forward", in, x));
    ASSERT_OK(fast->run("forward", in, y));
    EXPECT_TRUE(allClose(y[0], x[0], 1e-4, 1e-4)) << b << "x" << s;
    EXPECT_TRUE(allClose(y[1], x[1], 1e-4, 1e-4)) << b << "x" << s;
  }
}

// --- an attention block with padding + causal masks, tied output projection and the loss ---

struct AttnDims {
  int64_t vocab = 13, d = 8, heads = 2, maxLen = 12;
  double smoothing = 0.1;
};

Artifact attentionArtifact(const AttnDims &k) {
  Artifact a;
  a.modelName = "attn";
  a.metadata["model.pad_id"] = "0";
  FunctionBuilder f(a, "forward");
  uint32_t src = f.input("src", DType::I32, {kDyn, kDyn});
  uint32_t tgt = f.input("tgt", DType::I32, {kDyn, kDyn});
  uint32_t emb = f.param("embed.weight", {k.vocab, k.d});
  uint32_t pe = f.constant("pe", sinusoidTable(k.maxLen, k.d));
  const int64_t hk = k.d / k.heads;
  const Shape bsd{kDyn, kDyn, k.d}, bhsk{kDyn, k.heads, kDyn, hk}, bhss{kDyn, k.heads, kDyn, kDyn};
  auto tb = [](int v) { return Attrs{{"transpose_b", AttrValue::ofInt(v)}}; };
  uint32_t keep = f.op("tfm.padding_mask", {src}, DType::Bool, {kDyn, kDyn}, {{"pad_id", AttrValue::ofInt(0)}});
  uint32_t x = f.op("tfm.embedding", {emb, src}, DType::F32, bsd);
  x = f.op("tfm.add_positions", {x, pe}, DType::F32, bsd);
  auto linear = [&](uint32_t in, const std::string &name) {
    uint32_t w = f.param(name + ".weight", {k.d, k.d});
    uint32_t b = f.param(name + ".bias", {k.d}, ParamInit::Zeros);
    return f.op("tfm.bias_add", {f.op("tfm.matmul", {in, w}, DType::F32, bsd, tb(1)), b}, DType::F32, bsd);
  };
  auto heads = Attrs{{"heads", AttrValue::ofInt(k.heads)}};
  uint32_t q = f.op("tfm.split_heads", {linear(x, "q_proj")}, DType::F32, bhsk, heads);
  uint32_t kk = f.op("tfm.split_heads", {linear(x, "k_proj")}, DType::F32, bhsk, heads);
  uint32_t v = f.op("tfm.split_heads", {linear(x, "v_proj")}, DType::F32, bhsk, heads);
  uint32_t sc = f.op("tfm.batch_matmul", {q, kk}, DType::F32, bhss, tb(1));
  sc = f.op("tfm.scale", {sc}, DType::F32, bhss, {{"factor", AttrValue::ofFloat(1.0 / std::sqrt(double(hk)))}});
  sc = f.op("tfm.mask", {sc, keep}, DType::F32, bhss, {{"causal", AttrValue::ofInt(1)}});
  uint32_t probs = f.op("tfm.softmax", {sc}, DType::F32, bhss);
  uint32_t pd = f.op("tfm.dropout", {probs}, DType::F32, bhss, {{"rate", AttrValue::ofFloat(0.1)}});
  uint32_t ctx = f.op("tfm.batch_matmul", {pd, v}, DType::F32, bhsk, tb(0));
  uint32_t merged = f.op("tfm.merge_heads", {ctx}, DType::F32, bsd);
  uint32_t o = linear(merged, "out_proj");
  uint32_t r = f.op("tfm.add", {x, o}, DType::F32, bsd);
  uint32_t g = f.param("norm.weight", {k.d}, ParamInit::Ones);
  uint32_t be = f.param("norm.bias", {k.d}, ParamInit::Zeros);
  uint32_t y = f.op("tfm.layer_norm", {r, g, be}, DType::F32, bsd, {{"epsilon", AttrValue::ofFloat(1e-5)}});
  uint32_t logits = f.op("tfm.matmul", {y, emb}, DType::F32, {kDyn, kDyn, k.vocab}, tb(1));
  uint32_t loss = f.op("tfm.label_smoothed_xent", {logits, tgt}, DType::F32, {},
                       {{"smoothing", AttrValue::ofFloat(k.smoothing)}, {"pad_id", AttrValue::ofInt(0)}});
  f.output(logits);
  f.output(loss);
  f.output(probs);
  f.finish();
  return a;
}

// Independent double-precision implementation of attentionArtifact (from the op semantics).
struct AttnExpected {
  std::vector<double> logits, probs;
  double loss = 0;
};

AttnExpected attentionByHand(const AttnDims &k, const Model &m, const Tensor &src, const Tensor &tgt) {
  const int64_t B = src.shape[0], S = src.shape[1], D = k.d, H = k.heads, K = D / H, V = k.vocab;
  auto W = [&](const std::string &n) { return m.weight(n)->data<float>(); };
  Tensor pe = sinusoidTable(k.maxLen, D);
  std::vector<double> x(size_t(B * S * D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t j = 0; j < D; ++j)
        x[(b * S + s) * D + j] = W("embed.weight")[src.data<int32_t>()[b * S + s] * D + j] + pe.data<float>()[s * D + j];
  auto linear = [&](const std::vector<double> &in, const std::string &name) {
    std::vector<double> out(in.size());
    for (int64_t r = 0; r < B * S; ++r)
      for (int64_t o = 0; o < D; ++o) {
        double acc = W(name + ".bias")[o];
        for (int64_t i = 0; i < D; ++i) acc += in[r * D + i] * W(name + ".weight")[o * D + i];
        out[r * D + o] = acc;
      }
    return out;
  };
  auto q = linear(x, "q_proj"), kk = linear(x, "k_proj"), v = linear(x, "v_proj");
  AttnExpected e;
  e.probs.assign(size_t(B * H * S * S), 0.0);
  std::vector<double> merged(size_t(B * S * D), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i) {
        std::vector<double> sc(static_cast<size_t>(S));
        double mx = -kInf;
        for (int64_t j = 0; j < S; ++j) {
          bool masked = src.data<int32_t>()[b * S + j] == 0 || j > i;
          double dot = 0;
          for (int64_t t = 0; t < K; ++t) dot += q[(b * S + i) * D + h * K + t] * kk[(b * S + j) * D + h * K + t];
          sc[j] = masked ? -kInf : dot / std::sqrt(double(K));
          mx = std::max(mx, sc[j]);
        }
        if (mx == -kInf) continue;  // fully masked row: zeros
        double sum = 0;
        for (int64_t j = 0; j < S; ++j) sum += std::exp(sc[j] - mx);
        for (int64_t j = 0; j < S; ++j) {
          double p = std::exp(sc[j] - mx) / sum;
          e.probs[((b * H + h) * S + i) * S + j] = p;
          for (int64_t t = 0; t < K; ++t) merged[(b * S + i) * D + h * K + t] += p * v[(b * S + j) * D + h * K + t];
        }
      }
  auto o = linear(merged, "out_proj");
  e.logits.assign(size_t(B * S * V), 0.0);
  int64_t count = 0;
  for (int64_t r = 0; r < B * S; ++r) {
    std::vector<double> y(static_cast<size_t>(D));
    double mean = 0, var = 0;
    for (int64_t j = 0; j < D; ++j) mean += (y[j] = x[r * D + j] + o[r * D + j]);
    mean /= double(D);
    for (int64_t j = 0; j < D; ++j) var += (y[j] - mean) * (y[j] - mean);
    var /= double(D);
    for (int64_t j = 0; j < D; ++j)
      y[j] = (y[j] - mean) / std::sqrt(var + 1e-5) * W("norm.weight")[j] + W("norm.bias")[j];
    for (int64_t c = 0; c < V; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < D; ++j) acc += y[j] * W("embed.weight")[c * D + j];
      e.logits[r * V + c] = acc;
    }
    int32_t t = tgt.data<int32_t>()[r];
    if (t == 0) continue;
    double mx = -kInf, sum = 0, sumLogp = 0;
    for (int64_t c = 0; c < V; ++c) mx = std::max(mx, e.logits[r * V + c]);
    for (int64_t c = 0; c < V; ++c) sum += std::exp(e.logits[r * V + c] - mx);
    double lse = mx + std::log(sum);
    for (int64_t c = 0; c < V; ++c) sumLogp += e.logits[r * V + c] - lse;
    e.loss += -(1 - k.smoothing) * (e.logits[r * V + t] - lse) - k.smoothing / double(V) * sumLogp;
    ++count;
  }
  e.loss = count ? e.loss / double(count) : 0.0;
  return e;
}

Tensor toTensor(const std::vector<double> &v, Shape shape) {
  Tensor t(DType::F32, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = float(v[i]);
  return t;
}

// Row 0 ends with padding; row 1 starts with a pad (its first query row is fully masked); row 2
// is all padding (every row fully masked).
std::vector<Tensor> attentionInputs(int64_t S, int64_t vocab) {
  Tensor src = randomIds({3, S}, 1, int32_t(vocab), 21), tgt = randomIds({3, S}, 1, int32_t(vocab), 22);
  int32_t *s = src.data<int32_t>(), *t = tgt.data<int32_t>();
  s[S - 1] = s[S - 2] = 0;
  t[S - 1] = 0;
  s[S] = 0;
  for (int64_t j = 0; j < S; ++j) s[2 * S + j] = 0, t[2 * S + j] = 0;
  return {src, tgt};
}

class Attention : public ::testing::TestWithParam<KernelBackend> {};

TEST_P(Attention, MatchesIndependentImplementation) {
  AttnDims k;
  auto m = loadModel(attentionArtifact(k), GetParam());
  ASSERT_OK(m->initWeights(3));
  for (int64_t S : {5, 9, 1 + 1}) {
    SCOPED_TRACE("S = " + std::to_string(S));
    auto in = attentionInputs(S, k.vocab);
    std::vector<Tensor> out;
    ASSERT_OK(m->run("forward", in, out));
    ASSERT_EQ(out.size(), 3u);
    AttnExpected e = attentionByHand(k, *m, in[0], in[1]);
    EXPECT_TRUE(allClose(out[0], toTensor(e.logits, {3, S, k.vocab}), 1e-4, 1e-4));
    EXPECT_TRUE(allClose(out[2], toTensor(e.probs, {3, k.heads, S, S}), 1e-5, 1e-4));
    ASSERT_EQ(out[1].shape, Shape({}));
    EXPECT_NEAR(out[1].data<float>()[0], e.loss, 1e-4);
    for (int64_t i = 0; i < out[0].numel(); ++i) ASSERT_FALSE(std::isnan(out[0].data<float>()[i]));
    // The all-padding row attends to nothing: zero probabilities, not NaN.
    for (int64_t i = 2 * k.heads * S * S; i < 3 * k.heads * S * S; ++i) ASSERT_EQ(out[2].data<float>()[i], 0.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Attention, ::testing::Values(KernelBackend::Reference, KernelBackend::Dnnl),
                         [](const auto &info) { return std::string(backendName(info.param)); });

// attentionArtifact after the compiler's fusions: the Q, K, V weights concatenated (evaluated when
// weights are set) into one merged projection, sliced back per head group; the output projection
// a linear joined to the residual by add_layer_norm; the tied vocabulary projection a matmul.
// Same parameters, so the same outputs. `packed` selects weight_layout on every GEMM.
Artifact fusedAttentionArtifact(const AttnDims &k, bool packed) {
  Artifact a;
  a.modelName = "attn_fused";
  a.metadata["model.pad_id"] = "0";
  FunctionBuilder f(a, "forward");
  uint32_t src = f.input("src", DType::I32, {kDyn, kDyn});
  uint32_t tgt = f.input("tgt", DType::I32, {kDyn, kDyn});
  uint32_t emb = f.param("embed.weight", {k.vocab, k.d});
  uint32_t pe = f.constant("pe", sinusoidTable(k.maxLen, k.d));
  const int64_t d = k.d, hk = d / k.heads;
  const Shape bsd{kDyn, kDyn, d}, bhsk{kDyn, k.heads, kDyn, hk}, bhss{kDyn, k.heads, kDyn, kDyn};
  Attrs layout;
  if (packed) layout["weight_layout"] = AttrValue::ofString("packed");
  uint32_t keep = f.op("tfm.padding_mask", {src}, DType::Bool, {kDyn, kDyn}, {{"pad_id", AttrValue::ofInt(0)}});
  uint32_t x = f.op("tfm.embedding", {emb, src}, DType::F32, bsd);
  x = f.op("tfm.add_positions", {x, pe}, DType::F32, bsd);
  std::vector<uint32_t> ws, bs;
  for (const char *p : {"q_proj", "k_proj", "v_proj"}) {
    ws.push_back(f.param(std::string(p) + ".weight", {d, d}));
    bs.push_back(f.param(std::string(p) + ".bias", {d}, ParamInit::Zeros));
  }
  uint32_t wqkv = f.op("tfm.concat", ws, DType::F32, {3 * d, d});
  uint32_t bqkv = f.op("tfm.concat", bs, DType::F32, {3 * d});
  uint32_t qkv = f.op("tfm.linear", {x, wqkv, bqkv}, DType::F32, {kDyn, kDyn, 3 * d}, layout);
  auto heads = [&](int64_t block) {
    uint32_t cols = f.op("tfm.slice_last", {qkv}, DType::F32, bsd,
                         {{"offset", AttrValue::ofInt(block * d)}, {"size", AttrValue::ofInt(d)}});
    return f.op("tfm.split_heads", {cols}, DType::F32, bhsk, {{"heads", AttrValue::ofInt(k.heads)}});
  };
  uint32_t q = heads(0), kk = heads(1), v = heads(2);
  uint32_t sc = f.op("tfm.batch_matmul", {q, kk}, DType::F32, bhss, {{"transpose_b", AttrValue::ofInt(1)}});
  sc = f.op("tfm.scale", {sc}, DType::F32, bhss, {{"factor", AttrValue::ofFloat(1.0 / std::sqrt(double(hk)))}});
  sc = f.op("tfm.mask", {sc, keep}, DType::F32, bhss, {{"causal", AttrValue::ofInt(1)}});
  uint32_t probs = f.op("tfm.softmax", {sc}, DType::F32, bhss);
  uint32_t pd = f.op("tfm.dropout", {probs}, DType::F32, bhss, {{"rate", AttrValue::ofFloat(0.1)}});
  uint32_t ctx = f.op("tfm.batch_matmul", {pd, v}, DType::F32, bhsk);
  uint32_t merged = f.op("tfm.merge_heads", {ctx}, DType::F32, bsd);
  uint32_t o = f.op("tfm.linear", {merged, f.param("out_proj.weight", {d, d}), f.param("out_proj.bias", {d}, ParamInit::Zeros)},
                    DType::F32, bsd, layout);
  uint32_t y = f.op("tfm.add_layer_norm",
                    {x, o, f.param("norm.weight", {d}, ParamInit::Ones), f.param("norm.bias", {d}, ParamInit::Zeros)},
                    DType::F32, bsd, {{"epsilon", AttrValue::ofFloat(1e-5)}});
  Attrs tied = layout;
  tied["transpose_b"] = AttrValue::ofInt(1);
  uint32_t logits = f.op("tfm.matmul", {y, emb}, DType::F32, {kDyn, kDyn, k.vocab}, tied);
  uint32_t loss = f.op("tfm.label_smoothed_xent", {logits, tgt}, DType::F32, {},
                       {{"smoothing", AttrValue::ofFloat(k.smoothing)}, {"pad_id", AttrValue::ofInt(0)}});
  f.output(logits);
  f.output(loss);
  f.output(probs);
  f.finish();
  return a;
}

class FusedAttention : public ::testing::TestWithParam<std::tuple<KernelBackend, bool>> {};

TEST_P(FusedAttention, MatchesIndependentImplementation) {
  const auto [backend, packed] = GetParam();
  AttnDims k;
  Artifact a = fusedAttentionArtifact(k, packed);
  auto m = loadModel(a, backend);
  ASSERT_TRUE(m);
  if (backend == KernelBackend::Dnnl) {
    const std::string layout = packed ? "packed" : "plain";
    EXPECT_EQ(m->kernelName("forward", 5), "dnnl.linear." + layout);   // merged QKV
    EXPECT_EQ(m->kernelName("forward", 19), "dnnl.linear." + layout);  // out_proj
    EXPECT_EQ(m->kernelName("forward", 20), "fast.add_layer_norm");
    EXPECT_EQ(m->kernelName("forward", 21), "dnnl.matmul." + layout);  // tied vocabulary projection
  }
  // Random biases and norm parameters too, so every operand of the fused ops matters.
  for (uint64_t seed : {1, 2}) {
    std::map<std::string, Tensor> weights;
    for (const ParamInfo &p : a.params) weights[p.name] = randomF32(p.shape, seed * 100 + weights.size(), -0.5f, 0.5f);
    ASSERT_OK(m->setWeights(weights));
    for (int64_t S : {5, 9, 2}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", S = " + std::to_string(S));
      auto in = attentionInputs(S, k.vocab);
      std::vector<Tensor> out;
      ASSERT_OK(m->run("forward", in, out));
      AttnExpected e = attentionByHand(k, *m, in[0], in[1]);
      EXPECT_TRUE(allClose(out[0], toTensor(e.logits, {3, S, k.vocab}), 1e-4, 1e-4));
      EXPECT_TRUE(allClose(out[2], toTensor(e.probs, {3, k.heads, S, S}), 1e-5, 1e-4));
      EXPECT_NEAR(out[1].data<float>()[0], e.loss, 1e-4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BackendsAndLayouts, FusedAttention,
                         ::testing::Combine(::testing::Values(KernelBackend::Reference, KernelBackend::Dnnl), ::testing::Bool()),
                         [](const auto &info) {
                           return std::string(backendName(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_packed" : "_plain");
                         });

TEST(EndToEnd, AttentionBackendsAgree) {
  AttnDims k;
  Artifact a = attentionArtifact(k);
  auto ref = loadModel(a, KernelBackend::Reference);
  auto fast = loadModel(a, KernelBackend::Dnnl);
  ASSERT_OK(ref->initWeights(8));
  ASSERT_OK(fast->initWeights(8));
  for (int64_t S : {1, 4, 12}) {
    auto in = attentionInputs(std::max<int64_t>(S, 2), k.vocab);
    std::vector<Tensor> x, y;
    ASSERT_OK(ref->run("forward", in, x));
    ASSERT_OK(fast->run("forward", in, y));
    for (size_t o = 0; o < x.size(); ++o) EXPECT_TRUE(allClose(y[o], x[o], 1e-4, 1e-4)) << "output " << o;
  }
}

// --- run() input validation ----------------------------------------------------------------

class RunErrors : public ::testing::Test {
protected:
  void SetUp() override {
    model = loadModel(attentionArtifact(k), KernelBackend::Dnnl);
    ASSERT_TRUE(model);
    ASSERT_OK(model->initWeights(1));
    good = attentionInputs(4, k.vocab);
  }
  AttnDims k;
  std::unique_ptr<Model> model;
  std::vector<Tensor> good, out;
};

TEST_F(RunErrors, WeightsNotSet) {
  auto fresh = loadModel(attentionArtifact(k), KernelBackend::Dnnl);
  EXPECT_FALSE(fresh->hasWeights());
  EXPECT_ERROR(fresh->run("forward", good, out), "entry 'forward'", "weights are not set", "initWeights");
  EXPECT_ERROR(fresh->saveWeights(tempPath("x.safetensors")), "weights are not set");
}

TEST_F(RunErrors, UnknownEntry) {
  Status s = model->run("decode", good, out);
  EXPECT_ERROR(s, "no entry function 'decode'", "model 'attn'", "'forward'");
  EXPECT_EQ(s.code(), StatusCode::NotFound);
}

TEST_F(RunErrors, InputCountDtypeRank) {
  EXPECT_ERROR(model->run("forward", {good[0]}, out), "entry 'forward' expects 2 inputs (src, tgt), got 1");
  EXPECT_ERROR(model->run("forward", {randomF32({3, 4}, 1), good[1]}, out),
               "entry 'forward': input 'src' (#0) must be i32, got f32");
  EXPECT_ERROR(model->run("forward", {good[0], Tensor::i32({12}, std::vector<int32_t>(12, 1))}, out),
               "input 'tgt' (#1) must have rank 2", "got [12]");
  Tensor broken = good[0];
  broken.shape = {3, 400};  // storage no longer covers the shape
  EXPECT_ERROR(model->run("forward", {broken, good[1]}, out), "input 'src'", "storage smaller than its shape");
}

TEST_F(RunErrors, StaticDimMismatch) {
  Artifact a;
  FunctionBuilder f(a, "forward");
  uint32_t x = f.input("features", DType::F32, {kDyn, 4});
  f.output(f.op("tfm.relu", {x}, DType::F32, {kDyn, 4}));
  f.finish();
  auto m = loadModel(a, KernelBackend::Reference);
  EXPECT_ERROR(m->run("forward", {randomF32({2, 5}, 1)}, out), "entry 'forward': input 'features' (#0) dim 1 must be 4",
               "declared [?, 4]", "got [2, 5]");
  ASSERT_OK(m->run("forward", {randomF32({2, 4}, 1)}, out));  // no params: no weights needed
}

TEST_F(RunErrors, IdsOutsideVocabulary) {
  Tensor src = good[0];
  src.data<int32_t>()[5] = int32_t(k.vocab);
  EXPECT_ERROR(model->run("forward", {src, good[1]}, out), "entry 'forward': input 'src' (#0) holds id 13",
               "flat position 5", "outside [0, 13)", "'embed.weight'", "tfm.embedding at test.yaml:");
  src.data<int32_t>()[5] = -4;
  EXPECT_ERROR(model->run("forward", {src, good[1]}, out), "input 'src' (#0) holds id -4");
  Tensor tgt = good[1];
  tgt.data<int32_t>()[0] = 99;
  EXPECT_ERROR(model->run("forward", {good[0], tgt}, out), "input 'tgt' (#1) holds id 99", "13-way output vocabulary",
               "tfm.label_smoothed_xent");
}

TEST_F(RunErrors, SequenceLongerThanPositionTable) {
  auto in = attentionInputs(k.maxLen + 1, k.vocab);
  EXPECT_ERROR(model->run("forward", in, out), "entry 'forward': input 'src' (#0) has length 13",
               "position table 'pe' has only 12 rows", "tfm.add_positions at test.yaml:");
  // And the model still works afterwards.
  ASSERT_OK(model->run("forward", good, out));
}

TEST_F(RunErrors, InconsistentBatch) {
  Tensor tgt = Tensor::i32({2, 4}, std::vector<int32_t>(8, 1));
  EXPECT_ERROR(model->run("forward", {good[0], tgt}, out), "entry 'forward': node", "tfm.label_smoothed_xent",
               "logits must be targets' shape plus a vocabulary dim");
}

// --- plans, threads, weights -----------------------------------------------------------------

TEST(Plans, ManyShapesThenBack) {
  FfnDims k;
  Artifact a = ffnArtifact(k, sinusoidTable(k.maxLen, k.d));
  auto m = loadModel(a, KernelBackend::Dnnl);
  ASSERT_OK(m->initWeights(2));
  std::vector<Tensor> first, again, x;
  Tensor in0 = randomIds({2, 3}, 0, int32_t(k.vocab), 1);
  ASSERT_OK(m->run("forward", {in0}, first));
  for (int64_t s = 1; s <= 16; ++s)
    for (int64_t b : {1, 2})
      ASSERT_OK(m->run("forward", {randomIds({b, s}, 0, int32_t(k.vocab), uint64_t(s))}, x));  // evicts old plans
  ASSERT_OK(m->run("forward", {in0}, again));
  EXPECT_TRUE(allClose(again[0], first[0], 0, 0));
}

class SteadyState : public ::testing::TestWithParam<bool> {};  // unfused / fused (packed)

TEST_P(SteadyState, RunsDoNotAllocate) {
  const AttnDims dims{50, 64, 4, 64, 0.1};
  Artifact a = GetParam() ? fusedAttentionArtifact(dims, true) : attentionArtifact(dims);
  for (KernelBackend backend : {KernelBackend::Reference, KernelBackend::Dnnl}) {
    SCOPED_TRACE(backendName(backend));
    auto m = loadModel(a, backend);
    ASSERT_OK(m->initWeights(4));
    auto in = attentionInputs(48, 50);
    std::vector<Tensor> out;
    const uint64_t tensorsAtStart = Tensor::storageAllocations();
    ASSERT_OK(m->run("forward", in, out));  // first call: plan, buffers, packed weights
    ASSERT_GT(Tensor::storageAllocations(), tensorsAtStart);  // the count sees the runtime's tensors
    ASSERT_OK(m->run("forward", in, out));
    gAllocCount = 0;
    gAllocBytes = 0;
    const uint64_t tensorsBefore = Tensor::storageAllocations();
    gCounting = true;
    Status s1 = m->run("forward", in, out);
    Status s2 = m->run("forward", in, out);
    gCounting = false;
    ASSERT_OK(s1);
    ASSERT_OK(s2);
    // Tensor storage (aligned_alloc or mmap, which the operator new hook does not see).
    EXPECT_EQ(Tensor::storageAllocations(), tensorsBefore);
    if (backend == KernelBackend::Reference) {
      EXPECT_EQ(gAllocCount.load(), 0) << gAllocBytes.load() << " bytes";
    } else {
      // oneDNN allocates small bookkeeping objects inside each primitive execution (scratch
      // buffers of its own would show here; tensors are counted above).
      EXPECT_LT(gAllocBytes.load() / 2, 16 * 1024) << gAllocCount.load() << " allocations";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, SteadyState, ::testing::Bool(),
                         [](const auto &info) { return std::string(info.param ? "fused" : "unfused"); });

TEST(Weights, InitIsDeterministicAndThreadIndependent) {
  AttnDims k;
  Artifact a = attentionArtifact(k);
  auto one = loadModel(a, KernelBackend::Reference, 1);
  auto two = loadModel(a, KernelBackend::Reference, 2);
  ASSERT_OK(one->initWeights(42));
  ASSERT_OK(two->initWeights(42));
  for (const ParamInfo &p : a.params) EXPECT_TRUE(allClose(*one->weight(p.name), *two->weight(p.name), 0, 0)) << p.name;
  ASSERT_OK(two->initWeights(43));
  EXPECT_FALSE(allClose(*one->weight("q_proj.weight"), *two->weight("q_proj.weight"), 0, 0));
  // Xavier-uniform bound for [8, 8]: sqrt(6 / 16); zeros / ones.
  const Tensor &w = *one->weight("q_proj.weight");
  double bound = std::sqrt(6.0 / 16.0), sum = 0, maxAbs = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    sum += w.data<float>()[i];
    maxAbs = std::max(maxAbs, double(std::fabs(w.data<float>()[i])));
  }
  EXPECT_LE(maxAbs, bound);
  EXPECT_GT(maxAbs, 0.5 * bound);
  EXPECT_LT(std::fabs(sum / double(w.numel())), 0.2);
  EXPECT_TRUE(allClose(*one->weight("q_proj.bias"), Tensor::f32({8}), 0, 0));
  EXPECT_TRUE(allClose(*one->weight("norm.weight"), Tensor::f32({8}, std::vector<float>(8, 1.0f)), 0, 0));
  // Streams are keyed by name: two same-shaped weights differ.
  EXPECT_FALSE(allClose(*one->weight("q_proj.weight"), *one->weight("k_proj.weight"), 0, 0));
}

TEST(Weights, NormalInitStatistics) {
  Artifact a;
  FunctionBuilder f(a, "forward");
  uint32_t ids = f.input("ids", DType::I32, {kDyn, kDyn});
  uint32_t t = f.param("table", {100, 100}, ParamInit::Normal);
  f.output(f.op("tfm.embedding", {t, ids}, DType::F32, {kDyn, kDyn, 100}));
  f.finish();
  auto m = loadModel(a, KernelBackend::Reference);
  ASSERT_OK(m->initWeights(9));
  const Tensor &w = *m->weight("table");
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < w.numel(); ++i) sum += w.data<float>()[i], sq += double(w.data<float>()[i]) * w.data<float>()[i];
  double mean = sum / double(w.numel()), var = sq / double(w.numel()) - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(var, 1.0, 0.05);
}

TEST(Weights, SaveLoadGivesIdenticalOutputs) {
  AttnDims k;
  Artifact a = attentionArtifact(k);
  auto m = loadModel(a, KernelBackend::Dnnl);
  ASSERT_OK(m->initWeights(5));
  std::string path = tempPath("attn.safetensors");
  ASSERT_OK(m->saveWeights(path));
  auto other = loadModel(a, KernelBackend::Dnnl);
  ASSERT_OK(other->loadWeights(path));
  auto in = attentionInputs(6, k.vocab);
  std::vector<Tensor> x, y;
  ASSERT_OK(m->run("forward", in, x));
  ASSERT_OK(other->run("forward", in, y));
  for (size_t o = 0; o < x.size(); ++o) EXPECT_TRUE(allClose(y[o], x[o], 0, 0));
}

TEST(Threads, OneAndTwoThreadsAgree) {
  AttnDims k;
  Artifact a = attentionArtifact(k);
  auto one = loadModel(a, KernelBackend::Dnnl, 1);
  auto two = loadModel(a, KernelBackend::Dnnl, 2);
  ASSERT_OK(one->initWeights(6));
  ASSERT_OK(two->initWeights(6));
  auto in = attentionInputs(10, k.vocab);
  std::vector<Tensor> x, y;
  ASSERT_OK(one->run("forward", in, x));
  ASSERT_OK(two->run("forward", in, y));
  for (size_t o = 0; o < x.size(); ++o) EXPECT_TRUE(allClose(y[o], x[o], 1e-5, 1e-5));
  std::unique_ptr<Model> bad;
  EXPECT_ERROR(Model::fromArtifact(a, RuntimeOptions{KernelBackend::Dnnl, -1}, bad), "must be in [0, 1024], got -1");
  EXPECT_ERROR(Model::fromArtifact(a, RuntimeOptions{KernelBackend::Dnnl, kMaxThreads + 1}, bad), "must be in [0, 1024], got 1025");
}

TEST(Load, FromFileAndErrorsNameThePath) {
  AttnDims k;
  std::string path = tempPath("attn.tfmx");
  ASSERT_OK(writeArtifactFile(attentionArtifact(k), path));
  std::unique_ptr<Model> m;
  ASSERT_OK(Model::load(path, RuntimeOptions{}, m));
  EXPECT_EQ(m->artifact().modelName, "attn");
  EXPECT_EQ(m->options().backend, KernelBackend::Dnnl);
  EXPECT_ERROR(Model::load(path + ".missing", RuntimeOptions{}, m), path + ".missing");
  Artifact broken = attentionArtifact(k);
  broken.functions[0].nodes[3].op = "tfm.nonsense";
  ASSERT_OK(writeArtifactFile(broken, path));
  EXPECT_ERROR(Model::load(path, RuntimeOptions{}, m), path, "node 3 (tfm.nonsense at test.yaml:4:3)");
}

}  // namespace
}  // namespace tfmrt::test

// A resume compares the training settings a checkpoint recorded with the artifact's. Clipping and
// weight decay came later: a file without them trained (or trains) without, so switching either
// on or off is a change even against a checkpoint or artifact that predates the key.
TEST(CheckpointSettings, SettingsAddedLaterCountAsOff) {
  const std::map<std::string, std::string> old{{"training_settings", "train.adam_eps=1.000000e-09\n"}};
  tfmrt::Artifact plain, clipped, decayed;
  plain.metadata = {{"train.adam_eps", "1.000000e-09"}};
  clipped.metadata = {{"train.adam_eps", "1.000000e-09"}, {"train.clip_norm", "5.000000e-01"}};
  decayed.metadata = {{"train.adam_eps", "1.000000e-09"}, {"train.weight_decay", "1.000000e-02"}};
  EXPECT_EQ(tfmrt::trainingSettingsChange(old, plain), "");
  EXPECT_EQ(tfmrt::trainingSettingsChange(old, clipped), "clip_norm 0.000000e+00 -> 5.000000e-01");
  EXPECT_EQ(tfmrt::trainingSettingsChange(old, decayed), "weight_decay 0.000000e+00 -> 1.000000e-02");
  // A checkpoint that clipped, resumed by an artifact written before the key: refused too.
  const std::map<std::string, std::string> clippedRun{
      {"training_settings", "train.adam_eps=1.000000e-09\ntrain.clip_norm=5.000000e-01\n"}};
  EXPECT_EQ(tfmrt::trainingSettingsChange(clippedRun, plain), "clip_norm 5.000000e-01 -> 0.000000e+00");
  EXPECT_EQ(tfmrt::trainingSettingsChange(clippedRun, clipped), "");
  // Other keys only one side records are still not compared (files from before they existed).
  const std::map<std::string, std::string> withSeed{{"training_settings", "training.seed=3\n"}};
  EXPECT_EQ(tfmrt::trainingSettingsChange(withSeed, plain), "");
}
