// `tfmc compile`: spec -> tfm IR -> verified -> artifact. The only TU of the CLI that sees MLIR.

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"

#include "CompilerCommands.h"
#include "Pipeline.h"
#include "spec/ModelSpec.h"
#include "tfmrt/files.h"
#include "tfmrt/runtime.h"

namespace tfmc {
namespace {

bool loadSpec(const std::string &path, ModelSpec &spec) {
  std::vector<SpecDiagnostic> diags;
  bool ok = path.empty()
                ? parseModelSpecText(embeddedDemoSpec(), "<embedded small.yaml>", spec, diags)
                : parseModelSpecFile(path, spec, diags);
  if (ok) return true;
  // MLIR (`--emit=mlir`, or tfm-opt's output) given back to compile: say so rather than report
  // YAML syntax errors in it.
  const bool mlirName = path.size() > 5 && path.compare(path.size() - 5, 5, ".mlir") == 0;
  if (mlirName) {
    std::cerr << path << ": error: tfmc compile takes a YAML model spec; this is MLIR (tfm-opt runs passes on it, "
              << "compiling it to an artifact is not supported: compile the spec it came from)\n";
    return false;
  }
  for (const SpecDiagnostic &d : diags) std::cerr << d.render();
  std::cerr << "tfmc: " << diags.size() << " error(s) in "
            << (path.empty() ? "<embedded small.yaml>" : path) << "; nothing written\n";
  return false;
}

// The fusion report: pass remarks printed as `spec:line:col: <pass>: <site>: <message>`, in
// pipeline order, so each candidate site points back to the spec that produced it.
void installReportHandler(mlir::MLIRContext &context, const PipelineOptions &options) {
  if (!options.report) return;
  context.getDiagEngine().registerHandler([](mlir::Diagnostic &diag) -> mlir::LogicalResult {
    if (diag.getSeverity() != mlir::DiagnosticSeverity::Remark) return mlir::failure();
    mlir::Location loc = diag.getLocation();
    if (auto named = llvm::dyn_cast<mlir::NameLoc>(loc)) loc = named.getChildLoc();
    std::string where;
    if (auto file = llvm::dyn_cast<mlir::FileLineColLoc>(loc))
      where = file.getFilename().str() + ":" + std::to_string(file.getLine()) + ":" +
              std::to_string(file.getColumn()) + ": ";
    std::cout << where << "fusion-report: " << diag.str() << "\n";
    return mlir::success();
  });
}

// In the working directory, named after the spec file (small2.yaml -> small2.tfmx): named after
// the spec's `name:`, a modified copy of a spec replaced the original's artifact.
std::string defaultOutputPath(const std::string &specPath, bool executable) {
  std::string stem = specPath.substr(specPath.find_last_of('/') + 1);  // npos + 1 == 0
  for (const char *ext : {".yaml", ".yml"})
    if (stem.size() > std::strlen(ext) && stem.compare(stem.size() - std::strlen(ext), std::string::npos, ext) == 0) {
      stem.resize(stem.size() - std::strlen(ext));
      break;
    }
  return executable ? stem : stem + ".tfmx";
}

// The program an emitted executable starts from: tfm-embedded, installed next to tfmc.
std::string executableTemplatePath() {
  return tfmrt::executablePath().empty() ? "tfm-embedded" : tfmrt::executableDir() + "/tfm-embedded";
}

// Writes tfm-embedded with the artifact appended (tfmrt::appendEmbeddedArtifact), mode 0755,
// through a temporary file so a failed write leaves no half program behind.
tfmrt::Status writeExecutable(const tfmrt::Artifact &artifact, const std::string &out, size_t &bytesWritten) {
  const std::string templatePath = executableTemplatePath();
  std::ifstream in(templatePath, std::ios::binary);
  if (!in)
    return tfmrt::notFound("cannot read the executable template '" + templatePath +
                           "' (it is built next to tfmc: build the tfm-embedded target)");
  std::vector<uint8_t> program((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<uint8_t> bytes;
  TFMRT_RETURN_IF_ERROR(tfmrt::serializeArtifact(artifact, bytes));
  tfmrt::appendEmbeddedArtifact(program, bytes);
  TFMRT_RETURN_IF_ERROR(tfmrt::writeFileBytes(out, "executable", program.data(), program.size(), /*executable=*/true));
  bytesWritten = program.size();
  return tfmrt::Status::OK();
}

uint64_t paramCount(const tfmrt::Artifact &artifact) {
  uint64_t n = 0;
  for (const auto &p : artifact.params) {
    uint64_t e = 1;
    for (int64_t d : p.shape) e *= d;
    n += e;
  }
  return n;
}

}  // namespace

bool compileSpecToArtifactFile(const std::string &specPath, const std::string &outPath,
                               const PipelineOptions &options, bool quiet, bool executable) {
  ModelSpec spec;
  if (!loadSpec(specPath, spec)) return false;
  mlir::MLIRContext context;
  tfmrt::Artifact artifact;
  installReportHandler(context, options);
  if (failed(compileModelSpec(spec, context, artifact, options))) {
    std::cerr << "tfmc: compilation failed; nothing written\n";
    return false;
  }
  // Static memory plan at the spec's compile shapes (the runtime plans any other shape the same
  // way when it first sees it).
  const auto &c = spec.compile;
  struct EntryPlan {
    std::string entry;
    tfmrt::MemoryPlanSummary memory;
    tfmrt::Status status;
  };
  std::vector<EntryPlan> plans;
  int64_t cacheBytesPerPosition = 0, cacheTensors = 0;  // decode_step's K/V cache, per hypothesis and position
  bool cacheBf16 = false;                                 // tfm-lower-kv-precision
  for (const auto &st : artifact.states)
    if (!tfmrt::isStaticState(st)) {
      cacheBytesPerPosition += st.shape.back() * int64_t(tfmrt::dtypeSize(st.dtype)), ++cacheTensors;
      cacheBf16 = cacheBf16 || st.dtype == tfmrt::DType::BF16;
    }
  for (const auto &fn : artifact.functions) {
    if (artifact.usesDynamicState(fn)) continue;  // planned per session (reported below)
    EntryPlan p{fn.name, {}, tfmrt::Status::OK()};
    std::vector<std::vector<int64_t>> shapes{{c.batch, c.src_len}, {c.batch, c.tgt_len}, {c.batch, c.tgt_len}};
    while (shapes.size() < fn.inputs.size()) shapes.push_back({});  // step (and weight, reset): scalars
    if (fn.name == "apply_update") shapes = {{}};
    if (fn.name == "encode") shapes = {{c.batch, c.src_len}};
    if (fn.name == "decode") shapes = {{c.batch, c.src_len}, {c.batch, c.src_len, spec.model.d_model}, {c.batch, c.tgt_len}};
    p.status = tfmrt::planArtifactMemory(artifact, fn.name, shapes, p.memory);
    plans.push_back(std::move(p));
  }
  std::string out = outPath.empty() ? defaultOutputPath(specPath, executable) : outPath;
  if (tfmrt::Status s = tfmrt::refuseOverwriting(out, "output", {specPath}); !s.ok()) {
    std::cerr << "tfmc: error: " << s.message() << "\n";
    return false;
  }
  size_t executableBytes = 0;
  tfmrt::Status status = executable ? writeExecutable(artifact, out, executableBytes) : tfmrt::writeArtifactFile(artifact, out);
  if (!status.ok()) {
    std::cerr << "tfmc: error: " << status.message() << "\n";
    return false;
  }
  if (executable && !quiet)
    std::printf("wrote the executable %s (%.1f MiB): translates standard input with the options of tfmc translate; "
                "run %s --help\n", out.c_str(), executableBytes / 1048576.0, out.c_str());
  if (!quiet) {
    size_t nodes = 0;
    for (const auto &fn : artifact.functions) nodes += fn.nodes.size();
    std::cout << "compiled " << (specPath.empty() ? "<embedded small.yaml>" : specPath) << " -> "
              << out << " (fusion: " << options.describe() << (options.bf16 ? ", precision bf16" : options.int8 ? ", precision int8" : "") << "): " << artifact.params.size() << " parameter tensors ("
              << paramCount(artifact) << " weights), " << artifact.functions.size()
              << " entry function(s), " << nodes << " kernel invocations\n";
    for (const EntryPlan &p : plans) {
      // `forward` keeps the historical wording; other entries are named.
      const std::string what = p.entry == "forward" ? "memory plan" : "memory plan of '" + p.entry + "'";
      if (p.status.ok())
        std::printf("%s at batch %lld x (src %lld + tgt %lld): peak activations %.2f MiB "
                    "in one arena (%.2f MiB without reuse, %lld buffers)\n",
                    what.c_str(), (long long)c.batch, (long long)c.src_len, (long long)c.tgt_len,
                    p.memory.arena_bytes / 1048576.0, p.memory.total_intermediate_bytes / 1048576.0,
                    (long long)p.memory.num_buffers);
      else
        std::cout << what << ": " << p.status.message() << "\n";
    }
    if (cacheBytesPerPosition > 0) {
      const int64_t rows = c.batch * spec.decoding.beam_size, steps = spec.model.max_len;
      std::printf("K/V cache of 'decode_step' (session state, %zu tensors%s): %lld bytes per hypothesis and position; "
                  "%.2f MiB at batch %lld x beam %lld x %lld positions\n",
                  size_t(cacheTensors), cacheBf16 ? ", bf16" : "", (long long)cacheBytesPerPosition,
                  double(cacheBytesPerPosition) * double(rows * steps) / 1048576.0, (long long)c.batch,
                  (long long)spec.decoding.beam_size, (long long)steps);
    }
  }
  return true;
}

bool readPipelineOptions(const char *cmd, const CommandLine &cl, PipelineOptions &options) {
  std::string error;
  if (!options.parseFusionList(cl.get("fusion", "all"), error)) {
    std::cerr << "tfmc " << cmd << ": error: --fusion: " << error << "\n";
    return false;
  }
  options.report = cl.has("fusion-report");
  const std::string precision = cl.get("precision", "f32");
  if (precision != "f32" && precision != "bf16" && precision != "int8") {
    std::cerr << "tfmc " << cmd << ": error: --precision: expected f32, bf16 or int8, got '" << precision << "'\n";
    return false;
  }
  if (precision != "f32" && !options.assignLayouts) {
    std::cerr << "tfmc " << cmd << ": error: --precision=" << precision << " needs the layouts pass (packed weights); "
              << "--fusion must include 'layouts'\n";
    return false;
  }
  options.bf16 = precision == "bf16";
  options.int8 = precision == "int8";
  options.printIrAfterAll = cl.has("print-ir-after-all");
  // --entries: `forward` is always built; `gradients` adds loss + parameter gradients,
  // `train_step` a compiled training step (forward, backward, Adam in place), `accumulate`
  // gradient accumulation (accumulate_gradients + apply_update, for train --update-freq).
  std::string entries = cl.get("entries", "forward");
  for (size_t start = 0; start <= entries.size();) {
    size_t end = entries.find(',', start);
    if (end == std::string::npos) end = entries.size();
    std::string name = entries.substr(start, end - start);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name == "gradients") {
      options.gradients = true;
    } else if (name == "train_step") {
      options.trainStep = true;
    } else if (name == "translate") {
      options.translate = true;
    } else if (name == "accumulate") {
      options.accumulate = true;
    } else if (name == "alignment") {
      options.alignment = true;
    } else if (name != "forward") {
      std::cerr << "tfmc " << cmd << ": error: --entries: unknown entry '" << name
                << "' (expected a comma list of forward, gradients, train_step, accumulate, translate, alignment)\n";
      return false;
    }
    start = end + 1;
  }
  if (options.alignment && !options.translate) {
    std::cerr << "tfmc " << cmd << ": error: --entries: 'alignment' adds word alignment to the translation entries; "
              << "it needs 'translate' too (--entries=forward,translate,alignment)\n";
    return false;
  }
  // Accumulation is the train_step's update split over batches; tfmc train runs train_step for
  // --update-freq 1, so an artifact without it trained only with --update-freq N > 1.
  if (options.accumulate && !options.trainStep) {
    std::cerr << "tfmc " << cmd << ": error: --entries: 'accumulate' adds gradient accumulation to the training step; "
              << "it needs 'train_step' too (--entries=forward,train_step,accumulate)\n";
    return false;
  }
  if (cl.has("alignment-layer")) {
    const long long layer = cl.getInt("alignment-layer", -1);
    if (!options.alignment) {
      std::cerr << "tfmc " << cmd << ": error: --alignment-layer needs --entries=...,translate,alignment\n";
      return false;
    }
    if (layer < 0 || layer > 1000000) {
      std::cerr << "tfmc " << cmd << ": error: --alignment-layer takes a decoder layer, 0 = the first; got '"
                << cl.get("alignment-layer") << "'\n";
      return false;
    }
    options.alignmentLayer = int(layer);  // checked against the spec's decoder layers when imported
  }
  return true;
}

int compileCommand(const CommandLine &cl) {
  auto unknown = cl.unknown(
      {"o", "emit", "quiet", "fusion", "fusion-report", "print-ir-after-all", "entries", "precision", "alignment-layer"});
  if (!unknown.empty()) {
    std::cerr << "tfmc compile: error: unknown option --" << unknown[0] << "\n";
    return 2;
  }
  if (cl.positionals.size() != 1) {
    std::cerr << "tfmc compile: error: expected exactly one spec file (tfmc compile <spec.yaml>)\n";
    return 2;
  }
  const std::string &specPath = cl.positionals[0];
  std::string emit = cl.get("emit", "artifact");
  PipelineOptions options;
  if (!readPipelineOptions("compile", cl, options)) return 2;
  if (emit == "mlir") {
    ModelSpec spec;
    if (!loadSpec(specPath, spec)) return 1;
    mlir::MLIRContext context;
    installReportHandler(context, options);
    auto module = buildModule(spec, context, options);
    if (!module) return 1;
    std::string out;
    llvm::raw_string_ostream os(out);
    // With locations: the passes find attention and FFN sites by their names (NameLoc), so
    // without them `tfm-opt` on this output merged and fused nothing, and said nothing.
    mlir::OpPrintingFlags flags;
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
    module->print(os, flags);
    out += "\n";
    // -o names a file (it was ignored: the IR went to standard output and nothing was written).
    if (!cl.has("o")) {
      std::cout << out;
      return 0;
    }
    if (tfmrt::Status s = tfmrt::refuseOverwriting(cl.get("o"), "-o file", {specPath}); !s.ok()) {
      std::cerr << "tfmc compile: error: " << s.message() << "\n";
      return 2;
    }
    if (tfmrt::Status s = tfmrt::writeFileBytes(cl.get("o"), "the IR", out.data(), out.size()); !s.ok()) {
      std::cerr << "tfmc compile: error: " << s.message() << "\n";
      return 1;
    }
    return 0;
  }
  if (emit != "artifact" && emit != "executable") {
    std::cerr << "tfmc compile: error: --emit must be 'artifact', 'executable' or 'mlir', got '" << emit << "'\n";
    return 2;
  }
  if (emit == "executable" && !options.translate) {
    std::cerr << "tfmc compile: error: --emit=executable writes a translation program: add translate to --entries "
                 "(e.g. --entries=forward,translate)\n";
    return 2;
  }
  return compileSpecToArtifactFile(specPath, cl.get("o"), options, cl.has("quiet"), emit == "executable") ? 0 : 1;
}

}  // namespace tfmc
