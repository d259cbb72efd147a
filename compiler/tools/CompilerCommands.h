// The compiler verbs of `tfmc` (compile, demo, bench): the MLIR half of the CLI.
#pragma once

#include <string>

#include "Commands.h"

namespace tfmc {

int compileCommand(const CommandLine &cl);
int demoCommand(const CommandLine &cl);
int benchCommand(const CommandLine &cl);

// Compiles a spec (file, or the embedded demo spec when `path` is empty) to an artifact in memory
// or on disk. Prints diagnostics to stderr. Defined in CompileCommand.cpp.
struct PipelineOptions;
// With `executable`, writes a translation program instead (tfm-embedded + the artifact).
bool compileSpecToArtifactFile(const std::string &specPath, const std::string &outPath,
                               const PipelineOptions &options, bool quiet, bool executable = false);
// Reads --fusion, --fusion-report, --print-ir-after-all.
bool readPipelineOptions(const char *cmd, const CommandLine &cl, PipelineOptions &options);

}  // namespace tfmc
