// tfm-opt: parses, verifies, runs passes on and prints tfm IR (lit tests drive it).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"

#include <vector>

#include "passes/Passes.h"
#include "tfm/TfmDialect.h"

int main(int argc, char **argv) {
  // The options registered before main come from the shared libLLVM's code generators (hundreds:
  // --aarch64-*, --amdgpu-*, ...) and buried the tfm passes in --help: hidden (--help-hidden
  // lists them). MLIR's own options and the passes are registered later, by MlirOptMain.
  const llvm::StringSet<> kept = {"help", "help-list", "help-hidden", "help-list-hidden", "version", "color",
                                  "print-options", "print-all-options"};
  for (auto &option : llvm::cl::getRegisteredOptions())
    if (!kept.contains(option.getKey())) option.getValue()->setHiddenFlag(llvm::cl::Hidden);
  mlir::DialectRegistry registry;
  registry.insert<tfm::TfmDialect, mlir::func::FuncDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  tfmc::registerTfmPasses();
  // One thread unless asked (--mlir-disable-threading=false): test inputs are small, and
  // LeakSanitizer's exit-time tracer crashed now and then in processes that had run MLIR's pool.
  std::vector<char *> args(argv, argv + argc);
  bool threadingChosen = false;
  for (int i = 1; i < argc; ++i)
    threadingChosen |= llvm::StringRef(argv[i]).ltrim('-').starts_with("mlir-disable-threading");
  static char disableThreading[] = "--mlir-disable-threading";
  if (!threadingChosen) args.insert(args.begin() + 1, disableThreading);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(int(args.size()), args.data(), "tfm optimizer driver\n", registry));
}
