#include "Pipeline.h"

#include <sstream>

#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include "import/SpecToTfm.h"
#include "lower/TfmToArtifact.h"
#include "passes/Passes.h"

namespace tfmc {

const char *PipelineOptions::fusionPassNames() {
  return "merge-projections,attention,epilogues,layouts";
}

bool PipelineOptions::parseFusionList(const std::string &list, std::string &error) {
  if (list.empty()) {
    error = std::string("empty list (expected none, all, or a comma list of ") + fusionPassNames() +
            ")";
    return false;
  }
  if (list == "all" || list == "none") {
    bool on = list == "all";
    mergeProjections = fuseAttention = fuseEpilogues = assignLayouts = on;
    return true;
  }
  mergeProjections = fuseAttention = fuseEpilogues = assignLayouts = false;
  std::stringstream in(list + ",");  // a trailing comma: an empty last item, refused below
  std::string name;
  while (std::getline(in, name, ',')) {
    // Accept "a, b" as well as "a,b".
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (name == "merge-projections") mergeProjections = true;
    else if (name == "attention") fuseAttention = true;
    else if (name == "epilogues") fuseEpilogues = true;
    else if (name == "layouts") assignLayouts = true;
    else if (name.empty()) {
      error = "an empty item in the list '" + list + "' (expected none, all, or a comma list of " + fusionPassNames() + ")";
      return false;
    } else {
      error = "unknown fusion pass '" + name + "' (expected none, all, or a comma list of " +
              fusionPassNames() + ")";
      return false;
    }
  }
  return true;
}

std::string PipelineOptions::describe() const {
  std::string out;
  auto add = [&](bool on, const char *name) {
    if (on) out += (out.empty() ? "" : ",") + std::string(name);
  };
  add(mergeProjections, "merge-projections");
  add(fuseAttention, "attention");
  add(fuseEpilogues, "epilogues");
  add(assignLayouts, "layouts");
  return out.empty() ? "none" : out;
}

mlir::OwningOpRef<mlir::ModuleOp> buildModule(const ModelSpec &spec, mlir::MLIRContext &ctx,
                                              const PipelineOptions &options) {
  // One thread for verification and passes: the compile takes ~0.2 s (transformer-base, three
  // entries), so MLIR's thread pool only added threads, and LeakSanitizer's exit-time tracer
  // crashed now and then in processes that had run it (CI's sanitizer job, two three-entry compiles).
  ctx.disableMultithreading();
  if (options.alignment && options.alignmentLayer >= spec.model.decoder_layers) {
    // An option's error, not the IR's: said as tfmc's other option errors are (MLIR's handler
    // printed a bare "error:").
    llvm::errs() << "tfmc: error: --alignment-layer " << options.alignmentLayer << ": the spec has " << spec.model.decoder_layers
        << " decoder layers (0 to " << spec.model.decoder_layers - 1 << ")\n";
    return nullptr;
  }
  auto module = importModelSpec(spec, ctx, ImportOptions{.gradients = options.gradients, .trainStep = options.trainStep,
                                                                   .accumulate = options.accumulate, .translate = options.translate,
                                                                   .alignment = options.alignment,
                                                                   .alignmentLayer = options.alignmentLayer});
  if (options.verifyEach && failed(mlir::verify(*module))) {
    mlir::emitError(module->getLoc()) << "internal error: the imported tfm IR does not verify";
    return nullptr;
  }

  // Pass order lives here and only here.
  mlir::PassManager pm(&ctx);
  pm.enableVerifier(options.verifyEach);
  if (options.printIrAfterAll) {
    pm.enableIRPrinting(/*shouldPrintBeforePass=*/[](mlir::Pass *, mlir::Operation *) { return false; },
                        /*shouldPrintAfterPass=*/[](mlir::Pass *, mlir::Operation *) { return true; },
                        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
  }
  const bool report = options.report;
  mlir::OpPassManager &cleanup = pm.nest<mlir::func::FuncOp>();
  cleanup.addPass(createRemoveInferenceDropout(RemoveInferenceDropoutOptions{report}));
  cleanup.addPass(mlir::createCSEPass());  // tied weights: one tfm.param per name
  // On the primitive graph: every fusion below sees forward and backward ops alike.
  pm.addPass(createAutodiff());
  pm.addPass(createAccumulateGradients());
  pm.addPass(createApplyAdam());
  mlir::OpPassManager &fn = pm.nest<mlir::func::FuncOp>();
  if (options.mergeProjections) fn.addPass(createMergeProjections(MergeProjectionsOptions{report}));
  if (options.fuseAttention) fn.addPass(createFuseAttention(FuseAttentionOptions{report}));
  if (options.fuseEpilogues) fn.addPass(createFuseEpilogues(FuseEpiloguesOptions{report}));
  if (options.assignLayouts) fn.addPass(createAssignLayouts(AssignLayoutsOptions{report}));
  if (options.bf16) fn.addPass(createLowerPrecision(LowerPrecisionOptions{report}));
  if (options.int8) fn.addPass(createQuantizeInt8(QuantizeInt8Options{report}));
  fn.addPass(mlir::createCanonicalizerPass());  // removes ops left dead by the rewrites
  fn.addPass(mlir::createCSEPass());
  if (options.bf16) pm.addPass(createLowerKvPrecision(LowerKvPrecisionOptions{report}));
  if (failed(pm.run(*module))) return nullptr;
  if (report) {
    // A pass --fusion left out reports nothing of its own, so the report says which passes did not
    // run: a fused and an unfused report then differ by these lines, not by silence.
    const std::string fusion = options.describe();
    auto notRun = [&](bool on, const char *pass, const char *item) {
      if (!on)
        mlir::emitRemark(module->getLoc()) << pass << ": not run (--fusion=" << fusion << " leaves out " << item
                                           << "): its candidate sites stay unfused";
    };
    notRun(options.mergeProjections, "merge-projections", "merge-projections");
    notRun(options.fuseAttention, "fuse-attention", "attention");
    notRun(options.fuseEpilogues, "fuse-epilogues", "epilogues");
    notRun(options.assignLayouts, "assign-layouts", "layouts");
  }
  return module;
}

mlir::LogicalResult compileModelSpec(const ModelSpec &spec, mlir::MLIRContext &ctx,
                                     tfmrt::Artifact &artifact, const PipelineOptions &options) {
  auto module = buildModule(spec, ctx, options);
  if (!module) return mlir::failure();
  if (failed(lowerToArtifact(*module, spec, artifact))) return mlir::failure();
  // What `tfmc inspect` shows; the runtime reads each site's weight_layout, not this.
  artifact.metadata["compile.precision"] = options.bf16 ? "bf16" : options.int8 ? "int8" : "f32";
  return mlir::success();
}

}  // namespace tfmc
