// tfm-lower-kv-precision: decoding's keys and values in bf16. The K/V caches (tfm.state values
// that only cache ops and tfm.cached_attention read) and the cross-attention K/V that a function
// takes only as tfm.gathered_attention keys or values become bf16 tensors; every function that
// returns a value of the same name (`encode`'s cross_k.l / cross_v.l for `decode_step`'s
// arguments) rounds it with tfm.to_bf16. The attention kernels widen them back to f32 as they
// load them: half the bytes in the memory-bound part of a decoder step, f32 arithmetic.
#include "llvm/ADT/StringSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "tfm/TfmDialect.h"

namespace tfmc {
#define GEN_PASS_DEF_LOWERKVPRECISION
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

RankedTensorType asBf16(Type t) {
  auto ranked = cast<RankedTensorType>(t);
  return RankedTensorType::get(ranked.getShape(), BFloat16Type::get(t.getContext()));
}

bool isF32Tensor(Type t) {
  auto ranked = dyn_cast<RankedTensorType>(t);
  return ranked && ranked.getElementType().isF32();
}

// True if every use of `v` reads it as a cache: the cache operand of tfm.cache_reorder /
// tfm.cache_write (whose results must be caches in turn) or tfm.cached_attention's k_cache /
// v_cache. A state returned or read by any other op stays f32.
bool onlyCacheUses(Value v) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<tfm::CacheReorderOp, tfm::CacheWriteOp>(user)) {
      if (use.getOperandNumber() != 0 || !onlyCacheUses(user->getResult(0))) return false;
    } else if (!isa<tfm::CachedAttentionOp>(user) || use.getOperandNumber() == 0 || use.getOperandNumber() > 2) {
      return false;
    }
  }
  return true;
}

// Retypes `v` and the results of the cache ops that update it in place, transitively.
void retypeCacheChain(Value v) {
  v.setType(asBf16(v.getType()));
  for (Operation *user : v.getUsers())
    if (isa<tfm::CacheReorderOp, tfm::CacheWriteOp>(user)) retypeCacheChain(user->getResult(0));
}

// True if every use of `v` is tfm.gathered_attention's k or v.
bool onlyGatheredKv(Value v) {
  if (v.use_empty()) return false;
  for (OpOperand &use : v.getUses())
    if (!isa<tfm::GatheredAttentionOp>(use.getOwner()) || (use.getOperandNumber() != 1 && use.getOperandNumber() != 2))
      return false;
  return true;
}

struct LowerKvPrecisionPass : impl::LowerKvPrecisionBase<LowerKvPrecisionPass> {
  using LowerKvPrecisionBase::LowerKvPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::StringSet<> crossNames;  // arguments made bf16, by tfm.name
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal()) continue;
      fn.walk([&](tfm::StateOp state) {
        if (!isF32Tensor(state.getType()) || state->use_empty() || !onlyCacheUses(state.getResult())) return;
        retypeCacheChain(state.getResult());
        reportSite(report, state, "lower-kv-precision", "bf16 cache (rounded as written, widened as read)");
      });
      Block &body = fn.getBody().front();
      bool changed = false;
      for (BlockArgument arg : body.getArguments()) {
        if (!isF32Tensor(arg.getType()) || !onlyGatheredKv(arg)) continue;
        auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tfm.name");
        if (!name) continue;  // nothing could pair it with the function that produces it
        arg.setType(asBf16(arg.getType()));
        crossNames.insert(name.getValue());
        changed = true;
        reportSite(report, fn, "lower-kv-precision", ("bf16 argument '" + name.getValue() + "' (cross-attention K/V)").str());
      }
      if (changed) fn.setType(FunctionType::get(&getContext(), body.getArgumentTypes(), fn.getResultTypes()));
    }
    // The producers: results of the same names, rounded just before the return.
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal()) continue;
      auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
      OpBuilder b(ret);
      bool changed = false;
      for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
        auto name = fn.getResultAttrOfType<StringAttr>(i, "tfm.name");
        Value v = ret.getOperand(i);
        if (!name || !crossNames.contains(name.getValue()) || !isF32Tensor(v.getType())) continue;
        Value rounded = b.create<tfm::ToBf16Op>(ret.getLoc(), asBf16(v.getType()), v);
        ret.setOperand(i, rounded);
        changed = true;
        reportSite(report, rounded.getDefiningOp(), "lower-kv-precision", ("bf16 result '" + name.getValue() + "'").str());
      }
      if (changed) fn.setType(FunctionType::get(&getContext(), fn.getArgumentTypes(), ret.getOperandTypes()));
    }
  }
};

}  // namespace
}  // namespace tfmc
