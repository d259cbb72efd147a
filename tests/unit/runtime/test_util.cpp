#include "test_util.h"

#include "shape_inference.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>

#include <unistd.h>

namespace tfmrt::test {

FunctionBuilder::FunctionBuilder(Artifact &artifact, std::string name) : artifact_(artifact) {
  fn_.name = std::move(name);
}

uint32_t FunctionBuilder::addValue(std::string name, ValueKind kind, DType dtype, Shape shape, uint32_t index) {
  ValueInfo v;
  v.name = std::move(name);
  v.kind = kind;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.index = index;
  fn_.values.push_back(std::move(v));
  return uint32_t(fn_.values.size() - 1);
}

uint32_t FunctionBuilder::input(const std::string &name, DType dtype, Shape shape) {
  uint32_t id = addValue(name, ValueKind::Input, dtype, std::move(shape), 0);
  fn_.inputs.push_back(id);
  return id;
}

uint32_t FunctionBuilder::state(const std::string &name, Shape shape, DType dtype) {
  uint32_t index = 0;
  while (index < artifact_.states.size() && artifact_.states[index].name != name) ++index;
  if (index == artifact_.states.size()) artifact_.states.push_back({name, dtype, shape});
  return addValue(name, ValueKind::State, dtype, std::move(shape), index);
}

void FunctionBuilder::inPlace(const std::string &op, std::vector<uint32_t> operands, uint32_t stateValue, Attrs attrs) {
  Node n;
  n.op = op;
  n.inputs = std::move(operands);
  n.outputs = {stateValue};
  n.attrs = std::move(attrs);
  n.loc = "test.yaml:" + std::to_string(fn_.nodes.size() + 1) + ":3";
  fn_.nodes.push_back(std::move(n));
}

uint32_t FunctionBuilder::param(const std::string &name, Shape shape, ParamInit init) {
  auto it = paramValues_.find(name);
  if (it != paramValues_.end()) return it->second;
  int64_t index = artifact_.findParam(name);
  if (index < 0) {
    ParamInfo p;
    p.name = name;
    p.shape = shape;
    p.init = init;
    artifact_.params.push_back(p);
    index = int64_t(artifact_.params.size() - 1);
  }
  uint32_t id = addValue(name, ValueKind::Parameter, DType::F32, std::move(shape), uint32_t(index));
  paramValues_[name] = id;
  return id;
}

uint32_t FunctionBuilder::constant(const std::string &name, const Tensor &data) {
  Constant c;
  c.name = name;
  c.dtype = data.dtype;
  c.shape = data.shape;
  c.data.resize(data.nbytes());
  if (data.nbytes()) std::memcpy(c.data.data(), data.rawData(), data.nbytes());
  artifact_.constants.push_back(std::move(c));
  return addValue(name, ValueKind::Constant, data.dtype, data.shape, uint32_t(artifact_.constants.size() - 1));
}

uint32_t FunctionBuilder::op(const std::string &op, std::vector<uint32_t> operands, DType dtype, Shape shape,
                             Attrs attrs) {
  Node n;
  n.op = op;
  n.inputs = std::move(operands);
  n.attrs = std::move(attrs);
  n.loc = "test.yaml:" + std::to_string(fn_.nodes.size() + 1) + ":3";
  uint32_t id = addValue("%" + std::to_string(fn_.values.size()), ValueKind::Intermediate, dtype, std::move(shape), 0);
  n.outputs = {id};
  fn_.nodes.push_back(std::move(n));
  return id;
}

void FunctionBuilder::finish() { artifact_.functions.push_back(fn_); }

Tensor randomF32(const Shape &shape, uint64_t seed, float lo, float hi) {
  Tensor t(DType::F32, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor randomIds(const Shape &shape, int32_t lo, int32_t hi, uint64_t seed) {
  Tensor t(DType::I32, shape);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi - 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int32_t>()[i] = dist(rng);
  return t;
}

Tensor sinusoidTable(int64_t rows, int64_t dim) {
  Tensor t(DType::F32, {rows, dim});
  for (int64_t p = 0; p < rows; ++p)
    for (int64_t i = 0; i < dim; ++i) {
      double angle = double(p) / std::pow(10000.0, double(2 * (i / 2)) / double(dim));
      t.data<float>()[p * dim + i] = float(i % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  return t;
}

::testing::AssertionResult allClose(const Tensor &a, const Tensor &b, double atol, double rtol) {
  if (a.dtype != b.dtype || a.shape != b.shape)
    return ::testing::AssertionFailure() << "got " << a.describe() << ", expected " << b.describe();
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x, y;
    switch (a.dtype) {
    case DType::F32: x = a.data<float>()[i], y = b.data<float>()[i]; break;
    case DType::I32: x = a.data<int32_t>()[i], y = b.data<int32_t>()[i]; break;
    case DType::BF16: x = bf16ToFloat(a.data<uint16_t>()[i]), y = bf16ToFloat(b.data<uint16_t>()[i]); break;
    default: x = a.data<uint8_t>()[i], y = b.data<uint8_t>()[i]; break;
    }
    double err = std::fabs(x - y);
    bool ok = err <= atol + rtol * std::fabs(y) || (std::isinf(x) && x == y);
    if (!ok) {
      if (first < 0) first = i;
      ++bad;
      if (!(err <= worst)) worst = err;
    }
  }
  if (!bad) return ::testing::AssertionSuccess();
  auto f = [&](const Tensor &t) {
    switch (t.dtype) {
    case DType::F32: return double(t.data<float>()[first]);
    case DType::I32: return double(t.data<int32_t>()[first]);
    case DType::BF16: return double(bf16ToFloat(t.data<uint16_t>()[first]));
    default: return double(t.data<uint8_t>()[first]);
    }
  };
  return ::testing::AssertionFailure() << bad << " of " << a.numel() << " elements differ (worst abs err " << worst
                                       << "); first at flat index " << first << ": " << f(a) << " vs " << f(b);
}

namespace {

// All files of one test process live in <TempDir>/tfmrt_<pid>/, removed when the process's tests
// end (ctest runs each test in its own process, so each cleans up after itself).
const std::filesystem::path &tempDir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = std::filesystem::path(::testing::TempDir()) / ("tfmrt_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

bool gTempDirUsed = false;

class TempDirCleanup : public ::testing::Environment {
public:
  void TearDown() override {
    if (!gTempDirUsed) return;
    std::error_code ignored;
    std::filesystem::remove_all(tempDir(), ignored);
  }
};

const auto *gTempDirCleanup = ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

}  // namespace

std::string tempPath(const std::string &name) {
  static std::atomic<int> counter{0};
  gTempDirUsed = true;
  return (tempDir() / (std::to_string(counter++) + "_" + name)).string();
}

std::unique_ptr<Model> loadModel(const Artifact &artifact, KernelBackend backend, int threads) {
  RuntimeOptions options;
  options.backend = backend;
  options.num_threads = threads;
  return loadModel(artifact, options);
}

std::unique_ptr<Model> loadModel(const Artifact &artifact, const RuntimeOptions &options) {
  std::unique_ptr<Model> model;
  Status s = Model::fromArtifact(artifact, options, model);
  EXPECT_TRUE(s.ok()) << s.message();
  return model;
}


SingleOp::SingleOp(const std::string &op, const std::vector<Operand> &operands, const Attrs &attrs,
                   DType resultType) {
  artifact_.modelName = "single";
  FunctionBuilder f(artifact_, "forward");
  std::vector<uint32_t> ids;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < operands.size(); ++i) {
    const Tensor &t = operands[i].t;
    shapes.push_back(t.shape);
    if (operands[i].param) {
      ids.push_back(f.param("p" + std::to_string(i), t.shape));
      weights_["p" + std::to_string(i)] = t;
    } else {
      ids.push_back(f.input("in" + std::to_string(i), t.dtype, Shape(t.shape.size(), kDyn)));
      inputs_.push_back(t);
    }
  }
  Node probe;
  probe.op = op;
  probe.attrs = attrs;
  std::vector<const Shape *> ptrs;
  for (auto &s : shapes) ptrs.push_back(&s);
  Shape out;
  Status s = inferShape(probe, ptrs, out);
  EXPECT_TRUE(s.ok()) << s.message();
  f.output(f.op(op, ids, resultType, Shape(out.size(), kDyn), attrs));
  f.finish();
}

Tensor SingleOp::run(KernelBackend backend, std::string *kernel) {
  auto model = loadModel(artifact_, backend);
  if (!model) return Tensor();
  if (!weights_.empty()) {
    Status s = model->setWeights(weights_);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  std::vector<Tensor> outputs;
  Status s = model->run("forward", inputs_, outputs);
  EXPECT_TRUE(s.ok()) << s.message();
  if (kernel) *kernel = model->kernelName("forward", 0);
  return outputs.empty() ? Tensor() : outputs[0];
}

void SingleOp::compare(const std::string &fastKernel, double atol, double rtol) {
  std::string refName, fastName;
  Tensor ref = run(KernelBackend::Reference, &refName);
  Tensor fast = run(KernelBackend::Dnnl, &fastName);
  EXPECT_EQ(refName.rfind("reference.", 0), 0u) << refName;
  EXPECT_EQ(fastName, fastKernel);
  EXPECT_TRUE(allClose(fast, ref, atol, rtol));
}

}  // namespace tfmrt::test
