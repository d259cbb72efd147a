// tfm-merge-projections: projections of one input within one attention site -> one GEMM.
//
// Matches `bias_add(matmul(x, W_i^T), b_i)` for i over the site's Q/K/V (or cross-attention
// K/V) projections that read the same x, and rewrites them to
//   %w = concat(W_1..W_n); %b = concat(b_1..b_n)
//   %y = bias_add(matmul(x, %w^T), %b);  %y_i = slice_last(%y, offset_i, size_i)
// Grouping is per site (the importer's location name) so offsets stay within one attention.
#include "llvm/ADT/MapVector.h"
#include "mlir/IR/Builders.h"

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "tfm/TfmDialect.h"

using namespace mlir;

namespace tfmc {
#define GEN_PASS_DEF_MERGEPROJECTIONS
#include "passes/Passes.h.inc"

namespace {

struct Projection {
  tfm::MatmulOp matmul;
  tfm::BiasAddOp biasAdd;
};

// A linear projection: a transpose_b matmul against a weight, whose only use is a bias add of a
// weight bias.
std::optional<Projection> matchProjection(tfm::MatmulOp matmul) {
  if (!matmul.getTransposeB() || matmul.getLogSoftmax() || !isWeight(matmul.getRhs()) || !matmul->hasOneUse())
    return std::nullopt;
  auto biasAdd = dyn_cast<tfm::BiasAddOp>(*matmul->getUsers().begin());
  if (!biasAdd || !isWeight(biasAdd.getBias())) return std::nullopt;
  return Projection{matmul, biasAdd};
}

struct MergeProjectionsPass : impl::MergeProjectionsBase<MergeProjectionsPass> {
  using MergeProjectionsBase::MergeProjectionsBase;

  void runOnOperation() override {
    // (input value, site) -> projections in program order.
    llvm::MapVector<std::pair<Value, Attribute>, SmallVector<Projection>> groups;
    tfm::MatmulOp unnamed;  // a candidate without a name location
    bool anyNamed = false;
    getOperation().walk([&](tfm::MatmulOp matmul) {
      auto site = dyn_cast<NameLoc>(matmul.getLoc());
      anyNamed |= bool(site);
      if (!site) {
        if (!unnamed && matchProjection(matmul)) unnamed = matmul;
        return;
      }
      if (!site.getName().getValue().ends_with("attn")) return;  // attention only
      if (auto p = matchProjection(matmul))
        groups[{matmul.getLhs(), site.getName()}].push_back(*p);
    });
    // IR printed without locations (tfm-opt's default: --mlir-print-debuginfo keeps them) has no
    // sites: nothing merged, and it said nothing.
    if (unnamed && !anyNamed)
      unnamed->emitWarning() << "tfm-merge-projections: no tfm.matmul carries a name location, and attention "
                                "sites are found by name: nothing merged (print the IR with --mlir-print-debuginfo; "
                                "tfm-opt drops locations without it)";
    for (auto &[key, projections] : groups) {
      if (projections.size() < 2) {
        std::string weight = "the projection";
        if (auto param = projections.front().matmul.getRhs().getDefiningOp<tfm::ParamOp>())
          weight = param.getName().str();
        reportSite(report, projections.front().matmul, "merge-projections",
                   "not merged: no other projection in this site reads the input of " + weight);
        continue;
      }
      merge(projections);
    }
  }

  void merge(MutableArrayRef<Projection> projections) {
    Projection first = projections.front();
    Projection last = projections.back();
    OpBuilder b(last.biasAdd);
    b.setInsertionPointAfter(last.biasAdd);
    Location loc = first.matmul.getLoc();

    SmallVector<Value> weights, biases;
    int64_t total = 0;
    for (Projection &p : projections) {
      weights.push_back(p.matmul.getRhs());
      biases.push_back(p.biasAdd.getBias());
      total += cast<RankedTensorType>(p.matmul.getRhs().getType()).getDimSize(0);
    }
    auto weightType = cast<RankedTensorType>(weights.front().getType());
    auto f32 = weightType.getElementType();
    Value weight = b.create<tfm::ConcatOp>(
        loc, RankedTensorType::get({total, weightType.getDimSize(1)}, f32), weights);
    Value bias = b.create<tfm::ConcatOp>(loc, biases);

    auto outType = cast<RankedTensorType>(first.biasAdd.getType());
    SmallVector<int64_t> shape(outType.getShape());
    shape.back() = total;
    auto mergedType = RankedTensorType::get(shape, f32);
    // The merged GEMM must come after every original input definition; inserting after the last
    // projection guarantees that, and the slices replace the originals' uses below.
    Value merged = b.create<tfm::MatmulOp>(loc, first.matmul.getLhs(), weight,
                                           b.getBoolAttr(true));
    merged = b.create<tfm::BiasAddOp>(loc, merged, bias);

    int64_t offset = 0;
    for (Projection &p : projections) {
      auto type = cast<RankedTensorType>(p.biasAdd.getType());
      int64_t size = type.getShape().back();
      Value slice = b.create<tfm::SliceLastOp>(p.biasAdd.getLoc(), type, merged, offset, size);
      p.biasAdd.getResult().replaceAllUsesWith(slice);
      offset += size;
    }
    // Uses of the earlier projections may precede the merged op; move those users after it.
    for (Projection &p : projections) {
      p.biasAdd.erase();
      p.matmul.erase();
    }
    sinkUsersBelow(merged.getDefiningOp());
    reportSite(report, merged.getDefiningOp(), "merge-projections",
               "merged " + std::to_string(projections.size()) + " projections into one GEMM [" +
                   std::to_string(total) + " x " + std::to_string(weightType.getDimSize(1)) + "]");
  }

  // After merging, ops that consumed an early projection (e.g. split_heads of Q) sit before the
  // merged GEMM. Only the slices' users and ops moved because of them can violate dominance, so
  // move exactly those to just after their latest operand.
  void sinkUsersBelow(Operation *anchor) {
    Block *block = anchor->getBlock();
    SmallVector<Operation *> worklist;
    for (Operation *slice : anchor->getUsers())
      for (Operation *user : slice->getUsers()) worklist.push_back(user);
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      Operation *latest = nullptr;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (def->getBlock() == block && (!latest || latest->isBeforeInBlock(def))) latest = def;
      if (latest && op->isBeforeInBlock(latest)) {
        op->moveAfter(latest);
        for (Operation *user : op->getUsers()) worklist.push_back(user);
      }
    }
  }
};

}  // namespace
}  // namespace tfmc
