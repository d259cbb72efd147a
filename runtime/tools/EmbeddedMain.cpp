// tfm-embedded: the program `tfmc compile --emit=executable` writes, with a compiled artifact
// appended to it (tfmrt::appendEmbeddedArtifact). Given weights or a checkpoint and the tokenizer,
// it translates standard input to standard output, or --input / --data, with every option of
// `tfmc translate`. It links the runtime and data libraries only: no LLVM, no MLIR.

#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "Commands.h"
#include "tfmrt/artifact.h"
#include "tfmrt/files.h"

namespace {

// Whether this program carries an artifact (false: the bare template); `damage` says why one that
// it carries cannot be read (a bit flipped in the copy: its checksum), so that is not reported as
// carrying none.
bool carriesArtifact(const std::string &path, std::string &modelName, std::string &damage) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t offset = 0, size = 0;
  if (!tfmrt::findEmbeddedArtifact(bytes, offset, size, &damage)) return false;
  if (!damage.empty()) return true;
  tfmrt::Artifact a;
  if (tfmrt::Status s = tfmrt::deserializeArtifact(bytes.data() + offset, size, a); !s.ok()) {
    damage = s.message();
    return true;
  }
  modelName = a.modelName;
  return true;
}

void usage(const char *argv0, const std::string &model, FILE *to) {
  std::fprintf(to,
               "usage: %s (--weights w.safetensors | --checkpoint ck) --tokenizer spm.model [options]\n"
               "       (--src-tokenizer src.model --tgt-tokenizer tgt.model for separate vocabularies)\n\n"
               "Translates with the compiled model '%s' built into this program: standard input to\n"
               "standard output, one sentence per line, as lines arrive (or --input file | --data <dir>\n"
               "[--split test_2016_flickr] [--src de --tgt en]).\n"
               "Options are those of `tfmc translate`: --beam K, --length-penalty A, --n-best N,\n"
               "--batch N, --max-batch-tokens N, --output file, --output-format text|pieces|ids,\n"
               "--input-format text|pieces|ids, "
               "--reference file, --score-reference, --target-prefix file (with --input file or --data), --max-sentences N,\n"
               "--no-cache, "
               "--sample [--top-k K] [--top-p P] [--temperature T] [--seed N], --min-length N, --no-repeat-ngram-size N,\n"
               "--max-length-ratio R, --max-length-offset N, --kernels=dnnl|reference, --threads N, --workers N,\n"
               "--word-scores, --alignment hard|soft (if compiled with --entries=...,translate,alignment), --profile,\n"
               "--quiet; --checkpoint or --weights repeated: an ensemble (--ensemble-weights w1,w2,...).\n",
               argv0, model.c_str());
}

}  // namespace

int main(int argc, char **argv) {
  const std::string self = tfmrt::executablePath();
  std::string model, damage;
  const bool carries = !self.empty() && carriesArtifact(self, model, damage);
  if (carries && !damage.empty()) {
    std::fprintf(stderr,
                 "%s: error: the compiled model this program carries is damaged (%s); compile it again with\n"
                 "`tfmc compile <spec.yaml> --entries=forward,translate --emit=executable -o <name>`\n",
                 argv[0], damage.c_str());
    return 1;
  }
  if (!carries) {
    std::fprintf(stderr,
                 "%s: error: this program carries no compiled model; it is the template that\n"
                 "`tfmc compile <spec.yaml> --entries=forward,translate --emit=executable -o <name>` copies\n",
                 argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      usage(argv[0], model, stdout);
      return 0;
    }
    if (!std::strcmp(argv[i], "--version")) {
      std::printf("%s: model '%s', compiled by tfmc %s\n", argv[0], model.c_str(), tfmc::kVersion);
      return 0;
    }
  }
  tfmc::setTranslateProgramName(argv[0]);
  tfmc::CommandLine cl;
  int exitCode = 0;
  if (!tfmc::parseCommandLine(argv[0], "translate", argc, argv, 1, cl, exitCode)) return exitCode;
  if (!cl.positionals.empty()) {
    std::fprintf(stderr, "%s: error: unexpected argument '%s' (the model is built in; see --help)\n", argv[0],
                 cl.positionals[0].c_str());
    return 2;
  }
  cl.positionals.push_back(self);
  if (!cl.has("input") && !cl.has("data")) cl.flags.push_back({"input", "-"});
  try {  // as tfmc's main: a message and exit status 1, never std::terminate's abort
    return tfmc::finishStandardOutput(argv[0], tfmc::translateCommand(cl));
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "%s: error: out of memory (a batch or length too large for this machine?)\n", argv[0]);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s: internal error: %s\n", argv[0], e.what());
  }
  return 1;
}
