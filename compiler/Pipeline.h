// The compilation pipeline, in one place: import -> verify -> passes -> lower to artifact.
#pragma once

#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include "spec/ModelSpec.h"
#include "tfmrt/artifact.h"

namespace tfmc {

// Which optimisations run. The default is everything; `--fusion=none` gives the unfused
// program (primitive ops, plain weight layouts), which is a real program that runs.
struct PipelineOptions {
  bool mergeProjections = true;
  bool fuseAttention = true;
  bool fuseEpilogues = true;
  bool assignLayouts = true;
  bool bf16 = false;             // --precision=bf16: tfm-lower-precision after the layouts
  bool int8 = false;             // --precision=int8: tfm-quantize-int8 after the layouts
  bool report = false;           // fusion report: one remark per candidate site
  bool printIrAfterAll = false;  // print the IR after every pass (stderr)
  bool verifyEach = true;
  bool gradients = false;        // also the `gradients` entry (loss + parameter gradients)
  bool trainStep = false;        // also the `train_step` entry (forward, backward, Adam in place)
  bool accumulate = false;       // also `accumulate_gradients` + `apply_update` (gradient accumulation)
  bool translate = false;        // also the translation entries (`encode`, `decode_step`, `decode`)
  bool alignment = false;        // decode_step also returns the cross-attention weights (alignment)
  int alignmentLayer = -1;       // ... of this decoder layer (-1: the last)

  // Parses `none`, `all` or a comma list of pass names (see fusionPassNames()).
  bool parseFusionList(const std::string &list, std::string &error);
  static const char *fusionPassNames();
  std::string describe() const;  // "merge-projections,attention,..." or "none"
};

// Imports the spec; runs the pipeline's passes on it. Diagnostics go to the context's handler.
mlir::OwningOpRef<mlir::ModuleOp> buildModule(const ModelSpec &spec, mlir::MLIRContext &ctx,
                                              const PipelineOptions &options = {});

// Full pipeline: returns failure (with diagnostics emitted) if any stage fails.
mlir::LogicalResult compileModelSpec(const ModelSpec &spec, mlir::MLIRContext &ctx,
                                     tfmrt::Artifact &artifact,
                                     const PipelineOptions &options = {});

}  // namespace tfmc
