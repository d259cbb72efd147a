// The libFuzzer entry point every target defines. Built two ways (tests/fuzz/CMakeLists.txt):
// with clang's -fsanitize=fuzzer for campaigns (scripts/fuzz.sh), and with replay_main.cpp in
// the normal build, where CTest replays the committed corpus through each target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// A property every accepted input must have; a violation is a finding (abort, so both libFuzzer
// and the replay driver report it with the input).
#define FUZZ_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: fuzz property violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)
