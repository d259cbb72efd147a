// tfm-opt: parses, verifies, runs passes on and prints tfm IR (lit tests drive it).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

#include "passes/Passes.h"
#include "tfm/TfmDialect.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<tfm::TfmDialect, mlir::func::FuncDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  tfmc::registerTfmPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "tfm optimizer driver\n", registry));
}
