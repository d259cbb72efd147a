// Command-line parsing shared by tfmc and emitted executables: every command's options are declared
// once (commandOptions below) and parsed by CLI11, which gives each command --help, rejects unknown
// options and validates numbers before the command runs.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "Commands.h"

namespace tfmc {
namespace {

enum class Kind { Flag, Text, Int, Number, TextList };  // TextList: may be repeated, every value kept

struct OptionSpec {
  const char *name;  // without dashes; "o" is the short option -o
  Kind kind;
  const char *help;
  const char *shortName = nullptr;  // a one-letter alias (-x) of a long option
  bool hidden = false;              // Kind::Text; parsed for the command to refuse with a hint, not in --help
};

struct CommandSpec {
  const char *name;
  const char *positional;  // "" if none
  const char *positionalHelp;
  const char *description;
  std::vector<OptionSpec> options;
};

std::vector<OptionSpec> runOptions() {
  return {
      {"weights", Kind::Text, "weights (.safetensors) instead of a seeded initialisation"},
      {"seed", Kind::Int, "initialisation seed (default 1)"},
      {"inputs", Kind::Text, "input batch (.safetensors) instead of the built-in sample batch"},
      {"batch", Kind::Int, "sample batch size (default: the spec's compile: shapes)"},
      {"src-len", Kind::Int, "sample source length (default: the spec's)"},
      {"tgt-len", Kind::Int, "sample target length (default: the spec's)"},
      {"kernels", Kind::Text, "dnnl (default: oneDNN and our fast CPU kernels) or reference"},
      {"iters", Kind::Int, "calls of the entry (default 1; with more, the first warms up and the rest are timed)"},
      {"output", Kind::Text, "write the outputs (.safetensors)"},
      {"save-weights", Kind::Text, "write the weights (.safetensors)"},
      {"threads", Kind::Int, "OpenMP threads (0 = all cores; at most 1024)"},
      {"profile", Kind::Flag, "print time per kernel"},
      {"entry", Kind::Text, "forward (default) or gradients"},
  };
}

std::vector<OptionSpec> pipelineOptions() {
  return {
      {"fusion", Kind::Text, "all (default), none, or a comma list of merge-projections, attention, epilogues, layouts"},
      {"fusion-report", Kind::Flag, "list every fusion site, fused or not and why, and each pass --fusion left out"},
      {"print-ir-after-all", Kind::Flag, "print the IR after every pass"},
      {"precision", Kind::Text, "f32 (default), bf16 (bf16 GEMM operands with f32 accumulation, weights and weight gradients) or int8 (int8 GEMMs in inference entries)"},
  };
}

using Options = std::vector<OptionSpec>;
Options concat(std::initializer_list<Options> lists) {
  Options out;
  for (const Options &l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}
// `options` less those named (train has no use for run's --output).
Options without(Options options, std::initializer_list<std::string> names) {
  options.erase(std::remove_if(options.begin(), options.end(),
                               [&](const OptionSpec &o) { return std::find(names.begin(), names.end(), o.name) != names.end(); }),
                options.end());
  return options;
}

std::vector<CommandSpec> commandSpecs() {
  return {
      {"compile", "spec", "model spec (.yaml)", "Compile a model spec to an artifact (or an executable, or print the IR).",
       concat({Options{{"o", Kind::Text, "output path (default: the spec file's name with .tfmx, or without it for an executable, in the working directory)"},
                       {"emit", Kind::Text, "artifact (default), executable (a translation program), or mlir"},
                       {"entries", Kind::Text, "comma list of forward, gradients, train_step, accumulate, translate, alignment (with translate: word alignment)"},
                       {"alignment-layer", Kind::Int, "with the alignment entry: the decoder layer (0 = the first) whose cross-attention gives it (default: the last)"},
                       {"quiet", Kind::Flag, "print nothing on success"}},
               pipelineOptions()})},
      {"run", "model", "compiled artifact (.tfmx)", "Run the forward (or gradients) entry: loss and tokens/s.", runOptions()},
      {"demo", "spec", "model spec (default: the embedded small model)",
       "Compile a spec, initialise weights from a seed and run the forward pass on a sample batch.",
       concat({without(runOptions(), {"entry", "iters"}),
               Options{{"iters", Kind::Int, "calls of the forward entry (default 4: the first warms up)"},
                       {"o", Kind::Text, "artifact path (default demo.tfmx)"}},
               pipelineOptions()})},
      {"train", "model", "artifact compiled with --entries=forward,train_step",
       "Run compiled training steps on a corpus (--data) or one batch, with checkpoints and exact resume.",
       concat({without(runOptions(), {"output", "iters", "entry"}),
               Options{{"iters", Kind::Text, "", nullptr, true},  // refused: "use --steps"
                       {"entry", Kind::Text, "", nullptr, true},
                       {"steps", Kind::Int, "steps to run (with --resume: N more; default: to the spec's training.max_steps on --data, else 20)"},
               {"update-freq", Kind::Int, "accumulate the gradients of N batches per step (needs --entries=...,accumulate)"},
               {"lr", Kind::Number, "peak learning rate, reached at the end of warm-up (sets the schedule's lr_scale to lr * sqrt(d_model * warmup_steps); default: the spec's)"},
               {"lr-scale", Kind::Number, "the schedule's lr_scale instead of --lr: lr = lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5) (default: the spec's)"},
               {"warmup-steps", Kind::Int, "steps of linear warm-up before the inverse-square-root decay (default: the spec's)"},
               {"clip-norm", Kind::Number, "clip the gradients to this global norm (default: the spec's training.clip_norm, which must be > 0 to compile clipping in)"},
               {"weight-decay", Kind::Number, "decoupled (AdamW) weight decay in [0, 1) (default: the spec's)"},
               {"adam-betas", Kind::Text, "Adam's beta1,beta2, e.g. 0.9,0.98 (fairseq's '(0.9, 0.98)' too; default: the spec's)"},
               {"adam-eps", Kind::Number, "Adam's epsilon (default: the spec's)"},
               {"label-smoothing", Kind::Number, "label smoothing of the training and validation loss, in [0, 1) (default: the spec's)"},
               {"dropout", Kind::Number, "dropout rate on residual branches and embeddings, in [0, 1) (default: the spec's model.dropout, which must be > 0 to compile it in; 0 is accepted either way)"},
               {"attention-dropout", Kind::Number, "dropout rate on the attention probabilities, in [0, 1) (default: the spec's model.attention_dropout, which must be > 0 to compile it in; 0 is accepted either way)"},
               {"activation-dropout", Kind::Number, "dropout rate inside the FFN, after the activation, in [0, 1) (default: the spec's model.activation_dropout, which must be > 0 to compile it in; 0 is accepted either way)"},
               {"first-step", Kind::Int, "number of the first step (default 1)"},
               {"log-every", Kind::Int, "log every N steps (default: a tenth of the steps; the first and last step always)"},
               {"checkpoint", Kind::Text, "checkpoint path (written atomically)"},
               {"checkpoint-every", Kind::Int, "checkpoint every N steps (and at the end; default 0: at the end, or on SIGINT/SIGTERM)"},
               {"resume", Kind::Text, "continue from a checkpoint (and save to it, unless --checkpoint or --save-dir)"},
               {"data", Kind::Text, "parallel corpus directory (<dir>/train.<lang>.gz or plain <dir>/train.<lang>)"},
               {"src", Kind::Text, "source language (default de)"},
               {"tgt", Kind::Text, "target language (default en)"},
               {"tokenizer", Kind::Text, "SentencePiece model of both languages (a joint vocabulary)"},
               {"src-tokenizer", Kind::Text, "with --tgt-tokenizer, instead of --tokenizer: the source language's model (separate vocabularies)"},
               {"tgt-tokenizer", Kind::Text, "the target language's model (with --src-tokenizer)"},
               {"batch-tokens", Kind::Int, "tokens per batch (default: the spec's training.batch_tokens)"},
               {"valid-split", Kind::Text, "validation split (default val) or none"},
               {"eval-every", Kind::Int, "validation loss every N steps (default 0: once, at the end)"},
               {"metrics", Kind::Text, "append one JSON line per log line and validation (step, epoch, lr, loss, ...)"},
               {"save-dir", Kind::Text, "write checkpoint_last, checkpoint_best (best validation) and checkpoint_<step> here"},
               {"keep-last", Kind::Int, "keep the last N checkpoint_<step> files in --save-dir (default 0: all)"},
               {"patience", Kind::Int, "stop after N validations without a new best (default 0: never)"},
               {"max-epochs", Kind::Int, "stop with the step that completes epoch N (with --data; with --update-freq or ranks that step may reach into the next; with --steps or max_steps, whichever comes first)"},
               {"quiet", Kind::Flag, "print nothing on standard output (errors, warnings and notices still go to standard error)"},
               {"time-limit", Kind::Text, "stop after the first step that ends past this much training time in this run: 3600, 90s, 45m, 2.5h (saved as at the end, if --checkpoint or --save-dir)"},
               {"valid-bleu", Kind::Flag, "also score greedy BLEU on the validation split (needs the translate entries)"},
               {"skip-nonfinite", Kind::Flag,
                "skip (do not apply) a step whose loss or gradient is not finite, counted in the log; "
                "stop after 10 in a row (needs --entries=...,accumulate)"},
               {"check-weights-every", Kind::Int,
                "under mpirun: compare the weights of all ranks every N steps (default 100; 0 = only at the end)"}}})},
      {"tokenizer", "", "", "Train one SentencePiece vocabulary over the languages of --langs (both: a joint vocabulary; one: that side's, for --src-tokenizer / --tgt-tokenizer).",
       {{"data", Kind::Text, "corpus directory"},
        {"langs", Kind::Text, "comma list of languages (default de,en; one language for a separate vocabulary)"},
        {"split", Kind::Text, "split to train on (default train)"},
        {"vocab", Kind::Int, "vocabulary size (default 8000)"},
        {"o", Kind::Text, "output model path (required)"}}},
      {"translate", "model", "artifact compiled with --entries=forward,translate (one per ensemble member, or one for all)",
       "Translate with a K/V cache: encode once per batch, one decode_step per output token.",
       {{"weights", Kind::TextList, "weights (.safetensors); repeated: an ensemble"},
        {"checkpoint", Kind::TextList, "training checkpoint to take the weights from; repeated: an ensemble"},
        {"ensemble-weights", Kind::Text,
         "comma list, one positive weight per ensemble member (default: equal; normalised to sum 1)"},
        {"tokenizer", Kind::Text, "SentencePiece model of both languages (a joint vocabulary)"},
        {"src-tokenizer", Kind::Text, "with --tgt-tokenizer, instead of --tokenizer: the source language's model (separate vocabularies)"},
        {"tgt-tokenizer", Kind::Text, "the target language's model (with --src-tokenizer): outputs, references and target prefixes"},
        {"input", Kind::Text, "source sentences, one per line (- = standard input, streamed)"},
        {"reference", Kind::Text, "references: print corpus BLEU"},
        {"data", Kind::Text, "corpus directory (with --split, --src, --tgt)"},
        {"split", Kind::Text, "split of --data (default test_2016_flickr)"},
        {"src", Kind::Text, "source language (default de)"},
        {"tgt", Kind::Text, "target language (default en)"},
        {"beam", Kind::Int, "beam size (1 = greedy; default: the spec's decoding.beam_size)"},
        {"length-penalty", Kind::Number, "GNMT length penalty alpha (default: the spec's)"},
        {"n-best", Kind::Int, "print the N best hypotheses as 'index ||| text ||| score' (score: log-probability / GNMT length penalty)"},
        {"word-scores", Kind::Flag,
         "also print each output piece's log-probability, then </s>'s (n-best lines get a fourth field; "
         "with --score-reference, after the line's score)"},
        {"min-length", Kind::Int, "no </s> before N output tokens (default 0)"},
        {"no-repeat-ngram-size", Kind::Int, "never repeat an n-gram of this size in an output (default 0: off)"},
        {"max-length-ratio", Kind::Number, "output length limit: ratio x source tokens + offset (default: the spec's)"},
        {"max-length-offset", Kind::Int, "the limit's offset (default: the spec's)"},
        {"batch", Kind::Int, "sentences decoded together (refilled as they finish; default 128 / beam, rounded up)"},
        {"max-batch-tokens", Kind::Int, "source tokens in flight (sentences x longest; default 0: no limit)"},
        {"output", Kind::Text, "write translations here (default standard output; with --data, only the scores and three samples are printed without it)", "o"},
        {"output-format", Kind::Text, "text (default), pieces or ids"},
        {"input-format", Kind::Text,
         "text (default), or already tokenized: pieces or ids (space-separated, as --output-format writes them; "
         "also --target-prefix and --reference with --score-reference)"},
        {"max-sentences", Kind::Int, "translate only the first N sentences"},
        {"alignment", Kind::Text,
         "hard or soft: append ' ||| ' and the word alignment (the cross-attention of the decoder layer chosen at compile time, the last by default; positions of "
         "pieces, </s> last): hard 'src-out' pairs, soft per output piece its weights (needs an artifact compiled "
         "with --entries=...,translate,alignment)"},
        {"no-cache", Kind::Flag, "recompute the whole prefix every step (the reference decoder)"},
        {"target-prefix", Kind::Text,
         "file: per source line, the start its translation must have (forced, then searched; empty line: none; with --input file or --data)"},
        {"tsv", Kind::Flag,
         "input lines are 'source<TAB>target prefix' (no tab: no prefix), as Marian's --tsv: each prefix starts its "
         "line's translation; with --input file or - (streamed)"},
        {"score-reference", Kind::Flag,
         "score the references instead of translating: per line, their log-probability (natural log, </s> "
         "included); with --data or --reference"},
        {"sample", Kind::Flag, "sample tokens instead of searching (default beam 1; beam K: K independent samples)"},
        {"top-k", Kind::Int, "sample among the K most likely tokens (default 0: all)"},
        {"top-p", Kind::Number, "sample from the smallest set with probability >= P (default 1: all)"},
        {"temperature", Kind::Number, "sampling temperature (default 1)"},
        {"seed", Kind::Int, "sampling seed (default 0)"},
        {"kernels", Kind::Text, "dnnl (default) or reference"},
        {"threads", Kind::Int, "OpenMP threads (0 = all cores; at most 1024); with --workers N, per worker (0 = the cores / N)"},
        {"workers", Kind::Int,
         "translators on their own threads, taking blocks of sentences from one queue (default 0: one per core, at "
         "most 8, each on one thread; 1 with --threads N or --profile); --threads, --batch and --max-batch-tokens then apply per "
         "worker (threads default to the cores / N)"},
        {"profile", Kind::Flag, "print the work done, time per phase (encode, decoder calls, search) and per kernel"},
        {"quiet", Kind::Flag, "print no 'weights from', progress or summary lines, nor --data's sample translations (errors, warnings and BLEU still)"}}},
      {"inspect", "model", "compiled artifact (.tfmx), checkpoint or weights (.safetensors)",
       "Validate an artifact, a checkpoint or a weights file and summarise it.", {}},
      {"average", "files", "the artifact, then the checkpoints to average",
       "Average the parameters of checkpoints of one model (e.g. the last N) into a new checkpoint.",
       {{"o", Kind::Text, "output checkpoint (required)"}}},
      {"bench", "spec", "model spec (.yaml)", "Run the spec fused and unfused (or bf16 and f32) side by side: tokens/s and their ratio.",
       {{"batch", Kind::Int, "batch size (default: the spec's compile: shapes)"},
        {"src-len", Kind::Int, "source length"},
        {"tgt-len", Kind::Int, "target length"},
        {"rounds", Kind::Int, "alternating rounds (default 3)"},
        {"iters", Kind::Int, "calls per round (default 3)"},
        {"threads", Kind::Int, "OpenMP threads (0 = all cores; at most 1024)"},
        {"seed", Kind::Int, "weights and inputs seed (default 1)"},
        {"peak-gflops", Kind::Number, "machine peak for the utilisation column"},
        {"precision", Kind::Text, "f32 (default: the fused build vs the unfused one), bf16 or int8 (the fused build in bf16 or int8 vs it in f32)"}}},
  };
}

std::string checkInt(std::string &v) {
  char *end = nullptr;
  errno = 0;
  std::strtoll(v.c_str(), &end, 10);
  if (!v.empty() && *end == '\0' && errno == ERANGE)
    return "'" + v + "' is out of range (integers from " + std::to_string(INT64_MIN) + " to " + std::to_string(INT64_MAX) + ")";
  if (v.empty() || *end != '\0') return "expects an integer, got '" + v + "'";
  return "";
}

std::string checkNumber(std::string &v) {
  char *end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x)) return "expects a number, got '" + v + "'";
  return "";
}

}  // namespace

bool CommandLine::has(const std::string &name) const {
  for (auto &f : flags)
    if (f.first == name) return true;
  return false;
}

std::string CommandLine::get(const std::string &name, const std::string &fallback) const {
  for (auto &f : flags)
    if (f.first == name) return f.second;
  return fallback;
}

std::vector<std::string> CommandLine::getAll(const std::string &name) const {
  std::vector<std::string> values;
  for (auto &f : flags)
    if (f.first == name) values.push_back(f.second);
  return values;
}

// Values were validated when parsed (checkInt / checkNumber), so conversions cannot fail here.
long long CommandLine::getInt(const std::string &name, long long fallback) const {
  return has(name) ? std::strtoll(get(name).c_str(), nullptr, 10) : fallback;
}

double CommandLine::getDouble(const std::string &name, double fallback) const {
  return has(name) ? std::strtod(get(name).c_str(), nullptr) : fallback;
}

std::vector<std::string> CommandLine::unknown(const std::vector<std::string> &known) const {
  std::vector<std::string> out;
  for (auto &f : flags) {
    bool ok = false;
    for (auto &k : known) ok |= (k == f.first);
    if (!ok) out.push_back(f.first);
  }
  return out;
}

bool isCommand(const std::string &command) {
  for (const CommandSpec &c : commandSpecs())
    if (command == c.name) return true;
  return false;
}

namespace {
std::string &translateProgramName() {
  static std::string name;
  return name;
}
}  // namespace

std::string commandName(const char *cmd) {
  if (!std::strcmp(cmd, "translate") && !translateProgramName().empty()) return translateProgramName();
  return std::string("tfmc ") + cmd;
}
void setTranslateProgramName(const std::string &name) { translateProgramName() = name; }
bool translateProgramNamed() { return !translateProgramName().empty(); }

int finishStandardOutput(const std::string &tool, int code) {
  std::cout.flush();
  errno = 0;  // a reason only from this flush (an earlier failed write left only the error flag)
  if (std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout.good()) return code;
  if (code) return code;  // the command reported its own error (a failed write, perhaps this one)
  const int e = errno;
  std::fprintf(stderr, "%s: error: cannot write standard output%s%s\n", tool.c_str(), e ? ": " : "", e ? std::strerror(e) : "");
  return code ? code : 1;
}

bool parseCommandLine(const std::string &tool, const std::string &command, int argc, char **argv, int first,
                      CommandLine &cl, int &exitCode) {
  const std::vector<CommandSpec> specs = commandSpecs();
  const CommandSpec *spec = nullptr;
  for (const CommandSpec &c : specs)
    if (command == c.name) spec = &c;
  if (!spec) {
    std::cerr << tool << ": error: unknown command '" << command << "'\n";
    exitCode = 2;
    return false;
  }
  CLI::App app(spec->description, tool + (tool == "tfmc" ? " " + command : std::string()));
  app.set_version_flag("--version", kVersion);
  std::vector<std::pair<std::string, CLI::Option *>> options;
  for (const OptionSpec &o : spec->options) {
    std::string flag = std::string(o.name).size() == 1 ? std::string("-") + o.name : std::string("--") + o.name;
    if (o.shortName) flag = std::string("-") + o.shortName + "," + flag;
    CLI::Option *opt = o.kind == Kind::Flag ? app.add_flag(flag, o.help) : app.add_option(flag, o.help);
    if (o.kind != Kind::Flag)
      opt->type_size(1)->multi_option_policy(o.kind == Kind::TextList ? CLI::MultiOptionPolicy::TakeAll
                                                                       : CLI::MultiOptionPolicy::TakeLast);
    if (o.kind == Kind::Int) opt->check(CLI::Validator(checkInt, ""))->type_name("INT");
    if (o.kind == Kind::Number) opt->check(CLI::Validator(checkNumber, ""))->type_name("NUMBER");
    if (o.kind == Kind::Text || o.kind == Kind::TextList) opt->type_name("TEXT");
    // Out of --help; any value or none (CLI11 names no option in the errors of a hidden one: the
    // command refuses it with its own message).
    if (o.hidden) opt->group("")->expected(0, 1);
    options.push_back({o.name, opt});
  }
  std::vector<std::string> positionals;
  if (*spec->positional) app.add_option(spec->positional, positionals, spec->positionalHelp);
  // `--name=` is an explicit empty value; CLI11 would take the next argument instead.
  std::vector<std::string> storage;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 3 && a.rfind("--", 0) == 0 && a.back() == '=' && a.find('=') == a.size() - 1) {
      storage.push_back(a.substr(0, a.size() - 1));
      storage.push_back("");
    } else {
      storage.push_back(a);
    }
  }
  std::vector<const char *> args{argv[0]};
  for (const std::string &a : storage) args.push_back(a.c_str());
  try {
    app.parse(int(args.size()), args.data());
  } catch (const CLI::CallForHelp &) {
    std::cout << app.help();
    exitCode = 0;
    return false;
  } catch (const CLI::CallForVersion &) {
    std::cout << tool << " " << kVersion << "\n";
    exitCode = 0;
    return false;
  } catch (const CLI::ParseError &e) {
    std::cerr << app.get_name() << ": error: " << e.what() << "\n(" << app.get_name() << " --help lists the options)\n";
    exitCode = 2;
    return false;
  }
  // A value given twice is a mistake to point out, not one to settle by taking the last (--beam 2
  // ... --beam 3 translated with 3, silently); --weights and --checkpoint repeat for ensembles.
  for (auto &[name, opt] : options)
    if (opt->get_expected_min() > 0 && opt->get_multi_option_policy() != CLI::MultiOptionPolicy::TakeAll &&
        opt->results().size() > 1) {
      std::cerr << app.get_name() << ": error: " << opt->get_name() << " is given " << opt->results().size()
                << " times ('" << opt->results()[0] << "', then '" << opt->results()[1] << "'): give it once\n";
      exitCode = 2;
      return false;
    }
  for (auto &[name, opt] : options) {
    if (opt->count() == 0) continue;
    if (opt->get_expected_min() == 0) cl.flags.push_back({name, std::string()});  // flags; hidden options' values unused
    else if (opt->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll)
      for (const std::string &value : opt->results()) cl.flags.push_back({name, value});
    else cl.flags.push_back({name, opt->results().back()});
  }
  // An empty value or argument (`-o ""`, `--output=`, an unset shell variable) is an error, not a
  // silent fallback to a default path: `compile spec.yaml -o ""` overwrote ./<name>.tfmx.
  auto refuseEmpty = [&](const std::string &what) {
    std::cerr << app.get_name() << ": error: " << what << " is empty\n(" << app.get_name() << " --help lists the options)\n";
    exitCode = 2;
    return false;
  };
  for (const auto &[name, value] : cl.flags) {
    bool takesValue = false;
    for (const OptionSpec &o : spec->options)
      takesValue = takesValue || (name == o.name && o.kind != Kind::Flag && !o.hidden);
    if (takesValue && value.empty()) return refuseEmpty((name.size() == 1 ? "the value of -" : "the value of --") + name);
  }
  for (const std::string &p : positionals)
    if (p.empty()) return refuseEmpty("an argument");
  cl.positionals = positionals;
  return true;
}

}  // namespace tfmc
