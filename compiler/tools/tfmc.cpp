// tfmc: compile model specs, run compiled artifacts, inspect them.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>

#include <dlfcn.h>

#include "CompilerPlugin.h"
#include "tfmrt/files.h"


static const char *kUsage = R"(usage: tfmc <command> [options]       (tfmc <command> --help: the command's options)

commands:
  compile <spec.yaml> [-o out.tfmx] [--emit=artifact|mlir|executable] [--fusion=all|none|<list>]
      [--fusion-report] [--print-ir-after-all]
      [--entries=forward[,gradients][,train_step[,accumulate]][,translate[,alignment]]]
      [--alignment-layer N] [--precision=f32|bf16|int8]
      Import a model spec into the tfm dialect, run the passes and write the compiled artifact
      (default: the spec file's name with .tfmx, in the working directory). --emit=mlir prints
      the tfm IR after the passes instead (with --fusion=none: the primitive ops, inference
      dropout removed, CSE applied). --emit=executable writes a translator program: tfm-embedded
      with the artifact appended (needs the translate entries).
      --fusion picks passes: a comma list of merge-projections, attention, epilogues, layouts.
      --fusion-report lists every candidate site, fused or not and why, with the spec line it
      came from, and each pass --fusion left out. --entries adds entry functions to `forward`: `gradients` (tfm-autodiff: the
      loss and one gradient per parameter, named grad:<parameter>), `train_step` (dropout,
      forward, backward and Adam in place: for tfmc train), `accumulate` (with train_step:
      gradients summed over batches, then the update: for train --update-freq and mpirun),
      `translate` (`encode`, `decode_step` and the full-prefix `decode`:
      for tfmc translate), `alignment` (with translate: decode_step also returns the last decoder
      layer's cross-attention weights, or layer N's with --alignment-layer N (0 = the first),
      for tfmc translate --alignment). --precision=bf16 runs the GEMMs with a weight (every
      entry's, weight gradients included) and fused attention with bf16 operands and f32
      accumulation (tfm-lower-precision; CPUs without AVX512-BF16 run them f32) and stores decoding's K/V caches and cross K/V as bf16 (tfm-lower-kv-precision).
      --precision=int8 runs the GEMMs of the inference entries (forward, encode, decoding) with
      int8 operands: weights per output column, inputs per row, int32 sums (tfm-quantize-int8;
      AVX512-VNNI; CPUs without it run them f32); training stays f32.
  run <model.tfmx> [--weights w.safetensors | --seed N] [--inputs batch.safetensors]
      [--batch B --src-len S --tgt-len T] [--kernels=dnnl|reference] [--iters N]
      [--output out.safetensors] [--save-weights w.safetensors] [--threads N] [--profile]
      [--entry forward|gradients]
      Run the forward entry: logits and label-smoothed loss (or, with --entry gradients and an
      artifact compiled with --entries=forward,gradients, the loss and every parameter's
      gradient; --output saves them as grad:<parameter>). Without --inputs a built-in padded
      sample batch is used. Prints loss and tokens/s.
  train <model.tfmx> [--steps N] [--first-step K] [--log-every N] [--weights w.safetensors | --seed N]
      [--inputs batch.safetensors] [--batch B --src-len S --tgt-len T] [--kernels=...] [--threads N]
      [--save-weights out.safetensors] [--checkpoint ckpt [--checkpoint-every N]] [--resume ckpt]
      [--data <dir> --src de --tgt en (--tokenizer spm.model | --src-tokenizer s.model --tgt-tokenizer t.model)
       [--batch-tokens N] [--eval-every N] [--valid-split val|none]]
      Run the compiled train_step entry (compile with --entries=forward,train_step: dropout,
      forward, backward and Adam with the spec's schedule in one graph, weights updated in
      place) for N steps, printing loss and gradient norm: on a parallel corpus with --data
      (<dir>/train.<lang>.gz, token-budget batches from the spec's training.batch_tokens, a
      seeded shuffle per epoch; validation loss on <dir>/val.* at the end or every
      --eval-every steps), else on one batch (--inputs or the built-in sample batch).
      --save-weights writes the trained weights. --checkpoint writes weights, Adam
      moments and the step (every N steps and at the end; atomic, checksummed); --resume
      continues from one exactly where it stopped (and saves to it unless --checkpoint or
      --save-dir names another place). tfmc train --help lists every option.
  translate <model.tfmx> (--weights w.safetensors | --checkpoint ck)
      (--tokenizer spm.model | --src-tokenizer s.model --tgt-tokenizer t.model)
      (--input file|- [--reference file] | --data <dir> [--split test_2016_flickr] [--src de --tgt en])
      [--beam K] [--length-penalty A] [--n-best N] [--batch N] [--max-batch-tokens N]
      [--output file] [--output-format text|pieces|ids] [--max-sentences N] [--no-cache]
      [--sample [--top-k K] [--top-p P] [--temperature T] [--seed N]] [--kernels=...] [--threads N]
      Translate (compile with --entries=forward,translate): encode once per batch, then one
      decode_step per output token with a K/V cache. --beam 1 is greedy (argmax); beam search
      ranks by log P / ((5 + length) / 6)^A (GNMT; A and K default to the spec's decoding:).
      --n-best N prints "index ||| text ||| score" for the N best of each sentence. --sample draws
      tokens instead (K independent samples with --beam K). --input - translates standard input as lines arrive, writing each
      batch in input order without waiting for the end. --no-cache runs the reference decoder
      (the whole prefix every step). With references, prints corpus BLEU (13a tokenization).
      --alignment hard|soft appends the word alignment (compile with
      --entries=forward,translate,alignment). tfmc translate --help lists every option.
  tokenizer --data <dir> [--langs de,en] [--split train] [--vocab 8000] -o spm.model
      Train one SentencePiece vocabulary over the languages of --langs (pad/bos/eos/unk =
      0/1/2/3, as the model specs expect; both: a joint vocabulary); --vocab must equal the spec's
      vocabulary sizes. With one language (--langs de), that side's vocabulary: train and translate take such a pair as
      --src-tokenizer and --tgt-tokenizer instead of --tokenizer (separate vocabularies).
  demo [spec.yaml] [--seed N] [--kernels=...] [--iters N] [--fusion=...]
      Compile a spec (the embedded small model by default), initialise weights from a seed
      and run the forward pass + loss over a built-in sample batch.
  bench <spec.yaml> [--batch B --src-len S --tgt-len T] [--rounds N] [--iters N] [--threads N]
        [--precision=bf16|int8]
      Compile the spec fused and unfused, run both side by side (alternating rounds, same
      weights and inputs) and print tokens/s, GFLOP/s, peak activation memory, their ratios and
      the load average. Defaults to the spec's compile: shapes. --precision=bf16 (or int8)
      compares the fused build in bf16 (int8) with the fused build in f32 instead.
  inspect <model.tfmx | checkpoint | weights.safetensors>
      Validate an artifact and summarise its parameters, constants and entry functions; or a
      checkpoint (its checksum, step and records: tokenizer, training data, best validation) or
      a weights file and list its tensors.
  average <model.tfmx> <ck1> <ck2> ... -o <out>
      The element-wise mean of the checkpoints' parameters (e.g. the last N of a run), written as a
      checkpoint for translate --checkpoint or train --resume (step, records and optimizer state:
      the latest input's, if the artifact has a train_step entry; otherwise weights only).
)";

// compile, demo and bench run in the compiler plugin, loaded here: from ../lib next to tfmc's
// directory (the build tree's bin/ and lib/), or from tfmc's own directory.
static int compilerVerb(const std::string &command, const tfmc::CommandLine &cl) {
  const std::string dir = tfmrt::executableDir();
  std::string tried;
  void *plugin = nullptr;
  for (const std::string &path : {dir + "/../lib/libtfmc_compile.so", dir + "/libtfmc_compile.so"}) {
    if ((plugin = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))) break;  // kept loaded until exit
    tried += std::string("\n  ") + dlerror();  // names the file
  }
  if (!plugin) {
    std::cerr << "tfmc " << command << ": error: cannot load tfmc's compiler plugin, libtfmc_compile.so (built with "
              << "tfmc, the tfmc_compile target):" << tried << "\n";
    return 1;
  }
  auto abi = reinterpret_cast<int (*)(size_t *)>(dlsym(plugin, "tfmc_compiler_plugin_abi"));
  auto verb = reinterpret_cast<int (*)(const char *, const tfmc::CommandLine *)>(dlsym(plugin, "tfmc_compiler_verb"));
  size_t commandLineBytes = 0;
  if (!abi || !verb || abi(&commandLineBytes) != TFMC_COMPILER_PLUGIN_ABI || commandLineBytes != sizeof(tfmc::CommandLine)) {
    std::cerr << "tfmc " << command << ": error: tfmc's compiler plugin is from another build: rebuild tfmc\n";
    return 1;
  }
  return verb(command.c_str(), &cl);
}

int main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("tfmc %s\n", tfmc::kVersion);
    return 0;
  }
  const tfmc::LineAtomicStderr lineAtomicStderr;  // mpirun's ranks share one stderr
  std::string command = argv[1];
  if (!tfmc::isCommand(command)) {
    std::cerr << "tfmc: error: unknown command '" << command << "'\n\n" << kUsage;
    return 2;
  }
  tfmc::CommandLine cl;
  int exitCode = 0;
  if (!tfmc::parseCommandLine("tfmc", command, argc, argv, 2, cl, exitCode)) return exitCode;
  // The last line of defence: whatever a command did not turn into a Status ends in a message and
  // exit status 1, not in std::terminate's abort.
  const std::string tool = "tfmc " + command;
  try {
    if (command == "compile") return tfmc::finishStandardOutput(tool, compilerVerb(command, cl));
    if (command == "run") return tfmc::finishStandardOutput(tool, tfmc::runCommand(cl));
    if (command == "train") return tfmc::finishStandardOutput(tool, tfmc::trainCommand(cl));
    if (command == "tokenizer") return tfmc::finishStandardOutput(tool, tfmc::tokenizerCommand(cl));
    if (command == "translate") return tfmc::finishStandardOutput(tool, tfmc::translateCommand(cl));
    if (command == "demo") return tfmc::finishStandardOutput(tool, compilerVerb(command, cl));
    if (command == "inspect") return tfmc::finishStandardOutput(tool, tfmc::inspectCommand(cl));
    if (command == "bench") return tfmc::finishStandardOutput(tool, compilerVerb(command, cl));
    if (command == "average") return tfmc::finishStandardOutput(tool, tfmc::averageCommand(cl));
  } catch (const std::bad_alloc &) {
    std::cerr << "tfmc " << command << ": error: out of memory (a batch, length or vocabulary too large for this machine?)\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "tfmc " << command << ": internal error: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "tfmc: error: unknown command '" << command << "'\n\n" << kUsage;
  return 2;
}
