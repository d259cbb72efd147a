// tfm.matmul and tfm.linear on oneDNN: one kernel class, four registrations.
//
//   dnnl.matmul.plain   dnnl.linear.plain   weight read in place (row-major; [N, K] weights through
//                                           the transposed tag `ba`), never copied
//   dnnl.matmul.packed  dnnl.linear.packed  weight reordered once per weights version into the
//                                           primitive's preferred layout (format_tag::any)
//
// The primitive is created once at load with a run-time M (DNNL_RUNTIME_DIM_VAL), so any
// batch x length runs without re-creating it. oneDNN 2.6 then picks its gemm:jit implementation,
// whose preferred weight layout is row-major [K, N]: for PyTorch's [N, K] weights packing is a
// transpose, measured 1.2-2.4x faster than reading through `ba` for M >= 32 here. (The blocked
// brgemm layouts need a static M in 2.6.)
//
// tfm.linear epilogue on oneDNN (training entries, CPUs without AVX2): the bias is the matmul
// bias ({1, N}); relu / gelu are eltwise post-ops (gelu_erf). The residual cannot be a binary post-op: 2.6 rejects binary post-ops with run-time
// dims. Without an activation it is copied into the output and added by a sum post-op (the GEMM
// accumulates onto it); after an activation ([eltwise, sum] falls back to oneDNN's reference
// implementation) it is added by a vectorised loop after the GEMM.
//
// Panels: packed kernels with an AVX-512 or AVX2 + FMA CPU run our own panel GEMM
// (kernels/gemm/packed_gemm.h) for every row count in inference entries and up to kFewRowsMax
// rows in training entries, on a second packed copy of the weight (64-column panels for the
// AVX-512 body, 16 for the AVX2 one): packed when weights are set for inference entries, on the
// first few-rows call per weights version for training ones, so training at its usual batch
// sizes never holds it. oneDNN's run-time-M gemm spends most of a 32 x 256 x 256 product outside
// its FMAs (bench/gemm_bench.cpp prints both, side by side).
//
// packed_bf16 (tfm-lower-precision) on an AVX512-BF16 CPU: the same rows run the bf16 panel GEMM
// (its AMX body on CPUs with AMX-BF16 and K a multiple of 32: on a Xeon with AMX, vdpbf16ps runs
// at half the f32 FMA rate and oneDNN 2.6's run-time-M bf16 gemm does not use the tiles;
// gemm_bench there, decoder step at 128 rows: AMX 412, vdpbf16ps 101, f32 panels 193, oneDNN
// bf16 297 GFLOP/s); training's larger products run a second oneDNN primitive with bf16 src and
// weights, f32 bias and dst (run-time M: gemm:jit's bf16 kernel, ~2x the f32 rate here) on the
// Model's shared bf16 copy of the weight (gemm::Bf16WeightCopies: converted once per weights
// version for all sites, read through the same strides as the f32 weight; gemm:jit's bf16 kernel
// runs as fast on `ba` as on `ab`, unlike its f32 kernel), x rounded to bf16 per call (nearest
// even, as the panel path). Without the ISA both run the f32 paths above.
#include <omp.h>

#include <mutex>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/gemm/packed_gemm.h"
#include "kernels/onednn/onednn_util.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/log_softmax.h"
#include "op_schema.h"

namespace tfmrt {
namespace {

using namespace dnnl_names;

enum class Activation { None, Relu, Gelu };

// Training entries: the panels up to this many rows (beyond it training's products would re-pack
// the panels after every Adam step for little gain).
constexpr int64_t kFewRowsMax = 256;

class DnnlGemmKernel final : public Kernel {
public:
  DnnlGemmKernel(bool linear, bool packed, bool bf16 = false) : linear_(linear), packed_(packed), bf16_(bf16) {}

  const char *name() const override {
    if (bf16_) return linear_ ? "dnnl.linear.packed_bf16" : "dnnl.matmul.packed_bf16";
    return linear_ ? (packed_ ? "dnnl.linear.packed" : "dnnl.linear.plain")
                   : (packed_ ? "dnnl.matmul.packed" : "dnnl.matmul.plain");
  }

  Status prepare(const KernelPrepareInfo &info) override {
    ctx_ = cpuDevice(info.device);
    if (!ctx_) return internalError(cat(name(), " needs the CPU device"));
    const Node &node = *info.node;
    transposeB_ = linear_ || attrInt(node, "transpose_b") != 0;
    logSoftmax_ = !linear_ && attrInt(node, "log_softmax") != 0;
    if (linear_) {
      const std::string act = attrString(node, "activation");
      act_ = act == "relu" ? Activation::Relu : act == "gelu" ? Activation::Gelu : Activation::None;
      hasResidual_ = info.inputs.size() == 4;
    }
    const std::vector<int64_t> &b = info.inputs[1]->shape;
    int64_t k = transposeB_ ? b[1] : b[0];
    if (k < 0) k = info.inputs[0]->shape.back();  // the weight may be an input with a dynamic dim
    const int64_t n = transposeB_ ? b[0] : b[1];
    if (packed_ && (!info.knownBeforeRun[1] || k < 0 || n < 0))
      return internalError(cat("weight_layout 'packed' needs a weight known before run() with a static shape, got '",
                               info.inputs[1]->name, "' ", shapeStr(b)));
    const memory::dim kd = k >= 0 ? k : kRT, nd = n >= 0 ? n : kRT;
    avx512Panels_ = attention::cpuHasAvx512();
    // GELU has no panel epilogue: inference entries apply it after the product (geluRows).
    const bool panelActivation = act_ != Activation::Gelu || info.inferenceEntry;
    fewRows_ = info.fewRowsGemm && packed_ && panelActivation && (avx512Panels_ || attention::cpuHasAvx2Fma());
    fewRowsBf16_ = info.fewRowsGemm && bf16_ && panelActivation && gemm::cpuHasAvx512Bf16();
    amx_ = fewRowsBf16_ && gemm::amxFits(k) && gemm::cpuHasAmxBf16();
    // Inference entries run every row count on the panels: a row's bits then do not depend on
    // how many rows share its call, so translations do not change with --batch,
    // --max-batch-tokens or --workers (a decoder step has batch x beam rows, an encoder block
    // sentences x longest source). oneDNN's gemm rounds differently from the panels, and
    // differently again below ~16 rows (its gemv path). Such kernels create no oneDNN primitive.
    panelsOnly_ = info.inferenceEntry && (fewRows_ || fewRowsBf16_);
    weightK_ = k;
    weightN_ = n;
    if (panelsOnly_) return Status::OK();
    try {
      memory::desc srcMd({kRT, kd}, kF32, tag::ab);
      memory::desc plainWMd({kd, nd}, kF32, transposeB_ ? tag::ba : tag::ab);
      memory::desc wMd = packed_ ? memory::desc({kd, nd}, kF32, tag::any) : plainWMd;
      memory::desc dstMd({kRT, nd}, kF32, tag::ab);
      dnnl::post_ops ops;
      if (act_ == Activation::Relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      if (act_ == Activation::Gelu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
      if (hasResidual_ && act_ == Activation::None) ops.append_sum(1.0f);
      dnnl::primitive_attr attr = dnnlUserScratchpad();
      attr.set_post_ops(ops);
      auto desc = linear_ ? dnnl::matmul::desc(srcMd, wMd, memory::desc({1, nd}, kF32, tag::ab), dstMd)
                          : dnnl::matmul::desc(srcMd, wMd, dstMd);
      auto pd = dnnl::matmul::primitive_desc(desc, attr, ctx_->engine);
      prim_ = dnnl::matmul(pd);
      scratchpad_ = pd.scratchpad_desc();
      // When the preferred layout is the given one (matmul with b [K, N]), "packing" would be a
      // plain copy: read the weight in place instead.
      // (A kernel with the bf16 primitive below never runs this one: its weight is not packed.)
      const bool bf16Primitive = bf16_ && gemm::cpuHasAvx512Bf16();
      if (packed_ && pd.weights_desc() != plainWMd && !bf16Primitive) {
        packedW_ = memory(pd.weights_desc(), ctx_->engine);
        plainW_ = memory(plainWMd, ctx_->engine, nullptr);
        auto repackPd = dnnl::reorder::primitive_desc(ctx_->engine, plainWMd, ctx_->engine, pd.weights_desc(),
                                                      dnnlUserScratchpad());
        repack_ = dnnl::reorder(repackPd);
        if (size_t bytes = repackPd.scratchpad_desc().get_size()) {
          repackScratchpadMd_ = repackPd.scratchpad_desc();
          repackScratchpad_ = Tensor::largeBuffer(DType::Bool, {int64_t(bytes)});
        }
        repacks_ = true;
      }
      if (bf16Primitive) {
        // x rows as the panel path's bf16 pairs: K rounded up to even (stride), zero-padded.
        memory::desc srcBf16({kRT, kd}, kBf16, memory::dims{2 * gemm::pairCount(k), 1});
        memory::desc wBf16({kd, nd}, kBf16, transposeB_ ? tag::ba : tag::ab);
        auto descBf16 = linear_ ? dnnl::matmul::desc(srcBf16, wBf16, memory::desc({1, nd}, kF32, tag::ab), dstMd)
                                : dnnl::matmul::desc(srcBf16, wBf16, dstMd);
        auto pdBf16 = dnnl::matmul::primitive_desc(descBf16, attr, ctx_->engine);
        primBf16_ = dnnl::matmul(pdBf16);
        scratchpadBf16_ = pdBf16.scratchpad_desc();
        manyRowsBf16_ = true;
      }
    } catch (const dnnl::error &e) {
      return dnnlError(linear_ ? "linear primitive creation" : "matmul primitive creation", e);
    }
    return Status::OK();
  }

  // The primitives' scratchpads (user-managed: see CpuDevice).
  size_t scratchBytes(const std::vector<const std::vector<int64_t> *> &, int) const override {
    return std::max(scratchpad_.get_size(), manyRowsBf16_ ? scratchpadBf16_.get_size() : size_t(0));
  }

  Status prepareWeights(const KernelArgs &a) override {
    if (!a.inputs[1].data) return Status::OK();
    try {
      // The bf16 primitive's weight copy is made on first use instead (shared, and a training
      // step refreshes the weights of every entry, most of which the next step does not run).
      std::lock_guard<std::mutex> lock(derivedMutex_);
      // An inference entry's products all run on the panels: packed now, not at a first call.
      const bool packNow = panelsOnly_ && weightK_ > 0 && weightN_ > 0;
      if (packNow && fewRowsBf16_)
        ensureBf16PanelsLocked(a.inputs[1].as<float>(), weightK_, weightN_, a.weightsVersion);
      else if (packNow)
        ensurePanelsLocked(a.inputs[1].as<float>(), weightK_, weightN_, a.weightsVersion);
      else if (repacks_)
        repack(a.inputs[1].data, a.weightsVersion);
    } catch (const dnnl::error &e) {
      return dnnlError("weight reorder", e);
    }
    return Status::OK();
  }

  Status run(const KernelArgs &a) const override {
    Status s = runProduct(a);
    // tfm.matmul {log_softmax}: the rows normalised in place after the product (a separate
    // tfm.log_softmax read them back and wrote a second buffer).
    if (s.ok() && logSoftmax_) fast::logSoftmaxRows(a.outputs[0].as<float>(), rowsOf(a.outputs[0]), a.outputs[0].dim(-1),
                                                    a.outputs[0].as<float>());
    return s;
  }

private:
  Status runProduct(const KernelArgs &a) const {
    const TensorRef &A = a.inputs[0], &B = a.inputs[1], &C = a.outputs[0];
    // Rows from the result: with K = 0 the input has no elements but the result has rows.
    const int64_t m = rowsOf(C), k = A.dim(-1), n = C.dim(-1);
    if (m == 0 || n == 0) return Status::OK();
    const float *residual = hasResidual_ ? a.inputs[3].as<float>() : nullptr;
    // An activation is applied before the residual is added, so the residual cannot be the
    // output the product overwrites (the planner never gives a node an operand's memory).
    if (residual == C.data && act_ != Activation::None)
      return internalError(cat(name(), ": the residual is the output, with an activation"));
    if (k == 0) {  // empty contraction: oneDNN is not asked to handle it
      emptyContraction(linear_ ? a.inputs[2].as<float>() : nullptr, residual, C.as<float>(), m, n);
      return Status::OK();
    }
    if (fewRowsBf16_ && (panelsOnly_ || m <= kFewRowsMax)) {
      runFewRowsBf16(A.as<float>(), B.as<float>(), linear_ ? a.inputs[2].as<float>() : nullptr, residual, C.as<float>(),
                     m, k, n, a.weightsVersion);
      return Status::OK();
    }
    if (manyRowsBf16_) {
      try {
        runManyRowsBf16(A.as<float>(), B.as<float>(), linear_ ? a.inputs[2].data : nullptr, residual, C.as<float>(), m, k, n,
                        a.weightsVersion, a.scratch);
      } catch (const dnnl::error &e) {
        return dnnlError(linear_ ? "bf16 linear" : "bf16 matmul", e);
      }
      return Status::OK();
    }
    if (fewRows_ && (panelsOnly_ || m <= kFewRowsMax)) {
      runFewRows(A.as<float>(), B.as<float>(), linear_ ? a.inputs[2].as<float>() : nullptr, residual, C.as<float>(), m,
                 k, n, a.weightsVersion);
      return Status::OK();
    }
    if (!prim_) return internalError(cat(name(), ": ", m, " rows but no oneDNN primitive (panels only)"));
    try {
      // Packed by prepareWeights; this also covers weights swapped without it.
      if (repacks_) {
        std::lock_guard<std::mutex> lock(derivedMutex_);
        if (packedVersion_ != a.weightsVersion || packedFrom_ != B.data) repack(B.data, a.weightsVersion);
      }
      // The sum post-op accumulates onto the output: start it from the residual.
      if (residual && act_ == Activation::None) fast::copy(residual, C.data, size_t(m * n) * sizeof(float));
      const memory src({{m, k}, kF32, tag::ab}, ctx_->engine, A.data);
      const memory w = repacks_ ? packedW_ : memory({{k, n}, kF32, transposeB_ ? tag::ba : tag::ab}, ctx_->engine, B.data);
      runPrimitive(prim_, scratchpad_, a.scratch, src, w, C.data, linear_ ? a.inputs[2].data : nullptr, m, n);
    } catch (const dnnl::error &e) {
      return dnnlError(linear_ ? "linear" : "matmul", e);
    }
    if (residual && act_ != Activation::None) fast::add(C.as<float>(), residual, C.as<float>(), m * n);
    return Status::OK();
  }

  // One product on `prim` (prim_ or primBf16_): memory objects per call (sessions on several
  // threads may run this kernel at once; a handful of microseconds next to a product this size).
  void runPrimitive(const dnnl::matmul &prim, const memory::desc &scratchpad, void *scratch, const memory &src,
                    const memory &w, void *y, const void *bias, int64_t m, int64_t n) const {
    const memory dst({{m, n}, kF32, tag::ab}, ctx_->engine, y);
    std::vector<dnnl_exec_arg_t> args = {{DNNL_ARG_SRC, src.get()}, {DNNL_ARG_WEIGHTS, w.get()}, {DNNL_ARG_DST, dst.get()}};
    memory biasMem;
    if (linear_) {
      biasMem = memory({{1, n}, kF32, tag::ab}, ctx_->engine, const_cast<void *>(bias));
      args.push_back({DNNL_ARG_BIAS, biasMem.get()});
    }
    dnnlRun(*ctx_, prim, std::move(args), scratchpad, scratch);
  }

  // Under derivedMutex_.
  void repack(const void *plain, uint64_t version) const {
    plainW_.set_data_handle(const_cast<void *>(plain));
    dnnlRun(*ctx_, repack_, {{DNNL_ARG_FROM, plainW_.get()}, {DNNL_ARG_TO, packedW_.get()}}, repackScratchpadMd_,
            const_cast<void *>(repackScratchpad_.rawData()));
    packedVersion_ = version;
    packedFrom_ = plain;
  }

  void runManyRowsBf16(const float *x, const float *w, const void *bias, const float *residual, float *y, int64_t m,
                       int64_t k, int64_t n, uint64_t version, void *scratch) const {
    const uint16_t *wBf16 = ctx_->bf16Weights.get(w, k * n, version);
    const int64_t kp = gemm::pairCount(k);
    const uint32_t *pairs = toBf16Pairs(x, m, k);
    if (residual && act_ == Activation::None && residual != y) fast::copy(residual, y, size_t(m * n) * sizeof(float));
    const memory src({{m, k}, kBf16, memory::dims{2 * kp, 1}}, ctx_->engine, const_cast<uint32_t *>(pairs));
    const memory wMem({{k, n}, kBf16, transposeB_ ? tag::ba : tag::ab}, ctx_->engine, const_cast<uint16_t *>(wBf16));
    runPrimitive(primBf16_, scratchpadBf16_, scratch, src, wMem, y, bias, m, n);
    if (residual && act_ != Activation::None) fast::add(y, residual, y, m * n);
  }

  void runFewRows(const float *x, const float *w, const float *bias, const float *residual, float *y, int64_t m,
                  int64_t k, int64_t n, uint64_t version) const {
    {
      std::lock_guard<std::mutex> lock(derivedMutex_);
      ensurePanelsLocked(w, k, n, version);
    }
    const gemm::Epilogue e = epilogue(bias, residual);
    const float *packed = panels_.data<float>();
    if (avx512Panels_)
      forPanelRanges(m, k, n, [&](int64_t p0, int64_t p1) { gemm::gemmPanelsAvx512(x, m, k, packed, n, p0, p1, e, y); });
    else
      forPanelRanges(
          m, k, n, [&](int64_t p0, int64_t p1) { gemm::gemmPanelsAvx2(x, m, k, packed, n, p0, p1, e, y); },
          gemm::kAvx2PanelCols);
    if (act_ == Activation::Gelu) geluRows(y, residual, m, n);
  }

  // The panels' epilogue: bias, relu, residual (with GELU the residual waits for geluRows).
  gemm::Epilogue epilogue(const float *bias, const float *residual) const {
    gemm::Epilogue e;
    e.bias = bias;
    e.residual = act_ == Activation::Gelu ? nullptr : residual;
    e.relu = act_ == Activation::Relu;
    return e;
  }

  // GELU has no panel epilogue (inference entries only: training's gelu sites run oneDNN's
  // gelu_erf post-op): after the product with its bias, y = gelu(y) + residual row by row, each
  // row alone so its bits do not depend on how many rows share the call. (The residual is never
  // the output: runProduct refuses that with an activation.)
  static void geluRows(float *y, const float *residual, int64_t m, int64_t n) {
#pragma omp parallel for schedule(static) if (m * n >= kParallelMinElements)
    for (int64_t i = 0; i < m; ++i) {
      fast::geluSpan(y + i * n, y + i * n, n);
      if (residual) fast::addSpan(y + i * n, residual + i * n, y + i * n, n);
    }
  }

  // The f32 panels of weight w as of `version`, packed unless they are (under derivedMutex_):
  // by prepareWeights for inference entries, else by the first few-rows call of a version
  // (concurrent first calls wait for one packing).
  void ensurePanelsLocked(const float *w, int64_t k, int64_t n, uint64_t version) const {
    if (panels_.rawData() && panelsVersion_ == version && panelsFrom_ == w) return;
    // Huge pages: first-touching a 64 MB copy (base's vocabulary) on 4 KiB pages took ~0.2 s here.
    const int64_t width = avx512Panels_ ? gemm::kPanelCols : gemm::kAvx2PanelCols;
    if (!panels_.rawData()) panels_ = Tensor::largeBuffer(DType::F32, {gemm::packedFloats(k, n, width)});
    gemm::packPanels(w, k, n, transposeB_, panels_.data<float>(), width);
    panelsVersion_ = version;
    panelsFrom_ = w;
  }

  // The same for the bf16 panels (a kernel has one of the two kinds: they share the version).
  void ensureBf16PanelsLocked(const float *w, int64_t k, int64_t n, uint64_t version) const {
    if (panelsBf16_.rawData() && panelsVersion_ == version && panelsFrom_ == w) return;
    if (!panelsBf16_.rawData()) panelsBf16_ = Tensor::largeBuffer(DType::BF16, {gemm::packedBf16Elements(k, n)});
    gemm::packPanelsBf16(w, k, n, transposeB_, panelsBf16_.data<uint16_t>());
    panelsVersion_ = version;
    panelsFrom_ = w;
  }

  // body(p0, p1) over the panels of N, one contiguous range per thread (serial when small).
  template <typename Body>
  static void forPanelRanges(int64_t m, int64_t k, int64_t n, const Body &body, int64_t width = gemm::kPanelCols) {
    fast::parallelPanels(gemm::panelCount(n, width), m * n * k, body);
  }

  // x [m, k] rounded to bf16 pairs (K padded to even) in this thread's buffer, split over the
  // threads by row chunks when large (each element is rounded alone: the same bits either way).
  static const uint32_t *toBf16Pairs(const float *x, int64_t m, int64_t k) {
    const int64_t kp = gemm::pairCount(k);
    thread_local std::vector<uint32_t> pairsOfThread;  // grown once per thread
    pairsOfThread.resize(size_t(m * kp));
    uint32_t *pairs = pairsOfThread.data();
    const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(k, 1));
#pragma omp parallel for schedule(static) if (m * k >= (int64_t(1) << 16))
    for (int64_t r = 0; r < m; r += chunk)
      gemm::toBf16PairsAvx512Bf16(x + r * k, std::min(chunk, m - r), k, pairs + r * kp);
    return pairs;
  }

  // bf16 operands: the weight packed as bf16 pairs once per weights version, x rounded per call.
  void runFewRowsBf16(const float *x, const float *w, const float *bias, const float *residual, float *y, int64_t m,
                      int64_t k, int64_t n, uint64_t version) const {
    {
      std::lock_guard<std::mutex> lock(derivedMutex_);
      ensureBf16PanelsLocked(w, k, n, version);
    }
    const uint32_t *pairs = toBf16Pairs(x, m, k);
    const gemm::Epilogue e = epilogue(bias, residual);
    const uint16_t *packed = panelsBf16_.data<uint16_t>();
    if (amx_)
      forPanelRanges(m, k, n, [&](int64_t p0, int64_t p1) { gemm::gemmPanelsBf16Amx(pairs, m, k, packed, n, p0, p1, e, y); });
    else
      forPanelRanges(m, k, n,
                     [&](int64_t p0, int64_t p1) { gemm::gemmPanelsBf16Avx512Bf16(pairs, m, k, packed, n, p0, p1, e, y); });
    if (act_ == Activation::Gelu) geluRows(y, residual, m, n);
  }

  // x W^T over K = 0 is zero: y = act(bias) + residual (linear) or 0 (matmul).
  void emptyContraction(const float *bias, const float *residual, float *y, int64_t m, int64_t n) const {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float v = bias ? bias[j] : 0.0f;
        if (act_ == Activation::Relu) v = v > 0.0f ? v : 0.0f;
        if (act_ == Activation::Gelu) v = fast::geluErf(v);
        y[i * n + j] = v + (residual ? residual[i * n + j] : 0.0f);
      }
  }

  const bool linear_, packed_, bf16_;
  bool amx_ = false;  // the bf16 panels run on the AMX body (gemm::cpuHasAmxBf16, amxFits)
  bool logSoftmax_ = false;  // tfm.matmul {log_softmax}
  CpuDevice *ctx_ = nullptr;
  bool transposeB_ = false;
  Activation act_ = Activation::None;
  bool hasResidual_ = false;
  dnnl::matmul prim_;
  memory::desc scratchpad_;  // prim_'s (user-managed)
  // Weights derived on demand (packed copies), re-derived per weights version under
  // derivedMutex_: the first calls of a version may come from several sessions at once, and
  // every later call only reads them.
  mutable std::mutex derivedMutex_;
  // Packed weights and where/when they were packed from (repacks_ only).
  bool repacks_ = false;
  mutable memory packedW_, plainW_;
  dnnl::reorder repack_;
  memory::desc repackScratchpadMd_;
  Tensor repackScratchpad_;  // used under derivedMutex_
  mutable uint64_t packedVersion_ = ~uint64_t(0);
  mutable const void *packedFrom_ = nullptr;
  // The few-rows paths' packed copies, made from the plain weight (same rules as packedW_): f32
  // panels or bf16 pairs (a kernel uses one of the two, so they share the version fields).
  bool fewRows_ = false, fewRowsBf16_ = false;
  bool avx512Panels_ = false;  // else the AVX2 body (same bits)
  // Inference entries: every row count on the panels (packed by prepareWeights), no oneDNN
  // primitive; training entries: the panels up to kFewRowsMax rows.
  bool panelsOnly_ = false;
  int64_t weightK_ = 0, weightN_ = 0;
  mutable Tensor panels_, panelsBf16_;
  mutable uint64_t panelsVersion_ = ~uint64_t(0);
  mutable const void *panelsFrom_ = nullptr;
  // The bf16 primitive for more rows than the panel paths take (AVX512-BF16 CPUs only), reading
  // the Model's shared bf16 copy of the weight.
  bool manyRowsBf16_ = false;
  dnnl::matmul primBf16_;
  memory::desc scratchpadBf16_;
};

template <bool Linear, bool Packed, bool Bf16 = false>
std::unique_ptr<Kernel> makeGemm() {
  return std::make_unique<DnnlGemmKernel>(Linear, Packed, Bf16);
}

KernelKey key(const char *op, Layout layout) { return {op, DType::F32, layout, KernelBackend::Dnnl}; }

}  // namespace

std::unique_ptr<Kernel> makePackedGemmF32(bool linear) { return std::make_unique<DnnlGemmKernel>(linear, true); }

void registerDnnlMatmul(KernelRegistry &r) {
  r.add(key("tfm.matmul", Layout::Plain), makeGemm<false, false>);
  r.add(key("tfm.matmul", Layout::Packed), makeGemm<false, true>);
  r.add(key("tfm.linear", Layout::Plain), makeGemm<true, false>);
  r.add(key("tfm.linear", Layout::Packed), makeGemm<true, true>);
  // bf16 panels on AVX512-BF16 CPUs (training's products over 256 rows: oneDNN's bf16 gemm);
  // other CPUs run the f32 paths.
  r.add(key("tfm.matmul", Layout::PackedBf16), makeGemm<false, true, true>);
  r.add(key("tfm.linear", Layout::PackedBf16), makeGemm<true, true, true>);
}

}  // namespace tfmrt
