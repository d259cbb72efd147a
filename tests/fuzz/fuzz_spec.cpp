// Model spec text through the YAML parser and the spec checks (tfmc::parseModelSpecText): any
// text is parsed into a spec or refused with located, renderable diagnostics, never a crash,
// abort or hang. The fast one of the three spec targets: fuzz_spec_import adds the importer,
// fuzz_spec_pipeline every pass and the lowering.
#include <string>
#include <vector>

#include "FuzzTarget.h"
#include "spec/ModelSpec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  tfmc::ModelSpec spec;
  std::vector<tfmc::SpecDiagnostic> diags;
  const bool ok = tfmc::parseModelSpecText(text, "fuzz.yaml", spec, diags);
  FUZZ_CHECK(ok || !diags.empty());
  for (const auto &d : diags) FUZZ_CHECK(d.render().find("fuzz.yaml") != std::string::npos);
  return 0;
}
