// tfm-fuse-attention: the primitive attention chain -> one tfm.fused_attention.
//
//   q = split_heads(Q); k = split_heads(K); v = split_heads(V)
//   p = softmax(mask(scale(batch_matmul(q, k^T)), keep)); p = dropout(p)?
//   out = merge_heads(batch_matmul(p, v))
// becomes fused_attention(Q', K', V', keep) where Q' is Q, or the merged projection Q came from
// via slice_last (its column offset becomes q_offset) -- so no head transposes or slices remain.
#include "llvm/ADT/SmallPtrSet.h"
#include "mlir/IR/Builders.h"

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "tfm/TfmDialect.h"

using namespace mlir;

namespace tfmc {
#define GEN_PASS_DEF_FUSEATTENTION
#include "passes/Passes.h.inc"

namespace {

// The [B, S, W] tensor and column offset a split_heads input is read from.
struct ColumnSource {
  Value tensor;
  int64_t offset = 0;
};

ColumnSource columnSource(Value splitInput) {
  if (auto slice = splitInput.getDefiningOp<tfm::SliceLastOp>())
    return {slice.getInput(), static_cast<int64_t>(slice.getOffset())};
  return {splitInput, 0};
}

// The activation a projected value was computed from (through slices, bias adds and GEMMs):
// rows of Q and K index the same positions exactly when their sequences are the same value.
Value sequenceOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<tfm::SliceLastOp, tfm::BiasAddOp, tfm::MatmulOp, tfm::LinearOp>(def)) break;
    v = def->getOperand(0);
  }
  return v;
}

// Everything the rewrite needs, or the reason the site does not match.
struct AttentionMatch {
  tfm::SplitHeadsOp q, k, v;
  tfm::BatchMatmulOp scores;
  tfm::ScaleOp scale;
  tfm::MaskOp mask;
  tfm::SoftmaxOp softmax;
  tfm::DropoutOp dropout;  // may be null
  tfm::BatchMatmulOp context;
  tfm::MergeHeadsOp merge;
  std::string failure;
};

AttentionMatch matchAttention(tfm::SoftmaxOp softmax) {
  AttentionMatch m;
  m.softmax = softmax;
  auto fail = [&](const char *why) {
    m.failure = why;
    return m;
  };
  m.mask = softmax.getInput().getDefiningOp<tfm::MaskOp>();
  if (!m.mask) return fail("softmax input is not a tfm.mask");
  m.scale = m.mask.getScores().getDefiningOp<tfm::ScaleOp>();
  if (!m.scale) return fail("masked scores are not a tfm.scale of Q*K^T");
  m.scores = m.scale.getInput().getDefiningOp<tfm::BatchMatmulOp>();
  if (!m.scores || !m.scores.getTransposeB()) return fail("scores are not Q*K^T (batch_matmul)");
  m.q = m.scores.getLhs().getDefiningOp<tfm::SplitHeadsOp>();
  m.k = m.scores.getRhs().getDefiningOp<tfm::SplitHeadsOp>();
  if (!m.q || !m.k) return fail("Q or K is not produced by split_heads");
  for (Operation *op : {m.scores.getOperation(), m.scale.getOperation(), m.mask.getOperation()})
    if (!op->hasOneUse()) return fail("the attention scores are used elsewhere");
  if (!softmax->hasOneUse()) return fail("the attention probabilities are used elsewhere");
  Operation *user = *softmax->getUsers().begin();
  if ((m.dropout = dyn_cast<tfm::DropoutOp>(user))) {
    // A training dropout draws masks; tfm.fused_attention's dropout_rate is inference's identity.
    if (m.dropout.getStep()) return fail("training dropout on the attention probabilities");
    if (!m.dropout->hasOneUse()) return fail("the attention probabilities are used elsewhere");
    user = *m.dropout->getUsers().begin();
  }
  Value probs = m.dropout ? m.dropout.getResult() : softmax.getResult();
  m.context = dyn_cast<tfm::BatchMatmulOp>(user);
  if (!m.context || m.context.getTransposeB() || m.context.getLhs() != probs)
    return fail("the probabilities are not multiplied by V");
  m.v = m.context.getRhs().getDefiningOp<tfm::SplitHeadsOp>();
  if (!m.v) return fail("V is not produced by split_heads");
  if (!m.context->hasOneUse()) return fail("the per-head context is used elsewhere");
  m.merge = dyn_cast<tfm::MergeHeadsOp>(*m.context->getUsers().begin());
  if (!m.merge) return fail("the per-head context is not merged by merge_heads");
  // tfm.mask's causal rule (key j > query i) and the fused op's (j > i + Sk - Sq) agree only
  // when queries and keys are the same sequence.
  if (m.mask.getCausal() && sequenceOf(m.q.getInput()) != sequenceOf(m.k.getInput()))
    return fail("causal mask over queries and keys from different sequences");
  if (m.q.getHeads() != m.k.getHeads() || m.q.getHeads() != m.v.getHeads())
    return fail("Q, K and V are split into different head counts");
  auto headDim = [](tfm::SplitHeadsOp op) {
    return cast<RankedTensorType>(op.getType()).getDimSize(3);
  };
  if (headDim(m.q) != headDim(m.k) || headDim(m.q) != headDim(m.v))
    return fail("Q, K and V have different head sizes");
  return m;
}

struct FuseAttentionPass : impl::FuseAttentionBase<FuseAttentionPass> {
  using FuseAttentionBase::FuseAttentionBase;

  void runOnOperation() override {
    SmallVector<tfm::SoftmaxOp> candidates;
    getOperation().walk([&](tfm::SoftmaxOp op) { candidates.push_back(op); });
    for (tfm::SoftmaxOp softmax : candidates) {
      AttentionMatch m = matchAttention(softmax);
      if (!m.failure.empty()) {
        reportSite(report, softmax, "fuse-attention", "not fused: " + m.failure);
        continue;
      }
      rewrite(m);
    }
    foldDecodeSlices();
  }

  // decode_step's self-attention reads Q, K and V of the newest position from one merged
  // projection through slices: the attention takes Q's columns at q_offset and each cache write
  // its key or value at update_offset instead, so the slices (a copy each) disappear.
  void foldDecodeSlices() {
    SmallVector<Operation *> sites;
    getOperation().walk([&](Operation *op) {
      if (isa<tfm::CachedAttentionOp, tfm::CacheWriteOp>(op)) sites.push_back(op);
    });
    for (Operation *op : sites) {
      const unsigned operand = isa<tfm::CachedAttentionOp>(op) ? 0 : 1;
      auto slice = op->getOperand(operand).getDefiningOp<tfm::SliceLastOp>();
      if (!slice) continue;
      const char *attr = operand == 0 ? "q_offset" : "update_offset";
      auto current = op->getAttrOfType<IntegerAttr>(attr);
      const int64_t offset = (current ? current.getInt() : 0) + int64_t(slice.getOffset());
      op->setOperand(operand, slice.getInput());
      op->setAttr(attr, Builder(op).getI64IntegerAttr(offset));
      reportSite(report, op, "fuse-attention",
                 std::string(operand == 0 ? "query" : "cache update") + " read in place from the merged projection");
      eraseIfDead(slice);
    }
  }

  void rewrite(AttentionMatch &m) {
    ColumnSource q = columnSource(m.q.getInput());
    ColumnSource k = columnSource(m.k.getInput());
    ColumnSource v = columnSource(m.v.getInput());
    const int64_t heads = m.q.getHeads();
    const int64_t headDim = cast<RankedTensorType>(m.q.getType()).getDimSize(3);
    const bool causal = m.mask.getCausal();
    const double dropout = m.dropout ? m.dropout.getRate().convertToDouble() : 0.0;

    OpBuilder b(m.merge);
    auto fused = b.create<tfm::FusedAttentionOp>(
        m.merge.getLoc(), m.merge.getType(), q.tensor, k.tensor, v.tensor, m.mask.getKeyKeep(),
        b.getI64IntegerAttr(heads), b.getI64IntegerAttr(headDim), b.getI64IntegerAttr(q.offset),
        b.getI64IntegerAttr(k.offset), b.getI64IntegerAttr(v.offset), m.scale.getFactorAttr(),
        b.getBoolAttr(causal), b.getF64FloatAttr(dropout), b.getStringAttr("f32"));
    m.merge.getResult().replaceAllUsesWith(fused.getResult());

    // Erase the chain back to front; split_heads / slice_last die if nothing else reads them.
    SmallVector<Operation *> chain = {m.merge, m.context};
    if (m.dropout) chain.push_back(m.dropout);
    chain.append({m.softmax, m.mask, m.scale, m.scores});
    for (Operation *op : chain) op->erase();
    llvm::SmallPtrSet<Operation *, 3> splits = {m.v, m.k, m.q};
    for (Operation *split : splits) eraseIfDead(split);

    // The kind follows the sequences (not the tensors: without merged projections Q and K of a
    // self-attention are different tensors of one sequence).
    const bool self = sequenceOf(q.tensor) == sequenceOf(k.tensor);
    std::string kind = self ? (causal ? "causal self-attention" : "self-attention, padding mask")
                            : "cross-attention, memory mask";
    std::string reads = q.tensor == k.tensor && k.tensor == v.tensor
                            ? "; Q, K, V read in place from one merged projection"
                            : (k.tensor == v.tensor && q.tensor != k.tensor
                                   ? "; K, V read in place from one merged projection"
                                   : "");
    reportSite(report, fused, "fuse-attention", "fused (" + kind + ")" + reads);
  }

  static void eraseIfDead(Operation *op) {
    if (!op || !op->use_empty()) return;
    Value input = op->getOperand(0);
    op->erase();
    if (auto slice = input.getDefiningOp<tfm::SliceLastOp>()) eraseIfDead(slice);
  }
};

}  // namespace
}  // namespace tfmc
