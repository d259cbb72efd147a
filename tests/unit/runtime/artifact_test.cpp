// The .tfmx format: round trip, and every kind of corruption rejected with a clear message.
#include <cstring>
#include <random>

#include "artifact_internal.h"
#include "crc32.h"
#include "test_util.h"
#include "tfmrt/model_info.h"

namespace tfmrt::test {
namespace {

constexpr size_t kHeader = 28;

// `stringAttr` adds an attribute the format carries but no op accepts (Models reject it).
Artifact sampleArtifact(bool stringAttr = true) {
  Artifact a;
  a.modelName = "sample";
  a.metadata = {{"model.d_model", "8"}, {"model.pad_id", "0"}};
  FunctionBuilder f(a, "forward");
  uint32_t ids = f.input("src", DType::I32, {kDyn, kDyn});
  uint32_t table = f.param("embed.weight", {5, 8});
  uint32_t w = f.param("proj.weight", {4, 8});
  uint32_t pe = f.constant("pe", sinusoidTable(6, 8));
  uint32_t e = f.op("tfm.embedding", {table, ids}, DType::F32, {kDyn, kDyn, 8});
  uint32_t p = f.op("tfm.add_positions", {e, pe}, DType::F32, {kDyn, kDyn, 8});
  uint32_t s = f.op("tfm.scale", {p}, DType::F32, {kDyn, kDyn, 8}, {{"factor", AttrValue::ofFloat(0.5)}});
  Attrs attrs{{"transpose_b", AttrValue::ofInt(1)}};
  if (stringAttr) attrs["note"] = AttrValue::ofString("a \"string\" attr");
  uint32_t m = f.op("tfm.matmul", {s, w}, DType::F32, {kDyn, kDyn, 4}, attrs);
  f.output(m);
  f.finish();
  a.params[1].init = ParamInit::Normal;
  return a;
}

std::vector<uint8_t> serialize(const Artifact &a) {
  std::vector<uint8_t> bytes;
  Status s = serializeArtifactUnchecked(a, bytes);
  EXPECT_TRUE(s.ok()) << s.message();
  return bytes;
}

// Rewrites the payload checksum so corruption passes the CRC and reaches the structural checks.
void fixChecksum(std::vector<uint8_t> &bytes) {
  uint32_t crc = crc32(bytes.data() + kHeader, bytes.size() - kHeader);
  for (int i = 0; i < 4; ++i) bytes[24 + i] = uint8_t(crc >> (8 * i));
}

// numel, saturating at 2^40.
int64_t cappedNumel(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == 0) return 0;
    n = n < (int64_t(1) << 40) / d ? n * d : int64_t(1) << 40;
  }
  return n;
}

Status load(const std::vector<uint8_t> &bytes) {
  Artifact a;
  return deserializeArtifact(bytes.data(), bytes.size(), a);
}

void expectEqual(const Artifact &x, const Artifact &y) {
  EXPECT_EQ(x.modelName, y.modelName);
  EXPECT_EQ(x.metadata, y.metadata);
  ASSERT_EQ(x.params.size(), y.params.size());
  for (size_t i = 0; i < x.params.size(); ++i) {
    EXPECT_EQ(x.params[i].name, y.params[i].name);
    EXPECT_EQ(x.params[i].dtype, y.params[i].dtype);
    EXPECT_EQ(x.params[i].shape, y.params[i].shape);
    EXPECT_EQ(x.params[i].init, y.params[i].init);
  }
  ASSERT_EQ(x.constants.size(), y.constants.size());
  for (size_t i = 0; i < x.constants.size(); ++i) {
    EXPECT_EQ(x.constants[i].name, y.constants[i].name);
    EXPECT_EQ(x.constants[i].shape, y.constants[i].shape);
    EXPECT_EQ(x.constants[i].data, y.constants[i].data);
  }
  ASSERT_EQ(x.functions.size(), y.functions.size());
  for (size_t f = 0; f < x.functions.size(); ++f) {
    const EntryFunction &a = x.functions[f], &b = y.functions[f];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.inputs, b.inputs);
    EXPECT_EQ(a.outputs, b.outputs);
    ASSERT_EQ(a.values.size(), b.values.size());
    for (size_t v = 0; v < a.values.size(); ++v) {
      EXPECT_EQ(a.values[v].name, b.values[v].name);
      EXPECT_EQ(a.values[v].kind, b.values[v].kind);
      EXPECT_EQ(a.values[v].dtype, b.values[v].dtype);
      EXPECT_EQ(a.values[v].shape, b.values[v].shape);
      EXPECT_EQ(a.values[v].index, b.values[v].index);
    }
    ASSERT_EQ(a.nodes.size(), b.nodes.size());
    for (size_t n = 0; n < a.nodes.size(); ++n) {
      EXPECT_EQ(a.nodes[n].op, b.nodes[n].op);
      EXPECT_EQ(a.nodes[n].inputs, b.nodes[n].inputs);
      EXPECT_EQ(a.nodes[n].outputs, b.nodes[n].outputs);
      EXPECT_EQ(a.nodes[n].loc, b.nodes[n].loc);
      ASSERT_EQ(a.nodes[n].attrs.size(), b.nodes[n].attrs.size());
      for (const auto &[k, v] : a.nodes[n].attrs) {
        const AttrValue &w = b.nodes[n].attrs.at(k);
        EXPECT_EQ(v.kind, w.kind);
        EXPECT_EQ(v.i, w.i);
        EXPECT_EQ(v.f, w.f);
        EXPECT_EQ(v.s, w.s);
      }
    }
  }
}

TEST(Crc32, KnownVector) {
  const char *s = "123456789";
  EXPECT_EQ(crc32(reinterpret_cast<const uint8_t *>(s), 9), 0xCBF43926u);
}

// The 8-bytes-at-a-time CRC against the bit-at-a-time definition: every length 0..70 at every
// start offset 0..7 (tails, unaligned words), and chained over a split.
TEST(Crc32, MatchesBitwiseDefinition) {
  auto bitwise = [](const uint8_t *p, size_t n, uint32_t crc) {
    crc = ~crc;
    for (size_t i = 0; i < n; ++i) {
      crc ^= p[i];
      for (int k = 0; k < 8; ++k) crc = (crc & 1) ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
    }
    return ~crc;
  };
  std::vector<uint8_t> bytes(80);
  uint32_t x = 12345;
  for (uint8_t &b : bytes) b = uint8_t((x = x * 1103515245u + 12345u) >> 16);
  for (size_t offset = 0; offset < 8; ++offset)
    for (size_t n = 0; offset + n <= 78 && n <= 70; ++n) {
      ASSERT_EQ(crc32(bytes.data() + offset, n), bitwise(bytes.data() + offset, n, 0)) << offset << " " << n;
      ASSERT_EQ(crc32(bytes.data() + offset, n, 0xDEADBEEFu), bitwise(bytes.data() + offset, n, 0xDEADBEEFu));
    }
  EXPECT_EQ(crc32(bytes.data() + 29, 51, crc32(bytes.data(), 29)), crc32(bytes.data(), 80));
}

// The folding CRC (crc32 where the CPU has VPCLMULQDQ) against the table loop: every length
// 0..1100 (all paths: under 256 bytes, the four-vector loop, the vector, lane and tail remainders)
// at offsets 0..3, chained from several registers, one 3 MB buffer and a split inside it.
TEST(Crc32, FoldingMatchesTheTableLoop) {
  if (!cpuHasVpclmul()) GTEST_SKIP() << "no VPCLMULQDQ / AVX-512 here: crc32 is the table loop";
  std::vector<uint8_t> bytes(3 << 20);
  uint32_t x = 777;
  for (uint8_t &b : bytes) b = uint8_t((x = x * 1103515245u + 12345u) >> 16);
  for (size_t offset = 0; offset < 4; ++offset)
    for (size_t n = 0; n <= 1100; ++n)
      for (uint32_t start : {0u, 0xFFFFFFFFu, 0xDEADBEEFu})
        ASSERT_EQ(crc32(bytes.data() + offset, n, start), crc32Table(bytes.data() + offset, n, start))
            << "offset " << offset << " length " << n << " start " << start;
  EXPECT_EQ(crc32(bytes.data(), bytes.size()), crc32Table(bytes.data(), bytes.size()));
  EXPECT_EQ(crc32(bytes.data() + 1000003, bytes.size() - 1000003, crc32(bytes.data(), 1000003)),
            crc32Table(bytes.data(), bytes.size()));
  // A single flipped bit anywhere changes it (the folds lose nothing).
  const uint32_t whole = crc32(bytes.data(), 4096);
  for (size_t bit = 0; bit < 4096 * 8; bit += 61) {
    bytes[bit / 8] ^= uint8_t(1u << (bit % 8));
    ASSERT_NE(crc32(bytes.data(), 4096), whole) << bit;
    bytes[bit / 8] ^= uint8_t(1u << (bit % 8));
  }
}

TEST(Artifact, RoundTripInMemory) {
  Artifact a = sampleArtifact();
  std::vector<uint8_t> bytes;
  ASSERT_OK(serializeArtifact(a, bytes));
  Artifact b;
  ASSERT_OK(deserializeArtifact(bytes.data(), bytes.size(), b));
  expectEqual(a, b);
  EXPECT_EQ(b.formatVersion, kArtifactFormatVersion);
  // Deterministic bytes.
  std::vector<uint8_t> again;
  ASSERT_OK(serializeArtifact(b, again));
  EXPECT_EQ(bytes, again);
}

TEST(Artifact, RoundTripFile) {
  Artifact a = sampleArtifact();
  std::string path = tempPath("sample.tfmx");
  ASSERT_OK(writeArtifactFile(a, path));
  Artifact b;
  ASSERT_OK(readArtifactFile(path, b));
  expectEqual(a, b);
  EXPECT_NE(b.findFunction("forward"), nullptr);
  EXPECT_EQ(b.findFunction("decode"), nullptr);
  EXPECT_EQ(b.findParam("proj.weight"), 1);
  EXPECT_EQ(b.findParam("nope"), -1);
}

TEST(Artifact, MissingFile) {
  Artifact a;
  EXPECT_ERROR(readArtifactFile("/nonexistent/x.tfmx", a), "cannot open artifact", "/nonexistent/x.tfmx");
}

TEST(Artifact, DTypeHelpers) {
  EXPECT_EQ(dtypeSize(DType::F32), 4u);
  EXPECT_EQ(dtypeSize(DType::I32), 4u);
  EXPECT_EQ(dtypeSize(DType::Bool), 1u);
  EXPECT_STREQ(dtypeName(DType::F32), "f32");
  EXPECT_STREQ(dtypeName(DType::Bool), "bool");
}

TEST(Artifact, BadMagic) {
  auto bytes = serialize(sampleArtifact());
  bytes[0] = 'X';
  EXPECT_ERROR(load(bytes), "bad magic");
  std::string text = "hello, I am not an artifact at all";
  Artifact a;
  EXPECT_ERROR(deserializeArtifact(reinterpret_cast<const uint8_t *>(text.data()), text.size(), a), "bad magic");
}

TEST(Artifact, WrongVersion) {
  auto bytes = serialize(sampleArtifact());
  bytes[8] = 3;
  Status s = load(bytes);
  EXPECT_ERROR(s, "version 3", "supports version 2", "recompile");
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
}

// Artifacts of format 1 (before session state) are refused with the instruction to recompile.
TEST(Artifact, FormatOneIsRefusedWithRecompile) {
  auto bytes = serialize(sampleArtifact());
  bytes[8] = 1;
  Status s = load(bytes);
  EXPECT_ERROR(s, "version 1", "supports version 2", "recompile");
}

TEST(Artifact, TruncatedAtSeveralOffsets) {
  auto bytes = serialize(sampleArtifact());
  for (size_t cut : {size_t(0), size_t(3), size_t(8), size_t(20), kHeader - 1, kHeader, kHeader + 5, bytes.size() / 2,
                     bytes.size() - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    std::vector<uint8_t> part(bytes.begin(), bytes.begin() + std::ptrdiff_t(cut));
    Status s = load(part);
    EXPECT_ERROR(s, "truncated");
    EXPECT_EQ(s.code(), StatusCode::DataLoss);
  }
}

TEST(Artifact, TrailingBytes) {
  auto bytes = serialize(sampleArtifact());
  bytes.push_back(0);
  EXPECT_ERROR(load(bytes), "unexpected bytes after");
}

TEST(Artifact, FlippedPayloadByteIsAChecksumError) {
  auto bytes = serialize(sampleArtifact());
  for (size_t at : {kHeader, kHeader + 17, bytes.size() - 1}) {
    auto copy = bytes;
    copy[at] ^= 0x10;
    EXPECT_ERROR(load(copy), "checksum mismatch", "corrupt");
  }
}

TEST(Artifact, OutOfRangeValueIdWithValidChecksum) {
  Artifact a = sampleArtifact();
  a.functions[0].nodes[2].inputs[0] = 99;
  Status s = load(serialize(a));
  EXPECT_ERROR(s, "function 'forward'", "node 2 (tfm.scale at test.yaml:3:3)", "refers to value 99");
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  // The writer refuses it too.
  std::vector<uint8_t> bytes;
  EXPECT_ERROR(serializeArtifact(a, bytes), "refers to value 99");
}

TEST(Artifact, StructuralErrors) {
  {
    Artifact a = sampleArtifact();
    a.functions[0].values[1].index = 7;  // the embedding table's parameter index
    EXPECT_ERROR(load(serialize(a)), "parameter index 7 out of range");
  }
  {
    Artifact a = sampleArtifact();
    a.constants[0].data.pop_back();
    EXPECT_ERROR(load(serialize(a)), "constant 0 ('pe')", "data bytes", "needs 192");
  }
  {
    Artifact a = sampleArtifact();
    a.functions[0].outputs = {42};
    EXPECT_ERROR(load(serialize(a)), "output #0 refers to value 42");
  }
  {
    Artifact a = sampleArtifact();
    std::swap(a.functions[0].nodes[0], a.functions[0].nodes[1]);  // use before definition
    EXPECT_ERROR(load(serialize(a)), "before any node produces it");
  }
  {
    Artifact a = sampleArtifact();
    a.functions[0].values[1].shape = {5, 9};
    EXPECT_ERROR(load(serialize(a)), "parameter 'embed.weight' is f32[5, 8]");
  }
  {
    Artifact a = sampleArtifact();
    a.params.push_back(a.params[0]);
    EXPECT_ERROR(load(serialize(a)), "duplicate parameter name");
  }
  {
    Artifact a = sampleArtifact();
    a.params[0].shape = {-1, 8};
    EXPECT_ERROR(load(serialize(a)), "parameter 0 ('embed.weight')", "invalid shape");
  }
  {
    Artifact a = sampleArtifact();
    a.functions.push_back(a.functions[0]);
    EXPECT_ERROR(load(serialize(a)), "duplicate function 'forward'");
  }
}

TEST(Artifact, CorruptCountCannotAllocate) {
  Artifact a = sampleArtifact();
  auto bytes = serialize(a);
  // The metadata count follows the model name: u32 length + "sample".
  size_t at = kHeader + 4 + a.modelName.size();
  for (int i = 0; i < 4; ++i) bytes[at + i] = 0xFF;
  fixChecksum(bytes);
  Status s = load(bytes);
  EXPECT_ERROR(s, "metadata count 4294967295 exceeds");
  EXPECT_EQ(s.code(), StatusCode::DataLoss);
}

TEST(Artifact, HugeRankRejected) {
  Artifact a = sampleArtifact();
  a.params[0].shape = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_ERROR(load(serialize(a)), "rank 9 exceeds the maximum of 8");
}

// Random corruption with a valid checksum must never crash: every outcome is a Status.
TEST(Artifact, RandomCorruptionNeverCrashes) {
  const auto bytes = serialize(sampleArtifact(false));
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    auto copy = bytes;
    int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) copy[kHeader + rng() % (copy.size() - kHeader)] = uint8_t(rng());
    if (iter % 3 == 0) copy.resize(kHeader + rng() % (copy.size() - kHeader));
    std::vector<uint8_t> header(copy.begin(), copy.begin() + kHeader);
    uint64_t payload = copy.size() - kHeader;
    for (int i = 0; i < 8; ++i) copy[16 + i] = uint8_t(payload >> (8 * i));
    fixChecksum(copy);
    Artifact a;
    Status s = deserializeArtifact(copy.data(), copy.size(), a);
    if (!s.ok()) {
      ++rejected;
      EXPECT_FALSE(s.message().empty());
    } else {
      // Anything accepted must be cleanly rejected by the Model, or load and run (or fail) cleanly.
      for (KernelBackend backend : {KernelBackend::Reference, KernelBackend::Dnnl}) {
        std::unique_ptr<Model> m;
        Status ms = Model::fromArtifact(a, RuntimeOptions{backend, 1}, m);
        if (!ms.ok()) {
          EXPECT_FALSE(ms.message().empty());
          continue;
        }
        int64_t paramElements = 0;
        for (const ParamInfo &p : a.params) paramElements += cappedNumel(p.shape);
        if (paramElements > (int64_t(1) << 22)) continue;  // a corrupt but valid huge shape: not worth allocating
        if (!m->initWeights(1).ok()) continue;
        for (const auto &fn : a.functions) {
          std::vector<Tensor> inputs, outputs;
          for (uint32_t id : fn.inputs) {
            Shape shape = fn.values[id].shape;
            for (auto &d : shape) d = d < 0 ? 2 : std::min<int64_t>(d, 64);
            inputs.emplace_back(fn.values[id].dtype, shape);
          }
          Status rs = m->run(fn.name, inputs, outputs);
          if (!rs.ok()) EXPECT_FALSE(rs.message().empty());
        }
      }
    }
  }
  EXPECT_GT(rejected, 2000);
}

}  // namespace
}  // namespace tfmrt::test

namespace tfmrt {
namespace {

TEST(ModelInfo, RoundTripsThroughMetadataAndRefusesBadValuesByKey) {
  ModelInfo info;
  info.srcVocabSize = 8000;
  info.eosId = 5;
  info.lengthPenalty = 1.25;
  info.activation = "gelu";
  Artifact a;
  a.metadata = toMetadata(info);
  ModelInfo back;
  ASSERT_TRUE(readModelInfo(a, back).ok());
  EXPECT_EQ(back.srcVocabSize, 8000);
  EXPECT_EQ(back.eosId, 5);
  EXPECT_EQ(back.lengthPenalty, 1.25);
  EXPECT_EQ(back.activation, "gelu");
  a.metadata["model.pad_id"] = "zero";
  Status s = readModelInfo(a, back);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'model.pad_id' = 'zero': not an integer"), std::string::npos) << s.message();
  a.metadata["model.pad_id"] = "0";
  a.metadata["decoding.beam_size"] = "0";
  s = readModelInfo(a, back);
  EXPECT_NE(s.message().find("'decoding.beam_size' = '0': must be >= 1"), std::string::npos) << s.message();
  // Floats keep the spelling artifacts always had (checkpoints fingerprint this text).
  EXPECT_EQ(toMetadata(ModelInfo()).at("training.label_smoothing"), "1.000000e-01");
  a.metadata.clear();  // a hand-built artifact: the documented defaults
  ASSERT_TRUE(readModelInfo(a, back).ok());
  EXPECT_EQ(back.beamSize, 4);
  EXPECT_EQ(back.maxLen, 128);
}

}  // namespace
}  // namespace tfmrt
