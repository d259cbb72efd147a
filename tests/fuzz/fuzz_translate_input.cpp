// The translate input path: a raw input line is made valid UTF-8 (invalid bytes -> U+FFFD) and
// segmented by a SentencePiece model (a small one trained at start-up on built-in sentences).
// Properties: the sanitised line is valid UTF-8 and a fixed point; valid input is untouched;
// every id is in the vocabulary; decoding the ids never fails.
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "FuzzTarget.h"
#include "tfmdata/text.h"
#include "tfmdata/tokenizer.h"

namespace {
std::unique_ptr<tfmdata::Tokenizer> gTok;
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  std::vector<std::string> sentences;
  const char *words[] = {"Ein", "Mann", "läuft", "über", "die", "Straße", "Zwei", "Hunde", "spielen", "im", "Schnee",
                         "A",   "man",  "runs",  "across", "the", "street", "Two", "dogs", "play", "in", "snow", "ß€😀"};
  const size_t n = sizeof(words) / sizeof(words[0]);
  for (size_t i = 0; i < 400; ++i) {
    std::string s;
    for (size_t k = 0; k < 3 + i % 7; ++k) s += std::string(k ? " " : "") + words[(i * 7 + k * 13) % n];
    sentences.push_back(s + ".");
  }
  tfmdata::TokenizerOptions options;
  options.vocabSize = 60;
  const std::string path = "/tmp/tfmc_fuzz_spm_" + std::to_string(::getpid()) + ".model";
  tfmrt::Status s = tfmdata::Tokenizer::train(sentences, options, path, gTok);
  std::remove(path.c_str());
  if (!s.ok()) {
    std::fprintf(stderr, "fuzz_translate_input: %s\n", s.message().c_str());
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string line(reinterpret_cast<const char *>(data), size);
  const std::string original = line;
  const bool replaced = tfmdata::sanitiseUtf8(line);
  std::string again = line;
  FUZZ_CHECK(!tfmdata::sanitiseUtf8(again) && again == line);  // valid now, and a fixed point
  FUZZ_CHECK(replaced || line == original);
  std::vector<int32_t> ids;
  if (!gTok->encode(line, ids).ok()) return 0;
  for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < gTok->vocabSize());
  (void)gTok->decode(ids);
  (void)gTok->pieces(ids);
  return 0;
}
