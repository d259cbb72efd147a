// Subcommands of the `tfmc` CLI. Each returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace tfmc {

// Flags are `--name=value` or `--name value`; positionals are everything else.
struct CommandLine {
  std::vector<std::string> positionals;
  std::vector<std::pair<std::string, std::string>> flags;
  bool has(const std::string &name) const;
  std::string get(const std::string &name, const std::string &fallback = "") const;
  long long getInt(const std::string &name, long long fallback) const;
  double getDouble(const std::string &name, double fallback) const;  // exits 2 on a non-number
  // Names of flags not in `known`, for "unknown option" errors.
  std::vector<std::string> unknown(const std::vector<std::string> &known) const;
};

// Flags that never take a value (so `--flag positional` is not misread).
bool isSwitch(const std::string &name);

int compileCommand(const CommandLine &cl);
int runCommand(const CommandLine &cl);
int trainCommand(const CommandLine &cl);
int tokenizerCommand(const CommandLine &cl);
int translateCommand(const CommandLine &cl);
int demoCommand(const CommandLine &cl);
int inspectCommand(const CommandLine &cl);
int benchCommand(const CommandLine &cl);

// Compiles a spec (file, or the embedded demo spec when `path` is empty) to an artifact in memory
// or on disk. Prints diagnostics to stderr. Defined in CompileCommand.cpp (the MLIR half).
struct PipelineOptions;
bool compileSpecToArtifactFile(const std::string &specPath, const std::string &outPath,
                               const PipelineOptions &options, bool quiet);
// Reads --fusion, --fusion-report, --print-ir-after-all.
bool readPipelineOptions(const char *cmd, const CommandLine &cl, PipelineOptions &options);

}  // namespace tfmc
