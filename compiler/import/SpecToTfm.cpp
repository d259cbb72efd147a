// Spec -> tfm IR. The graph is written with primitive ops only (see dialects/tfm/README.md), so
// that the unfused program is a real program and fusion passes are real rewrites.
#include "import/SpecToTfm.h"

#include <cmath>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include "tfm/TfmDialect.h"

using namespace mlir;

namespace tfmc {
namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

class GraphBuilder {
public:
  GraphBuilder(const ModelSpec &spec, MLIRContext &ctx)
      : spec_(spec), m_(spec.model), b_(&ctx), f32_(b_.getF32Type()) {
    specLoc_ = FileLineColLoc::get(&ctx, spec.path.empty() ? spec.name : spec.path,
                                   m_.loc.line, m_.loc.col);
    loc_ = specLoc_;
  }

  OwningOpRef<ModuleOp> build(const ImportOptions &options) {
    OwningOpRef<ModuleOp> module = ModuleOp::create(specLoc_);
    module->getOperation()->setAttr("tfm.model_name", b_.getStringAttr(spec_.name));
    b_.setInsertionPointToEnd(module->getBody());
    buildEntry("forward", Entry::Forward);
    if (options.gradients) buildEntry("gradients", Entry::Gradients);
    if (options.trainStep) buildEntry("train_step", Entry::TrainStep);
    if (options.accumulate) buildEntry("accumulate_gradients", Entry::Accumulate);
    alignment_ = options.alignment;
    alignmentLayer_ = options.alignmentLayer < 0 ? m_.decoder_layers - 1 : options.alignmentLayer;
    if (options.translate) buildTranslationEntries();
    return module;
  }

private:
  // --- types -------------------------------------------------------------------------------
  RankedTensorType f32Type(ArrayRef<int64_t> shape) { return RankedTensorType::get(shape, f32_); }
  RankedTensorType idsType() { return RankedTensorType::get({kDyn, kDyn}, b_.getI32Type()); }
  RankedTensorType hiddenType() { return f32Type({kDyn, kDyn, m_.d_model}); }

  // --- scoped locations: every op built under a scope is tagged with the weights' prefix ----
  // The spec key an op's site comes from, so diagnostics and the fusion report point at the
  // line a user would edit: attention -> heads, FFN -> d_ff, layers -> *_layers.
  Location keyLoc(const std::string &scope) {
    auto endsWith = [&](const char *suffix) {
      std::string s(suffix);
      return scope.size() >= s.size() && scope.compare(scope.size() - s.size(), s.size(), s) == 0;
    };
    std::string key = "model";
    if (endsWith("attn")) key = "model.heads";
    else if (endsWith("ffn")) key = "model.d_ff";
    else if (scope.rfind("encoder", 0) == 0) key = "model.encoder_layers";
    else if (scope.rfind("decoder", 0) == 0) key = "model.decoder_layers";
    else if (scope == "output_projection") key = "model.tie_output_projection";
    SpecLoc loc = spec_.locOf(key);
    return FileLineColLoc::get(b_.getContext(), loc.file.empty() ? spec_.path : loc.file,
                               loc.line, loc.col);
  }

  struct Scope {
    Scope(GraphBuilder &g, const std::string &name) : g(g), saved(g.loc_), savedName(g.scope_) {
      g.scope_ = name;
      g.loc_ = NameLoc::get(g.b_.getStringAttr(name), g.keyLoc(name));
    }
    ~Scope() { g.loc_ = saved; g.scope_ = savedName; }
    GraphBuilder &g;
    Location saved;
    std::string savedName;
  };

  Value param(const std::string &name, ArrayRef<int64_t> shape) {
    return b_.create<tfm::ParamOp>(loc_, f32Type(shape), name);
  }
  Value scoped(const std::string &suffix, ArrayRef<int64_t> shape) {
    return param(scope_ + "." + suffix, shape);
  }

  Value linear(Value x, const std::string &name, int64_t in, int64_t out) {
    Value w = scoped(name + ".weight", {out, in});
    Value bias = scoped(name + ".bias", {out});
    Value y = b_.create<tfm::MatmulOp>(loc_, x, w, b_.getBoolAttr(true));
    return b_.create<tfm::BiasAddOp>(loc_, y, bias);
  }

  Value layerNorm(Value x, const std::string &name) {
    Value gamma = scoped(name + ".weight", {m_.d_model});
    Value beta = scoped(name + ".bias", {m_.d_model});
    return b_.create<tfm::LayerNormOp>(loc_, x, gamma, beta,
                                        b_.getF64FloatAttr(m_.layer_norm_eps));
  }

  // Inference entries: a step-less dropout (the identity; removed by a pass). Training entries:
  // the counter-based dropout keyed by (training seed, site, step); rate 0 builds nothing.
  Value dropout(Value x, double rate, const std::string &site) {
    if (rate <= 0.0) return x;
    return b_.create<tfm::DropoutOp>(loc_, x, trainStep_, b_.getF64FloatAttr(rate),
                                     b_.getI64IntegerAttr(trainStep_ ? spec_.training.seed : 0),
                                     b_.getStringAttr(trainStep_ ? site : ""));
  }

  // Multi-head attention from primitive ops: Q K^T -> scale -> mask -> softmax -> dropout -> * V.
  Value attention(Value query, Value keyValue, Value keyKeep, bool causal,
                  const std::string &name) {
    Scope scope(*this, scope_ + "." + name);
    const int64_t d = m_.d_model, h = m_.heads, dk = spec_.headDim();
    auto heads = [&](Value x) {
      return b_.create<tfm::SplitHeadsOp>(loc_, x,
                                           b_.getI64IntegerAttr(h));
    };
    Value q = heads(linear(query, "q_proj", d, d));
    Value k = heads(linear(keyValue, "k_proj", d, d));
    Value v = heads(linear(keyValue, "v_proj", d, d));
    Value scores = b_.create<tfm::BatchMatmulOp>(loc_, q, k, b_.getBoolAttr(true));
    scores = b_.create<tfm::ScaleOp>(loc_, scores,
                                     b_.getF64FloatAttr(1.0 / std::sqrt(double(dk))));
    scores = b_.create<tfm::MaskOp>(loc_, scores, keyKeep, b_.getBoolAttr(causal));
    Value probs = b_.create<tfm::SoftmaxOp>(loc_, scores);
    probs = dropout(probs, m_.attention_dropout, scope_ + ".probs");
    Value ctx = b_.create<tfm::BatchMatmulOp>(loc_, probs, v,
                                              b_.getBoolAttr(false));
    Value merged = b_.create<tfm::MergeHeadsOp>(loc_, ctx);
    return linear(merged, "out_proj", d, d);
  }

  Value feedForward(Value x) {
    Scope scope(*this, scope_ + ".ffn");
    Value hidden = linear(x, "fc1", m_.d_model, m_.d_ff);
    if (m_.activation == Activation::ReLU)
      hidden = b_.create<tfm::ReluOp>(loc_, hidden);
    else
      hidden = b_.create<tfm::GeluOp>(loc_, hidden);
    hidden = dropout(hidden, m_.activation_dropout, scope_ + ".activation");
    return linear(hidden, "fc2", m_.d_ff, m_.d_model);
  }

  // One residual block: post-norm LN(x + drop(f(x))) or pre-norm x + drop(f(LN(x))).
  // `site` names the sublayer ("self_attn", "cross_attn", "ffn") for the dropout site.
  template <typename Fn>
  Value residualBlock(Value x, const std::string &normName, const std::string &site, Fn &&sublayer) {
    const std::string dropSite = scope_ + "." + site + ".residual";
    if (m_.norm == NormPlacement::Post) {
      Value y = dropout(sublayer(x), m_.dropout, dropSite);
      return layerNorm(b_.create<tfm::AddOp>(loc_, x, y), normName);
    }
    Value y = dropout(sublayer(layerNorm(x, normName)), m_.dropout, dropSite);
    return b_.create<tfm::AddOp>(loc_, x, y);
  }

  Value embed(Value ids, const std::string &tableName, int64_t vocab, Value sinusoidTable,
              const std::string &positionsName) {
    Value table = param(tableName, {vocab, m_.d_model});
    Value x = b_.create<tfm::EmbeddingOp>(loc_, table, ids);
    x = b_.create<tfm::ScaleOp>(loc_, x,
                                b_.getF64FloatAttr(std::sqrt(double(m_.d_model))));
    Value positions = sinusoidTable ? sinusoidTable
                                    : param(positionsName, {m_.max_len, m_.d_model});
    x = b_.create<tfm::AddPositionsOp>(loc_, x, positions);
    return dropout(x, m_.dropout, scope_ + ".embed");
  }

  std::string srcTableName() const {
    return m_.tie_src_tgt_embeddings ? "shared_embedding.weight" : "encoder.embed_tokens.weight";
  }
  std::string tgtTableName() const {
    return m_.tie_src_tgt_embeddings ? "shared_embedding.weight" : "decoder.embed_tokens.weight";
  }

  Value keepMask(Value ids) {
    return b_.create<tfm::PaddingMaskOp>(loc_, ids, b_.getI64IntegerAttr(m_.pad_id));
  }

  // The sinusoidal table (one op per function), or null for learned positions.
  Value sinusoid() {
    if (m_.positions != PositionKind::Sinusoidal) return Value();
    if (!sinusoid_ || sinusoid_.getParentBlock() != b_.getInsertionBlock())
      sinusoid_ = b_.create<tfm::PositionTableOp>(loc_, f32Type({m_.max_len, m_.d_model}), m_.max_len, m_.d_model);
    return sinusoid_;
  }

  Value encoder(Value src, Value srcKeep) {
    Scope scope(*this, "encoder");
    Value x = embed(src, srcTableName(), m_.src_vocab_size, sinusoid(), "encoder.embed_positions.weight");
    for (int64_t i = 0; i < m_.encoder_layers; ++i) {
      Scope layer(*this, "encoder.layers." + std::to_string(i));
      x = residualBlock(x, "self_attn_norm", "self_attn",
                        [&](Value in) { return attention(in, in, srcKeep, false, "self_attn"); });
      x = residualBlock(x, "ffn_norm", "ffn", [&](Value in) { return feedForward(in); });
    }
    if (m_.norm == NormPlacement::Pre) x = layerNorm(x, "final_norm");
    return x;
  }

  Value decoder(Value tgtIn, Value tgtKeep, Value memory, Value srcKeep) {
    Scope scope(*this, "decoder");
    Value y = embed(tgtIn, tgtTableName(), m_.tgt_vocab_size, sinusoid(), "decoder.embed_positions.weight");
    for (int64_t i = 0; i < m_.decoder_layers; ++i) {
      Scope layer(*this, "decoder.layers." + std::to_string(i));
      y = residualBlock(y, "self_attn_norm", "self_attn",
                        [&](Value in) { return attention(in, in, tgtKeep, true, "self_attn"); });
      y = residualBlock(y, "cross_attn_norm", "cross_attn",
                        [&](Value in) { return attention(in, memory, srcKeep, false, "cross_attn"); });
      y = residualBlock(y, "ffn_norm", "ffn", [&](Value in) { return feedForward(in); });
    }
    if (m_.norm == NormPlacement::Pre) y = layerNorm(y, "final_norm");
    return y;
  }

  // Logits over the target vocabulary (no bias; the tied table when configured).
  Value outputProjection(Value y, bool lastPositionOnly = false) {
    Scope scope(*this, "output_projection");
    if (lastPositionOnly) y = b_.create<tfm::LastPositionOp>(loc_, y);
    std::string outName = m_.tie_output_projection ? tgtTableName() : std::string("output_projection.weight");
    Value wOut = param(outName, {m_.tgt_vocab_size, m_.d_model});
    return b_.create<tfm::MatmulOp>(loc_, y, wOut, b_.getBoolAttr(true));
  }

  // Translation entries (inference-mode):
  //   encode(src [N, S]) -> memory [N, S, D], then per decoder layer l its cross-attention
  //     cross_k.l, cross_v.l [N, S, D]: computed once per sentence.
  //   decode_step(tokens [R, 1], step [R], parents [R], rows [R], src [N, S], cross_k.0,
  //     cross_v.0, ...) -> log_probs [R, 1, V] (and, with ImportOptions::alignment, alignment
  //     [R, 1, S]: the last layer's cross-attention weights): one new token per hypothesis, row r at position
  //     step[r] (rows differ when sentences enter the batch as others finish: continuous
  //     batching). Row r continues row parents[r] of the previous step (the caches are reordered
  //     in place first) and belongs to sentence rows[r] of the encoded batch (its slot). The
  //     self-attention K/V of positions < step[r] live in session state (one cache per layer),
  //     written in place.
  //   decode(src, memory, tgt_in [R, T]) -> logits [R, 1, V] of the last position: the decoder
  //     recomputed over the whole prefix, kept as the reference path for the cache.
  void buildTranslationEntries() {
    trainStep_ = Value();  // inference entries: dropout is the identity
    const int64_t d = m_.d_model, L = m_.decoder_layers;
    auto memoryType = hiddenType();
    {
      SmallVector<Type> results{memoryType};
      for (int64_t l = 0; l < 2 * L; ++l) results.push_back(memoryType);
      auto fn = b_.create<func::FuncOp>(specLoc_, "encode", b_.getFunctionType({idsType()}, results));
      fn->setAttr("tfm.mode", b_.getStringAttr("inference"));
      fn.setArgAttr(0, "tfm.name", b_.getStringAttr("src"));
      fn.setResultAttr(0, "tfm.name", b_.getStringAttr("memory"));
      for (int64_t l = 0; l < L; ++l) {
        fn.setResultAttr(unsigned(1 + 2 * l), "tfm.name", b_.getStringAttr("cross_k." + std::to_string(l)));
        fn.setResultAttr(unsigned(2 + 2 * l), "tfm.name", b_.getStringAttr("cross_v." + std::to_string(l)));
      }
      Block *entry = fn.addEntryBlock();
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(entry);
      Value src = entry->getArgument(0);
      SmallVector<Value> outs{encoder(src, keepMask(src))};
      for (int64_t l = 0; l < L; ++l) {
        Scope scope(*this, "decoder.layers." + std::to_string(l) + ".cross_attn");
        outs.push_back(linear(outs[0], "k_proj", d, d));
        outs.push_back(linear(outs[0], "v_proj", d, d));
      }
      b_.create<func::ReturnOp>(loc_, outs);
    }
    buildDecodeStep();
    auto fn = b_.create<func::FuncOp>(
        specLoc_, "decode",
        b_.getFunctionType({idsType(), memoryType, idsType()}, {f32Type({kDyn, 1, m_.tgt_vocab_size})}));
    fn->setAttr("tfm.mode", b_.getStringAttr("inference"));
    fn.setArgAttr(0, "tfm.name", b_.getStringAttr("src"));
    fn.setArgAttr(1, "tfm.name", b_.getStringAttr("memory"));
    fn.setArgAttr(2, "tfm.name", b_.getStringAttr("tgt_in"));
    fn.setResultAttr(0, "tfm.name", b_.getStringAttr("logits"));
    Block *entry = fn.addEntryBlock();
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(entry);
    Value src = entry->getArgument(0), memory = entry->getArgument(1), tgtIn = entry->getArgument(2);
    Value y = decoder(tgtIn, keepMask(tgtIn), memory, keepMask(src));
    b_.create<func::ReturnOp>(loc_, ValueRange{outputProjection(y, /*lastPositionOnly=*/true)});
  }

  // Self-attention of the newest position: its K/V appended to this layer's caches (after the
  // beam reordering), then one query row per hypothesis over positions [0, step].
  Value cachedSelfAttention(Value x, Value step, Value parents) {
    Scope scope(*this, scope_ + ".self_attn");
    const int64_t d = m_.d_model;
    Value q = linear(x, "q_proj", d, d);
    Value k = linear(x, "k_proj", d, d);
    Value v = linear(x, "v_proj", d, d);
    auto cacheType = f32Type({kDyn, kDyn, d});
    auto cache = [&](const char *which, Value update) {
      Value c = b_.create<tfm::StateOp>(loc_, cacheType, scope_ + "." + which);
      c = b_.create<tfm::CacheReorderOp>(loc_, c, parents, step);
      return b_.create<tfm::CacheWriteOp>(loc_, c, update, step).getResult();
    };
    Value kc = cache("k_cache", k), vc = cache("v_cache", v);
    Value ctx = b_.create<tfm::CachedAttentionOp>(loc_, q, kc, vc, step,
                                                  b_.getI64IntegerAttr(m_.heads), b_.getI64IntegerAttr(spec_.headDim()),
                                                  b_.getI64IntegerAttr(0),
                                                  b_.getF64FloatAttr(1.0 / std::sqrt(double(spec_.headDim()))));
    return linear(ctx, "out_proj", d, d);
  }

  // Cross-attention of the newest position to its sentence's encoder K/V (from `encode`). With
  // `weights`, also its head-averaged attention weights (the alignment of the newest token).
  Value gatheredCrossAttention(Value x, Value crossK, Value crossV, Value srcKeep, Value rows, Value *weights = nullptr) {
    Scope scope(*this, scope_ + ".cross_attn");
    const int64_t d = m_.d_model;
    Value q = linear(x, "q_proj", d, d);
    if (weights)
      *weights = b_.create<tfm::AttentionWeightsOp>(loc_, q, crossK, srcKeep, rows, b_.getI64IntegerAttr(m_.heads),
                                                    b_.getI64IntegerAttr(spec_.headDim()), b_.getI64IntegerAttr(0),
                                                    b_.getI64IntegerAttr(0),
                                                    b_.getF64FloatAttr(1.0 / std::sqrt(double(spec_.headDim()))));
    Value ctx = b_.create<tfm::GatheredAttentionOp>(loc_, q, crossK, crossV, srcKeep, rows,
                                                    b_.getI64IntegerAttr(m_.heads), b_.getI64IntegerAttr(spec_.headDim()),
                                                    b_.getI64IntegerAttr(0), b_.getI64IntegerAttr(0),
                                                    b_.getI64IntegerAttr(0),
                                                    b_.getF64FloatAttr(1.0 / std::sqrt(double(spec_.headDim()))));
    return linear(ctx, "out_proj", d, d);
  }

  void buildDecodeStep() {
    const int64_t L = m_.decoder_layers;
    auto rowsType = RankedTensorType::get({kDyn}, b_.getI32Type());
    SmallVector<Type> args{idsType(), rowsType, rowsType, rowsType, idsType()};
    for (int64_t l = 0; l < 2 * L; ++l) args.push_back(hiddenType());
    SmallVector<Type> results{f32Type({kDyn, kDyn, m_.tgt_vocab_size})};
    if (alignment_) results.push_back(f32Type({kDyn, 1, kDyn}));
    auto fn = b_.create<func::FuncOp>(specLoc_, "decode_step", b_.getFunctionType(args, results));
    fn->setAttr("tfm.mode", b_.getStringAttr("inference"));
    const char *names[] = {"tokens", "step", "parents", "rows", "src"};
    for (unsigned i = 0; i < 5; ++i) fn.setArgAttr(i, "tfm.name", b_.getStringAttr(names[i]));
    for (int64_t l = 0; l < L; ++l) {
      fn.setArgAttr(unsigned(5 + 2 * l), "tfm.name", b_.getStringAttr("cross_k." + std::to_string(l)));
      fn.setArgAttr(unsigned(6 + 2 * l), "tfm.name", b_.getStringAttr("cross_v." + std::to_string(l)));
    }
    fn.setResultAttr(0, "tfm.name", b_.getStringAttr("log_probs"));
    if (alignment_) fn.setResultAttr(1, "tfm.name", b_.getStringAttr("alignment"));
    Block *entry = fn.addEntryBlock();
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(entry);
    Value tokens = entry->getArgument(0), step = entry->getArgument(1), parents = entry->getArgument(2),
          rows = entry->getArgument(3), src = entry->getArgument(4);
    Value srcKeep = keepMask(src);
    Scope scope(*this, "decoder");
    Value table = param(tgtTableName(), {m_.tgt_vocab_size, m_.d_model});
    Value y = b_.create<tfm::EmbeddingOp>(loc_, table, tokens);
    y = b_.create<tfm::ScaleOp>(loc_, y, b_.getF64FloatAttr(std::sqrt(double(m_.d_model))));
    Value positions = sinusoid();
    if (!positions) positions = param("decoder.embed_positions.weight", {m_.max_len, m_.d_model});
    y = b_.create<tfm::AddPositionAtOp>(loc_, y, positions, step);
    Value alignment;  // layer alignmentLayer_'s cross-attention weights, with alignment_
    for (int64_t i = 0; i < L; ++i) {
      Scope layer(*this, "decoder.layers." + std::to_string(i));
      Value crossK = entry->getArgument(unsigned(5 + 2 * i)), crossV = entry->getArgument(unsigned(6 + 2 * i));
      y = residualBlock(y, "self_attn_norm", "self_attn",
                        [&](Value in) { return cachedSelfAttention(in, step, parents); });
      Value *weights = alignment_ && i == alignmentLayer_ ? &alignment : nullptr;
      y = residualBlock(y, "cross_attn_norm", "cross_attn",
                        [&](Value in) { return gatheredCrossAttention(in, crossK, crossV, srcKeep, rows, weights); });
      y = residualBlock(y, "ffn_norm", "ffn", [&](Value in) { return feedForward(in); });
    }
    if (m_.norm == NormPlacement::Pre) y = layerNorm(y, "final_norm");
    Value logits = outputProjection(y);
    SmallVector<Value> outs{b_.create<tfm::LogSoftmaxOp>(loc_, logits)};
    if (alignment_) outs.push_back(alignment);
    b_.create<func::ReturnOp>(loc_, outs);
  }

  bool alignment_ = false;  // ImportOptions::alignment
  int64_t alignmentLayer_ = 0;  // its decoder layer (ImportOptions::alignmentLayer; -1 -> the last)

  enum class Entry { Forward, Gradients, TrainStep, Accumulate };

  // `forward`: (src, tgt_in, tgt_out) -> (logits, loss). `gradients`: the same graph returning
  // the loss only, marked for tfm-autodiff, which adds one gradient result per parameter.
  // `train_step`: (src, tgt_in, tgt_out, step) -> loss, marked for tfm-autodiff and then
  // tfm-apply-adam (the spec's training hyper-parameters), which update the weights in place.
  // `forward` and `gradients` are inference-mode (dropout is the identity), so `gradients` is the
  // exact gradient of `forward`'s loss; `train_step` is training-mode: counter-based dropout
  // keyed by (training.seed, site, step). `accumulate_gradients`: (src, tgt_in, tgt_out, step,
  // weight, reset) -> loss, training-mode like train_step (step keys the dropout masks), marked
  // for tfm-autodiff and tfm-accumulate-gradients (which also adds apply_update).
  void buildEntry(StringRef name, Entry kind) {
    const bool gradients = kind != Entry::Forward;
    auto logitsType = f32Type({kDyn, kDyn, m_.tgt_vocab_size});
    auto lossType = f32Type({});
    SmallVector<Type> results;
    if (!gradients) results.push_back(logitsType);
    results.push_back(lossType);
    const bool training = kind == Entry::TrainStep || kind == Entry::Accumulate;
    SmallVector<Type> args{idsType(), idsType(), idsType()};
    if (training) args.push_back(RankedTensorType::get({}, b_.getI32Type()));
    if (kind == Entry::Accumulate) {
      args.push_back(f32Type({}));
      args.push_back(RankedTensorType::get({}, b_.getI32Type()));
    }
    auto fnType = b_.getFunctionType(args, results);
    auto fn = b_.create<func::FuncOp>(specLoc_, name, fnType);
    fn->setAttr("tfm.mode", b_.getStringAttr(training ? "training" : "inference"));
    if (gradients) fn->setAttr("tfm.differentiate", b_.getUnitAttr());
    if (training) {
      const TrainingSection &t = spec_.training;
      SmallVector<NamedAttribute> hyper{
          b_.getNamedAttr("beta1", b_.getF64FloatAttr(t.adam_beta1)),
          b_.getNamedAttr("beta2", b_.getF64FloatAttr(t.adam_beta2)),
          b_.getNamedAttr("epsilon", b_.getF64FloatAttr(t.adam_eps)),
          b_.getNamedAttr("lr_scale", b_.getF64FloatAttr(t.lr_scale)),
          b_.getNamedAttr("d_model", b_.getI64IntegerAttr(m_.d_model)),
          b_.getNamedAttr("warmup_steps", b_.getI64IntegerAttr(t.warmup_steps)),
      };
      // Only when set: a spec without clipping imports as before.
      if (t.clip_norm > 0) hyper.push_back(b_.getNamedAttr("clip_norm", b_.getF64FloatAttr(t.clip_norm)));
      if (t.weight_decay > 0) hyper.push_back(b_.getNamedAttr("weight_decay", b_.getF64FloatAttr(t.weight_decay)));
      fn->setAttr(kind == Entry::TrainStep ? "tfm.adam" : "tfm.accumulate", b_.getDictionaryAttr(hyper));
      fn.setArgAttr(3, "tfm.name", b_.getStringAttr("step"));
      if (kind == Entry::Accumulate) {
        fn.setArgAttr(4, "tfm.name", b_.getStringAttr("weight"));
        fn.setArgAttr(5, "tfm.name", b_.getStringAttr("reset"));
      }
    }
    const char *argNames[] = {"src", "tgt_in", "tgt_out"};
    for (unsigned i = 0; i < 3; ++i)
      fn.setArgAttr(i, "tfm.name", b_.getStringAttr(argNames[i]));
    if (!gradients) fn.setResultAttr(0, "tfm.name", b_.getStringAttr("logits"));
    fn.setResultAttr(gradients ? 0 : 1, "tfm.name", b_.getStringAttr("loss"));
    Block *entry = fn.addEntryBlock();
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(entry);
    trainStep_ = training ? entry->getArgument(3) : Value();
    Value src = entry->getArgument(0), tgtIn = entry->getArgument(1),
          tgtOut = entry->getArgument(2);

    Value srcKeep = keepMask(src), tgtKeep = keepMask(tgtIn);
    Value memory = encoder(src, srcKeep);
    Value y = decoder(tgtIn, tgtKeep, memory, srcKeep);

    // Output projection (no bias) and loss.
    Value logits = outputProjection(y);
    Scope scope(*this, "output_projection");
    Value loss = b_.create<tfm::LabelSmoothedXentOp>(loc_, logits, tgtOut,
                                                     b_.getF64FloatAttr(spec_.training.label_smoothing),
                                                     b_.getI64IntegerAttr(m_.pad_id));
    if (gradients) b_.create<func::ReturnOp>(loc_, ValueRange{loss});
    else b_.create<func::ReturnOp>(loc_, ValueRange{logits, loss});
  }

  const ModelSpec &spec_;
  const ModelSection &m_;
  OpBuilder b_;
  Type f32_;
  Location specLoc_ = UnknownLoc::get(b_.getContext());
  Location loc_ = UnknownLoc::get(b_.getContext());
  std::string scope_;
  Value trainStep_;  // the step argument while building a training entry (dropout masks)
  Value sinusoid_;   // the position table of the function being built
};

}  // namespace

OwningOpRef<ModuleOp> importModelSpec(const ModelSpec &spec, MLIRContext &ctx, const ImportOptions &options) {
  ctx.loadDialect<tfm::TfmDialect, func::FuncDialect>();
  return GraphBuilder(spec, ctx).build(options);
}

}  // namespace tfmc
