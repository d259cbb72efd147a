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

}  // namespace tfmc
