// tfm-accumulate-gradients: gradient accumulation (an update over several micro-batches, the
// effective batch of `tfmc train --update-freq N`). A differentiated function marked
// `tfm.accumulate` adds each weighted gradient into session state "grad_accum/<param>" and
// returns its loss; a new function `apply_update(step)` takes one Adam step from those sums.
// Kept apart from train_step so data-parallel training can sum the accumulators across
// processes between the two calls.
#include "llvm/ADT/StringMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "tfm/TfmDialect.h"

namespace tfmc {
#define GEN_PASS_DEF_ACCUMULATEGRADIENTS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

bool isScalar(Value v, bool integer) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getRank() == 0 &&
         (integer ? type.getElementType().isInteger(32) : type.getElementType().isF32());
}

LogicalResult accumulate(ModuleOp module, func::FuncOp fn, DictionaryAttr hyper) {
  auto fail = [&]() -> InFlightDiagnostic {
    return fn.emitError() << "tfm-accumulate-gradients: '" << fn.getSymName() << "': ";
  };
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  const unsigned n = body.getNumArguments();
  if (n < 2 || !isScalar(body.getArgument(n - 2), /*integer=*/false) || !isScalar(body.getArgument(n - 1), true))
    return fail() << "the last two arguments must be the weight (tensor<f32>) and reset (tensor<i32>)";
  if (ret.getNumOperands() < 2) return fail() << "expected results (loss, grad:<param>...) from tfm-autodiff";
  if (module.lookupSymbol("apply_update")) return fail() << "the module already has an apply_update function";
  Value weight = body.getArgument(n - 2), reset = body.getArgument(n - 1);

  llvm::StringMap<tfm::ParamOp> params;
  for (auto param : body.getOps<tfm::ParamOp>()) params.try_emplace(param.getName(), param);
  SmallVector<tfm::ParamOp> updated;
  OpBuilder b(ret);
  for (unsigned i = 1; i < ret.getNumOperands(); ++i) {
    auto name = fn.getResultAttrOfType<StringAttr>(i, "tfm.name");
    if (!name || !name.getValue().starts_with("grad:"))
      return fail() << "result #" << i << " is not a gradient (grad:<param>)";
    tfm::ParamOp param = params.lookup(name.getValue().drop_front(5));
    if (!param) return fail() << "no tfm.param named '" << name.getValue().drop_front(5) << "'";
    Value acc = b.create<tfm::StateOp>(param.getLoc(), param.getType(), "grad_accum/" + param.getName().str());
    b.create<tfm::GradAccumulateOp>(param.getLoc(), acc.getType(), acc, ret.getOperand(i), weight, reset);
    updated.push_back(param);
  }
  Value loss = ret.getOperand(0);
  Location loc = ret.getLoc();
  b.create<func::ReturnOp>(loc, ValueRange{loss});
  ret.erase();
  fn.setFunctionType(b.getFunctionType(fn.getArgumentTypes(), {loss.getType()}));
  SmallVector<DictionaryAttr> names{b.getDictionaryAttr(b.getNamedAttr("tfm.name", b.getStringAttr("loss")))};
  fn.setAllResultAttrs(names);
  fn->removeAttr("tfm.accumulate");

  // apply_update(step) -> grad_sq_norm: Adam from the accumulated gradients.
  b.setInsertionPointAfter(fn);
  auto stepType = RankedTensorType::get({}, b.getI32Type());
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  auto apply = b.create<func::FuncOp>(fn.getLoc(), "apply_update", b.getFunctionType({stepType}, {scalar}));
  apply->setAttr("tfm.mode", b.getStringAttr("training"));
  apply.setArgAttr(0, "tfm.name", b.getStringAttr("step"));
  apply.setResultAttr(0, "tfm.name", b.getStringAttr("grad_sq_norm"));
  Block *entry = apply.addEntryBlock();
  b.setInsertionPointToStart(entry);
  SmallVector<ParamGradient> updates;
  for (tfm::ParamOp param : updated) {
    Value p = b.create<tfm::ParamOp>(param.getLoc(), param.getType(), param.getName());
    Value g = b.create<tfm::StateOp>(param.getLoc(), param.getType(), "grad_accum/" + param.getName().str());
    updates.push_back({p, g});
  }
  FailureOr<Value> sqNorm = buildAdamUpdates(b, loc, hyper, entry->getArgument(0), updates, fail);
  if (failed(sqNorm)) return failure();
  b.create<func::ReturnOp>(loc, ValueRange{*sqNorm});
  return success();
}

struct AccumulateGradientsPass : impl::AccumulateGradientsBase<AccumulateGradientsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<func::FuncOp, DictionaryAttr>> marked;
    for (auto fn : module.getOps<func::FuncOp>())
      if (auto hyper = fn->getAttrOfType<DictionaryAttr>("tfm.accumulate")) marked.push_back({fn, hyper});
    for (auto [fn, hyper] : marked)
      if (failed(accumulate(module, fn, hyper))) return signalPassFailure();
  }
};

}  // namespace
}  // namespace tfmc
