#include "golden_util.h"

#include <cmath>

#include <gtest/gtest.h>

namespace tfmc::test {

void PrintTo(const GoldenCase &c, std::ostream *os) {
  *os << c.spec << (c.backend == tfmrt::KernelBackend::Reference ? "/reference" : "/dnnl") << "/fusion=" << c.fusion;
}

std::string goldenCaseName(const testing::TestParamInfo<GoldenCase> &info) {
  std::string name = info.param.spec;
  for (char &c : name)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return name + (info.param.backend == tfmrt::KernelBackend::Reference ? "_reference" : "_dnnl") + "_fusion_" +
         info.param.fusion;
}

std::vector<GoldenCase> allGoldenCases() {
  std::vector<GoldenCase> cases;
  for (const char *spec : {"tiny", "tiny-prenorm"})
    for (auto backend : {tfmrt::KernelBackend::Dnnl, tfmrt::KernelBackend::Reference})
      for (const char *fusion : {"all", "none"}) cases.push_back({spec, backend, fusion});
  return cases;
}

bool parseSpec(const std::string &spec, tfmc::ModelSpec &parsed) {
  std::vector<tfmc::SpecDiagnostic> diags;
  if (!tfmc::parseModelSpecFile(kSource + "/models/" + spec + ".yaml", parsed, diags)) {
    ADD_FAILURE() << "spec does not parse: " << (diags.empty() ? "" : diags[0].render());
    return false;
  }
  return true;
}

std::unique_ptr<tfmrt::Model> compileAndLoad(const tfmc::ModelSpec &spec, tfmrt::KernelBackend backend,
                                             const tfmc::PipelineOptions &pipeline) {
  mlir::MLIRContext context;
  tfmrt::Artifact artifact;
  if (failed(tfmc::compileModelSpec(spec, context, artifact, pipeline))) {
    ADD_FAILURE() << "compilation failed";
    return nullptr;
  }
  tfmrt::RuntimeOptions options;
  options.backend = backend;
  std::unique_ptr<tfmrt::Model> model;
  tfmrt::Status status = tfmrt::Model::fromArtifact(std::move(artifact), options, model);
  EXPECT_TRUE(status.ok()) << status.message();
  return model;
}

std::unique_ptr<tfmrt::Model> compileAndLoad(const std::string &spec, tfmrt::KernelBackend backend,
                                             const char *fusion, bool gradients, bool trainStep, bool translate) {
  tfmc::ModelSpec parsed;
  if (!parseSpec(spec, parsed)) return nullptr;
  tfmc::PipelineOptions pipeline;
  std::string error;
  if (!pipeline.parseFusionList(fusion, error)) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  pipeline.gradients = gradients;
  pipeline.trainStep = trainStep;
  pipeline.translate = translate;
  return compileAndLoad(parsed, backend, pipeline);
}

void expectClose(const tfmrt::Tensor &actual, const tfmrt::Tensor &expected, double rtol, double atol,
                 const std::string &what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  const float *a = actual.data<float>();
  const float *e = expected.data<float>();
  double worst = 0;
  int64_t worstAt = -1;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double excess = std::abs(double(a[i]) - e[i]) - (rtol * std::abs(double(e[i])) + atol);
    if (!(excess <= 0) && (worstAt < 0 || excess > worst)) {
      worst = excess;
      worstAt = i;
    }
  }
  EXPECT_LT(worstAt, 0) << what << ": element " << worstAt << " is " << (worstAt >= 0 ? a[worstAt] : 0)
                        << ", expected " << (worstAt >= 0 ? e[worstAt] : 0);
}

}  // namespace tfmc::test
