// tfmc demo: compile a spec (the embedded small model by default) and run it on a sample batch.
#include <iostream>

#include "CompilerCommands.h"
#include "Pipeline.h"
#include "RunSupport.h"

namespace tfmc {

int demoCommand(const CommandLine &cl) {
  RunSettings rs;
  if (!readRunSettings("demo", cl, rs, {"o", "fusion", "fusion-report", "print-ir-after-all", "precision"}))
    return 2;
  if (cl.positionals.size() > 1) {
    std::cerr << "tfmc demo: error: expected at most one spec file\n";
    return 2;
  }
  std::string spec = cl.positionals.empty() ? "" : cl.positionals[0];
  rs.artifactPath = cl.get("o", "demo.tfmx");
  rs.specPath = spec;
  if (!cl.has("iters")) rs.iters = 4;
  PipelineOptions pipeline;
  if (!readPipelineOptions("demo", cl, pipeline)) return 2;
  if (!compileSpecToArtifactFile(spec, rs.artifactPath, pipeline, false)) return 1;
  return runForward("demo", rs);
}

}  // namespace tfmc
