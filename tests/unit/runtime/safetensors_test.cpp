// Whole-file reads and writes, safetensors reading/writing, the strict JSON header parser, and Model weight loading errors.
#include <cstring>
#include <fstream>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

#include "file_io.h"
#include "json.h"
#include "test_util.h"
#include "tfmrt/safetensors.h"

namespace tfmrt::test {
namespace {

// Assembles a file from a raw header string and a data section.
std::vector<uint8_t> rawFile(const std::string &header, size_t dataBytes) {
  std::vector<uint8_t> out(8 + header.size() + dataBytes, 0);
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  if (!header.empty()) std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

Status parse(const std::vector<uint8_t> &bytes, TensorMap &out) {
  return parseSafetensors(bytes.data(), bytes.size(), out, nullptr, "t.safetensors");
}

TEST(Json, ParsesValues) {
  JsonValue v;
  std::string text = R"( {"a": [1, -2, 3.5e2, true, false, null], "s": "x\"\\\/\n\u00e9\ud83d\ude00", "o": {}} )";
  ASSERT_OK(parseJson(text.data(), text.size(), v));
  ASSERT_EQ(v.type, JsonValue::Type::Object);
  const JsonValue *a = v.find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items.size(), 6u);
  EXPECT_TRUE(a->items[0].isInteger);
  EXPECT_EQ(a->items[1].integer, -2);
  EXPECT_FALSE(a->items[2].isInteger);
  EXPECT_DOUBLE_EQ(a->items[2].number, 350.0);
  EXPECT_TRUE(a->items[3].boolean);
  EXPECT_EQ(a->items[5].type, JsonValue::Type::Null);
  EXPECT_EQ(v.find("s")->string, "x\"\\/\n\xC3\xA9\xF0\x9F\x98\x80");
}

TEST(Json, RejectsMalformed) {
  for (std::string bad : {"", "{", "{\"a\":1,}", "[1,]", "{\"a\" 1}", "01", "1.", "-", "\"abc", "\"\\x\"",
                          "\"\\ud800\"", "{\"a\":1,\"a\":2}", "tru", "{} x", "[1 2]", "\"\x01\"", "{'a':1}",
                          "/* c */ {}"}) {
    JsonValue v;
    Status s = parseJson(bad.data(), bad.size(), v);
    EXPECT_FALSE(s.ok()) << "accepted: " << bad;
    EXPECT_NE(s.message().find("malformed JSON at offset"), std::string::npos) << s.message();
  }
  std::string deep(200, '[');
  JsonValue v;
  EXPECT_ERROR(parseJson(deep.data(), deep.size(), v), "nesting deeper than 64");
}

TEST(Safetensors, RoundTrip) {
  TensorMap in;
  in["b.weight"] = randomF32({3, 5}, 1);
  in["a.ids"] = Tensor::i32({2, 2}, {1, -2, 3, 2147483647});
  in["c.mask"] = Tensor::boolean({3}, {1, 0, 1});
  in["d.scalar"] = Tensor::f32({}, {4.5f});
  in["e.empty"] = Tensor::f32({0, 4});
  std::string path = tempPath("rt.safetensors");
  ASSERT_OK(writeSafetensors(path, in, {{"format", "pt"}, {"note", "q\"uote"}}));
  TensorMap out;
  MetadataMap meta;
  ASSERT_OK(readSafetensors(path, out, &meta));
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(meta.at("note"), "q\"uote");
  ASSERT_EQ(out.size(), in.size());
  for (const auto &[name, t] : in) EXPECT_TRUE(allClose(out.at(name), t, 0, 0)) << name;

  // Header padded to 8 bytes; tensors laid out sorted by name.
  std::vector<uint8_t> bytes;
  ASSERT_OK(serializeSafetensors(in, {}, bytes));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(bytes[i]) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + std::ptrdiff_t(n));
  EXPECT_LT(header.find("a.ids"), header.find("b.weight"));
  EXPECT_NE(header.find("\"data_offsets\":[0,16]"), std::string::npos) << header;
}

TEST(Safetensors, ReadsI64AsI32AndRejectsOverflow) {
  std::string h = R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})";
  auto bytes = rawFile(h, 16);
  int64_t vals[2] = {7, -3};
  std::memcpy(bytes.data() + 8 + h.size(), vals, 16);
  TensorMap out;
  ASSERT_OK(parse(bytes, out));
  EXPECT_EQ(out.at("ids").dtype, DType::I32);
  EXPECT_EQ(out.at("ids").data<int32_t>()[1], -3);
  vals[1] = int64_t(1) << 40;
  std::memcpy(bytes.data() + 8 + h.size(), vals, 16);
  EXPECT_ERROR(parse(bytes, out), "tensor 'ids'", "does not fit in i32");
}

TEST(Safetensors, MalformedHeader) {
  TensorMap out;
  EXPECT_ERROR(parse(rawFile(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})", 4), out),
               "t.safetensors", "malformed JSON");
  EXPECT_ERROR(parse(rawFile("[1,2]", 0), out), "must be a JSON object");
  EXPECT_ERROR(parse(rawFile(R"({"w":{"dtype":"F32","shape":[1]}})", 4), out), "tensor 'w'", "data_offsets");
  EXPECT_ERROR(parse(rawFile(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), out), "tensor 'w'",
               "non-negative");
  EXPECT_ERROR(parse(rawFile(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}})", 4), out),
               "tensor 'w'", "unknown header key \"extra\"");
  EXPECT_ERROR(parse(rawFile(R"({"__metadata__":{"k":1}})", 0), out), "__metadata__");
}

TEST(Safetensors, UnknownDtype) {
  TensorMap out;
  EXPECT_ERROR(parse(rawFile(R"({"half":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4), out),
               "tensor 'half'", "unsupported dtype \"F16\"");
}

TEST(Safetensors, BadOffsets) {
  TensorMap out;
  EXPECT_ERROR(parse(rawFile(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 8), out), "tensor 'w'",
               "needs 8");
  EXPECT_ERROR(parse(rawFile(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), out), "tensor 'w'",
               "0 <= begin <= end");
  EXPECT_ERROR(parse(rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                             12),
                     out),
               "'a' and 'b' have overlapping data_offsets");
}

TEST(Safetensors, Truncated) {
  TensorMap in;
  in["w"] = randomF32({4, 4}, 3);
  std::vector<uint8_t> bytes;
  ASSERT_OK(serializeSafetensors(in, {}, bytes));
  TensorMap out;
  auto cut = bytes;
  cut.resize(bytes.size() - 1);
  EXPECT_ERROR(parse(cut, out), "tensor 'w'", "truncated");
  cut.resize(20);
  EXPECT_ERROR(parse(cut, out), "truncated", "header of");
  cut.resize(5);
  EXPECT_ERROR(parse(cut, out), "truncated");
  EXPECT_ERROR(readSafetensors("/nonexistent/w.safetensors", out), "/nonexistent/w.safetensors");
}

// Random corruption of header and data must never crash: every outcome is a Status.
TEST(Safetensors, RandomCorruptionNeverCrashes) {
  TensorMap in;
  in["a"] = randomF32({3, 4}, 1);
  in["b"] = Tensor::i32({5}, {1, 2, 3, 4, 5});
  std::vector<uint8_t> bytes;
  ASSERT_OK(serializeSafetensors(in, {{"k", "v"}}, bytes));
  std::mt19937 rng(99);
  int rejected = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    auto copy = bytes;
    int flips = 1 + int(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      // Mostly the header (the interesting part), sometimes the length field.
      size_t at = iter % 10 == 0 ? rng() % 8 : 8 + rng() % (copy.size() - 8);
      copy[at] = iter % 2 ? uint8_t(rng()) : uint8_t("{}[]\",:0123456789e-"[rng() % 20]);
    }
    if (iter % 7 == 0) copy.resize(rng() % copy.size());
    TensorMap out;
    Status s = parseSafetensors(copy.data(), copy.size(), out);
    if (!s.ok()) {
      ++rejected;
      EXPECT_FALSE(s.message().empty());
    } else {
      for (const auto &[name, t] : out) EXPECT_TRUE(t.valid()) << name;
    }
  }
  EXPECT_GT(rejected, 1000);
}

// Files written by the Python reference (tests/reference/safetensors_io.py) read back.
TEST(Safetensors, ReadsGoldenFilesIfPresent) {
  std::string path = std::string(TFMC_SOURCE_DIR) + "/tests/golden/tiny.weights.safetensors";
  if (!std::ifstream(path).good()) GTEST_SKIP() << "no golden file " << path;
  TensorMap out;
  ASSERT_OK(readSafetensors(path, out));
  EXPECT_FALSE(out.empty());
  for (const auto &[name, t] : out) EXPECT_TRUE(t.valid()) << name;
}

// --- Model::loadWeights ------------------------------------------------------------------

Artifact twoParamArtifact() {
  Artifact a;
  a.modelName = "two";
  FunctionBuilder f(a, "forward");
  uint32_t x = f.input("x", DType::F32, {kDyn, 3});
  uint32_t w = f.param("w", {2, 3});
  uint32_t b = f.param("b", {2}, ParamInit::Zeros);
  uint32_t y = f.op("tfm.matmul", {x, w}, DType::F32, {kDyn, 2}, {{"transpose_b", AttrValue::ofInt(1)}});
  f.output(f.op("tfm.bias_add", {y, b}, DType::F32, {kDyn, 2}));
  f.finish();
  return a;
}

class WeightsTest : public ::testing::Test {
protected:
  void SetUp() override {
    model = loadModel(twoParamArtifact(), KernelBackend::Reference);
    ASSERT_TRUE(model);
    ASSERT_OK(model->initWeights(5));
    good["w"] = randomF32({2, 3}, 1);
    good["b"] = randomF32({2}, 2);
  }
  Status loadFile(const TensorMap &tensors) {
    std::string path = tempPath("w.safetensors");
    Status s = writeSafetensors(path, tensors);
    EXPECT_TRUE(s.ok()) << s.message();
    return model->loadWeights(path);
  }
  std::unique_ptr<Model> model;
  TensorMap good;
};

TEST_F(WeightsTest, LoadsGoodFile) {
  ASSERT_OK(loadFile(good));
  EXPECT_TRUE(allClose(*model->weight("w"), good["w"], 0, 0));
  EXPECT_TRUE(allClose(*model->weight("b"), good["b"], 0, 0));
  EXPECT_EQ(model->weight("nope"), nullptr);
}

TEST_F(WeightsTest, MissingTensor) {
  TensorMap t = good;
  t.erase("b");
  EXPECT_ERROR(loadFile(t), "w.safetensors", "missing tensor 'b'", "expected f32[2]");
}

TEST_F(WeightsTest, ExtraTensor) {
  TensorMap t = good;
  t["decoder.extra"] = randomF32({1}, 4);
  EXPECT_ERROR(loadFile(t), "unexpected tensor 'decoder.extra'", "f32[1]", "model 'two' has no such parameter");
}

TEST_F(WeightsTest, MisShapedTensor) {
  TensorMap t = good;
  t["w"] = randomF32({3, 2}, 4);
  EXPECT_ERROR(loadFile(t), "tensor 'w' has shape [3, 2] but the model expects [2, 3]");
}

TEST_F(WeightsTest, WrongDtype) {
  TensorMap t = good;
  t["b"] = Tensor::i32({2}, {1, 2});
  EXPECT_ERROR(loadFile(t), "tensor 'b' has dtype i32 but the model expects f32");
}

TEST_F(WeightsTest, ListsEveryProblemAndKeepsOldWeights) {
  Tensor before = *model->weight("w");
  TensorMap t;
  t["w"] = randomF32({9}, 1);
  t["zzz"] = randomF32({1}, 1);
  Status s = loadFile(t);
  EXPECT_ERROR(s, "3 weight problems", "missing tensor 'b'", "tensor 'w' has shape [9]", "unexpected tensor 'zzz'");
  EXPECT_TRUE(allClose(*model->weight("w"), before, 0, 0));
}

TEST_F(WeightsTest, SaveLoadRoundTrip) {
  std::string path = tempPath("saved.safetensors");
  ASSERT_OK(model->saveWeights(path));
  TensorMap read;
  MetadataMap meta;
  ASSERT_OK(readSafetensors(path, read, &meta));
  EXPECT_EQ(meta.at("tfmc_model"), "two");
  EXPECT_TRUE(allClose(read.at("w"), *model->weight("w"), 0, 0));
  auto other = loadModel(twoParamArtifact(), KernelBackend::Reference);
  ASSERT_OK(other->loadWeights(path));
  EXPECT_TRUE(allClose(*other->weight("w"), *model->weight("w"), 0, 0));
}

}  // namespace
}  // namespace tfmrt::test

// Arenas come from Tensor::largeBuffer: zero-filled and aligned like any tensor, whatever the
// page size the kernel gave (huge pages are advice), and copies are ordinary tensors.
TEST(Tensor, LargeBufferIsZeroedAlignedAndCopyable) {
  for (int64_t bytes : {int64_t(0), int64_t(100), int64_t(3) << 20, (int64_t(5) << 20) + 7}) {
    tfmrt::Tensor t = tfmrt::Tensor::largeBuffer(tfmrt::DType::Bool, {bytes});
    ASSERT_TRUE(t.valid()) << bytes;
    ASSERT_EQ(t.nbytes(), size_t(bytes));
    if (bytes == 0) continue;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.rawData()) % 64, 0u);
    const auto *p = t.data<uint8_t>();
    int64_t nonZero = 0;
    for (int64_t i = 0; i < bytes; ++i) nonZero += p[i] != 0;
    EXPECT_EQ(nonZero, 0) << bytes;
    t.data<uint8_t>()[bytes - 1] = 7;
    tfmrt::Tensor copy = t;
    EXPECT_EQ(copy.data<uint8_t>()[bytes - 1], 7);
  }
}

// More than the machine's memory is refused with std::bad_alloc (which Session::run reports as
// "out of memory") instead of a mapping that gets the process killed when it is touched.
TEST(Tensor, LargeBufferBeyondPhysicalMemoryThrows) {
  const uint64_t physical = tfmrt::physicalMemoryBytes();
  ASSERT_GT(physical, uint64_t(1) << 28);  // Linux reports it; every test machine has > 256 MiB
  EXPECT_THROW(tfmrt::Tensor::largeBuffer(tfmrt::DType::Bool, {int64_t(physical + (uint64_t(1) << 30))}), std::bad_alloc);
  EXPECT_THROW(tfmrt::Tensor::largeBuffer(tfmrt::DType::F32, {int64_t(physical / 2)}, tfmrt::Tensor::Pages::OnTouch),
               std::bad_alloc);  // 2x physical in bytes
}

// Whole-file reads: one open and one fstat per file, so the checks describe the file read.
// A FIFO is refused at once instead of blocking for a writer.
namespace tfmrt::test {
namespace {

TEST(FileIo, ReadsAndMapsRegularFilesAndRefusesOthers) {
  const std::string path = tempPath("file_io.bin");
  std::vector<uint8_t> bytes(70000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 31 + 7);
  ASSERT_TRUE(writeFileBytes(path, "test file", bytes.data(), bytes.size()).ok());
  std::vector<uint8_t> read;
  ASSERT_TRUE(readFileBytes(path, "test file", read).ok());
  EXPECT_EQ(read, bytes);
  FileView view;
  ASSERT_TRUE(view.open(path, "test file").ok());
  ASSERT_EQ(view.size(), bytes.size());
  EXPECT_EQ(std::memcmp(view.data(), bytes.data(), bytes.size()), 0);

  const std::string empty = tempPath("file_io_empty.bin");
  ASSERT_TRUE(writeFileBytes(empty, "test file", nullptr, 0).ok());
  FileView emptyView;
  ASSERT_TRUE(emptyView.open(empty, "test file").ok());
  EXPECT_EQ(emptyView.size(), 0u);

  EXPECT_ERROR(readFileBytes(tempPath("no_such_file.bin"), "weights file", read), "cannot open weights file");
  FileView missing;
  EXPECT_ERROR(missing.open(tempPath("no_such_file.bin"), "weights file"), "No such file");
  FileView dir;
  EXPECT_ERROR(dir.open(::testing::TempDir(), "checkpoint"), "not a regular file");
  const std::string fifo = tempPath("file_io.fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  FileView pipe;
  EXPECT_ERROR(pipe.open(fifo, "checkpoint"), "not a regular file");
  EXPECT_ERROR(readFileBytes(fifo, "artifact", read), "not a regular file");
  ::unlink(fifo.c_str());
}

}  // namespace
}  // namespace tfmrt::test
