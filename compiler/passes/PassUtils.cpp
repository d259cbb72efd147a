#include "passes/PassUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "tfm/TfmDialect.h"

using namespace mlir;

namespace tfmc {

std::string siteName(Operation *op) {
  if (auto named = dyn_cast<NameLoc>(op->getLoc())) return named.getName().str();
  return "";
}

void reportSite(bool enabled, Operation *op, StringRef pass, StringRef message) {
  if (!enabled) return;
  std::string site = siteName(op);
  op->emitRemark() << pass << ": " << (site.empty() ? "<unnamed>" : site) << ": " << message;
}

bool isWeight(Value value) {
  Operation *def = value.getDefiningOp();
  if (!def) return false;
  if (isa<tfm::ParamOp>(def)) return true;
  if (auto concat = dyn_cast<tfm::ConcatOp>(def))
    return llvm::all_of(concat.getInputs(), [](Value v) { return isWeight(v); });
  return false;
}

FailureOr<Value> buildAdamUpdates(OpBuilder &b, Location loc, DictionaryAttr hyper, Value step,
                                  ArrayRef<ParamGradient> updates, function_ref<InFlightDiagnostic()> fail) {
  auto f64 = [&](StringRef key) { return dyn_cast_or_null<FloatAttr>(hyper.get(key)); };
  auto i64 = [&](StringRef key) { return dyn_cast_or_null<IntegerAttr>(hyper.get(key)); };
  FloatAttr beta1 = f64("beta1"), beta2 = f64("beta2"), eps = f64("epsilon"), lrScale = f64("lr_scale");
  IntegerAttr dModel = i64("d_model"), warmup = i64("warmup_steps");
  if (!beta1 || !beta2 || !eps || !lrScale || !dModel || !warmup) {
    fail() << "tfm.adam needs beta1, beta2, epsilon, lr_scale (f64) and d_model, warmup_steps (i64)";
    return failure();
  }
  // Gradient clipping (optional clip_norm > 0): the global norm needs every gradient before the
  // first parameter changes, so it is a pass of its own over the gradients.
  FloatAttr clipNorm = f64("clip_norm");
  if (hyper.get("clip_norm") && (!clipNorm || !(clipNorm.getValueAsDouble() >= 0))) {
    fail() << "tfm.adam's clip_norm must be an f64 >= 0 (0: no clipping)";
    return failure();
  }
  const bool clip = clipNorm && clipNorm.getValueAsDouble() > 0;
  // Decoupled weight decay (optional weight_decay in [0, 1)): an attribute of every update.
  FloatAttr weightDecay = f64("weight_decay");
  if (hyper.get("weight_decay") &&
      (!weightDecay || !(weightDecay.getValueAsDouble() >= 0 && weightDecay.getValueAsDouble() < 1))) {
    fail() << "tfm.adam's weight_decay must be an f64 in [0, 1) (0: none)";
    return failure();
  }
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  Value lr = b.create<tfm::LrScheduleOp>(loc, scalar, step, lrScale, dModel, warmup);
  auto sum = [&](Value total, Value part) {
    return total ? b.create<tfm::AddOp>(loc, scalar, total, part).getResult() : part;
  };
  Value clippedNorm, gradScale;
  if (clip) {
    for (const ParamGradient &u : updates) clippedNorm = sum(clippedNorm, b.create<tfm::SumSquaresOp>(loc, scalar, u.grad));
    if (clippedNorm) gradScale = b.create<tfm::ClipScaleOp>(loc, scalar, clippedNorm, clipNorm);
  }
  Value sqNorm;
  for (const ParamGradient &u : updates) {
    auto param = u.param.getDefiningOp<tfm::ParamOp>();
    if (!param) {
      fail() << "an Adam update needs a tfm.param";
      return failure();
    }
    // The moments are session state named after the parameter (what checkpoints store).
    const std::string name = param.getName().str();
    Value m = b.create<tfm::StateOp>(param.getLoc(), param.getType(), "adam.m/" + name);
    Value v = b.create<tfm::StateOp>(param.getLoc(), param.getType(), "adam.v/" + name);
    auto update = b.create<tfm::AdamUpdateOp>(param.getLoc(), scalar, u.param, u.grad, lr, step, m, v, gradScale, beta1,
                                              beta2, eps, FloatAttr());
    if (weightDecay && weightDecay.getValueAsDouble() > 0) update.setWeightDecayAttr(weightDecay);
    Value sq = update.getResult();
    if (!clip) sqNorm = sum(sqNorm, sq);
  }
  if (clip) sqNorm = clippedNorm;  // the norm before clipping, as without it
  if (!sqNorm) {
    fail() << "no parameter to update";
    return failure();
  }
  return sqNorm;
}

}  // namespace tfmc
