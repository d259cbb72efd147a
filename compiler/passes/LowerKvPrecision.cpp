// tfm-lower-kv-precision: decoding's keys and values in bf16. The K/V caches (tfm.state values
// that only cache ops and tfm.cached_attention read) and the cross-attention K/V that a function
// takes only as tfm.gathered_attention keys or values (or tfm.attention_weights keys) become
// bf16 tensors; every function that returns a value of the same name (`encode`'s cross_k.l / cross_v.l for `decode_step`'s
// arguments) rounds it with tfm.to_bf16. The attention kernels widen them back to f32 as they
// load them: half the bytes in the memory-bound part of a decoder step, f32 arithmetic.
#include "llvm/ADT/StringMap.h"
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

// True if every use of `v` is tfm.gathered_attention's k or v, or tfm.attention_weights' k (the
// same keys, read for the alignment).
bool onlyGatheredKv(Value v) {
  if (v.use_empty()) return false;
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    const bool gathered = isa<tfm::GatheredAttentionOp>(user) && (use.getOperandNumber() == 1 || use.getOperandNumber() == 2);
    const bool weights = isa<tfm::AttentionWeightsOp>(user) && use.getOperandNumber() == 1;
    if (!gathered && !weights) return false;
  }
  return true;
}

// The value a cache operand derives from: its tfm.state, back through the cache ops' operand 0.
Value cacheRoot(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<tfm::CacheReorderOp, tfm::CacheWriteOp>(def)) break;
    v = def->getOperand(0);
  }
  return v;
}

// The key that pairs a value across the module: "state:" + a state's name, "arg:" + a function
// argument's tfm.name; empty for anything else (never made bf16).
std::string pairingKey(Value v) {
  if (auto state = v.getDefiningOp<tfm::StateOp>()) return ("state:" + state.getName()).str();
  auto arg = dyn_cast<BlockArgument>(v);
  auto fn = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : func::FuncOp();
  auto name = fn ? fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tfm.name") : StringAttr();
  return name ? ("arg:" + name.getValue()).str() : std::string();
}

struct LowerKvPrecisionPass : impl::LowerKvPrecisionBase<LowerKvPrecisionPass> {
  using LowerKvPrecisionBase::LowerKvPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Candidates: f32 states read only as caches, and named f32 arguments read only as
    // gathered_attention keys or values. Every value of one name must qualify: the artifact has
    // one state per name, and encode's result feeds every argument of its name.
    SmallVector<Value> candidates;
    llvm::StringMap<bool> nameOk;
    auto consider = [&](Value v, bool ok) {
      const std::string name = pairingKey(v);
      if (name.empty()) return;
      auto [it, inserted] = nameOk.try_emplace(name, ok);
      if (!inserted) it->second = it->second && ok;
      candidates.push_back(v);
    };
    module.walk([&](tfm::StateOp state) {
      consider(state.getResult(), isF32Tensor(state.getType()) && !state->use_empty() && onlyCacheUses(state.getResult()));
    });
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal())
        for (BlockArgument arg : fn.getBody().front().getArguments())
          if (isa<RankedTensorType>(arg.getType()) && fn.getArgAttr(arg.getArgNumber(), "tfm.name"))
            consider(arg, isF32Tensor(arg.getType()) && onlyGatheredKv(arg));
    // An attention's keys and values share an element type: when one side cannot be bf16, the
    // other stays f32 too (by name, everywhere), until nothing changes.
    auto chosen = [&](Value v) {
      const std::string name = pairingKey(v);
      return !name.empty() && nameOk.lookup(name);
    };
    for (bool changed = true; changed;) {
      changed = false;
      module.walk([&](Operation *op) {
        if (!isa<tfm::CachedAttentionOp, tfm::GatheredAttentionOp>(op)) return;
        const Value k = cacheRoot(op->getOperand(1)), v = cacheRoot(op->getOperand(2));
        if (chosen(k) == chosen(v)) return;
        for (Value x : {k, v})
          if (chosen(x)) nameOk[pairingKey(x)] = false, changed = true;
      });
    }

    llvm::StringSet<> crossNames;  // arguments made bf16, by tfm.name
    for (Value v : candidates) {
      if (!chosen(v)) continue;
      if (auto state = v.getDefiningOp<tfm::StateOp>()) {
        retypeCacheChain(v);
        reportSite(report, state, "lower-kv-precision", "bf16 cache (rounded as written, widened as read)");
        continue;
      }
      auto arg = cast<BlockArgument>(v);
      auto fn = cast<func::FuncOp>(arg.getOwner()->getParentOp());
      const StringRef name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tfm.name").getValue();
      arg.setType(asBf16(arg.getType()));
      fn.setType(FunctionType::get(&getContext(), fn.getBody().front().getArgumentTypes(), fn.getResultTypes()));
      crossNames.insert(name);
      reportSite(report, fn, "lower-kv-precision", ("bf16 argument '" + name + "' (cross-attention K/V)").str());
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
