// tfm-apply-adam: a differentiated function (loss, grad:<param>...) becomes a training step
// that updates the parameters and their Adam moments (session state "adam.m/<param>",
// "adam.v/<param>") in place and returns (loss, grad_sq_norm).
#include "llvm/ADT/StringMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "passes/PassUtils.h"
#include "passes/Passes.h"
#include "tfm/TfmDialect.h"

namespace tfmc {
#define GEN_PASS_DEF_APPLYADAM
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

LogicalResult applyAdam(func::FuncOp fn, DictionaryAttr hyper) {
  auto fail = [&](const Twine &why) { return fn.emitError() << "tfm-apply-adam: '" << fn.getSymName() << "': " << why; };
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  if (body.getNumArguments() == 0) return fail("the last argument must be the step (tensor<i32>)");
  Value step = body.getArguments().back();
  auto stepType = dyn_cast<RankedTensorType>(step.getType());
  if (!stepType || stepType.getRank() != 0 || !stepType.getElementType().isInteger(32))
    return fail("the last argument must be the step (tensor<i32>)");
  if (ret.getNumOperands() < 2) return fail("expected results (loss, grad:<param>...) from tfm-autodiff");

  llvm::StringMap<Value> params;
  for (auto param : body.getOps<tfm::ParamOp>()) params.try_emplace(param.getName(), param.getResult());
  SmallVector<ParamGradient> updates;
  for (unsigned i = 1; i < ret.getNumOperands(); ++i) {
    auto name = fn.getResultAttrOfType<StringAttr>(i, "tfm.name");
    if (!name || !name.getValue().starts_with("grad:"))
      return fail("result #" + Twine(i) + " is not a gradient (grad:<param>)");
    Value param = params.lookup(name.getValue().drop_front(5));
    if (!param) return fail("no tfm.param named '" + name.getValue().drop_front(5) + "'");
    updates.push_back({param, ret.getOperand(i)});
  }

  OpBuilder b(ret);
  Location loc = ret.getLoc();
  FailureOr<Value> sqNorm = buildAdamUpdates(b, loc, hyper, step, updates, [&]() -> InFlightDiagnostic {
    return fn.emitError() << "tfm-apply-adam: '" << fn.getSymName() << "': ";
  });
  if (failed(sqNorm)) return failure();
  Value loss = ret.getOperand(0);
  b.create<func::ReturnOp>(loc, ValueRange{loss, *sqNorm});
  ret.erase();
  fn.setFunctionType(b.getFunctionType(fn.getArgumentTypes(), {loss.getType(), sqNorm->getType()}));
  SmallVector<DictionaryAttr> names{b.getDictionaryAttr(b.getNamedAttr("tfm.name", b.getStringAttr("loss"))),
                                    b.getDictionaryAttr(b.getNamedAttr("tfm.name", b.getStringAttr("grad_sq_norm")))};
  fn.setAllResultAttrs(names);
  fn->removeAttr("tfm.adam");
  return success();
}

struct ApplyAdamPass : impl::ApplyAdamBase<ApplyAdamPass> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (auto hyper = fn->getAttrOfType<DictionaryAttr>("tfm.adam"); hyper && failed(applyAdam(fn, hyper)))
        return signalPassFailure();
  }
};

}  // namespace
}  // namespace tfmc
