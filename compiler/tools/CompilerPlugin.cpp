// The compiler plugin's entry points (CompilerPlugin.h): the only symbols libtfmc_compile.so
// exports.
#include "CompilerPlugin.h"

#include <cstring>

#include "CompilerCommands.h"

#define TFMC_PLUGIN_EXPORT __attribute__((visibility("default")))

extern "C" TFMC_PLUGIN_EXPORT int tfmc_compiler_plugin_abi(size_t *commandLineBytes) {
  *commandLineBytes = sizeof(tfmc::CommandLine);
  return TFMC_COMPILER_PLUGIN_ABI;
}

extern "C" TFMC_PLUGIN_EXPORT int tfmc_compiler_verb(const char *command, const tfmc::CommandLine *cl) {
  if (!std::strcmp(command, "compile")) return tfmc::compileCommand(*cl);
  if (!std::strcmp(command, "demo")) return tfmc::demoCommand(*cl);
  if (!std::strcmp(command, "bench")) return tfmc::benchCommand(*cl);
  return 2;
}
