// The interface between tfmc and its compiler plugin, libtfmc_compile.so: the verbs with MLIR
// behind them (compile, demo, bench), which tfmc loads only when one of them runs, so that the
// runtime verbs (translate, train, run, ...) start without loading libMLIR and libLLVM.
#pragma once

#include <cstddef>

#include "Commands.h"

// Bumped when these signatures or what they pass change; tfmc refuses a plugin of another value.
#define TFMC_COMPILER_PLUGIN_ABI 1

extern "C" {
// TFMC_COMPILER_PLUGIN_ABI; *commandLineBytes = sizeof(tfmc::CommandLine) as the plugin saw it.
int tfmc_compiler_plugin_abi(size_t *commandLineBytes);
// Runs verb `command` ("compile", "demo" or "bench") and returns its exit status; 2 for another.
int tfmc_compiler_verb(const char *command, const tfmc::CommandLine *cl);
}
