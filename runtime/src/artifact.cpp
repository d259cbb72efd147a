// .tfmx serialization. Payload encoding (all integers little-endian):
//   str      = u32 byte length, bytes (UTF-8, no terminator)
//   shape    = u32 rank (<= kMaxRank), rank x i64 (kDynamicDim = -1 allowed only for values)
//   payload  = str model_name
//              u32 n, n x (str key, str value)                              metadata
//              u32 n, n x (str name, u8 dtype, u8 init, shape)              params
//              u32 n, n x (str name, u8 dtype, shape, u64 nbytes, bytes)    constants
//              u32 n, n x function
//   function = str name
//              u32 n, n x (str name, u8 kind, u8 dtype, shape, u32 index)   values
//              u32 n, n x u32                                               inputs
//              u32 n, n x u32                                               outputs
//              u32 n, n x node
//   node     = str op, u32 n, n x u32 inputs, u32 n, n x u32 outputs,
//              u32 n, n x (str key, u8 kind, i64 | f64 | str)               attrs
//              str loc
// Every count is checked against the bytes left before anything is allocated, so a corrupt count
// cannot allocate more than the file size.
#include <cstdio>
#include <cstring>

#include "artifact_internal.h"
#include "crc32.h"
#include "file_io.h"
#include "format.h"
#include "tfmrt/artifact.h"

namespace tfmrt {

namespace {

constexpr uint8_t kMagic[8] = {'T', 'F', 'M', 'X', 0, 0, 0, 1};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 4;

class Writer {
public:
  explicit Writer(std::vector<uint8_t> &out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(uint8_t(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(uint8_t(v >> (8 * i)));
  }
  void i64(int64_t v) { u64(uint64_t(v)); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    u64(bits);
  }
  void str(const std::string &s) {
    u32(uint32_t(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void shape(const std::vector<int64_t> &dims) {
    u32(uint32_t(dims.size()));
    for (int64_t d : dims) i64(d);
  }
  void bytes(const std::vector<uint8_t> &b) {
    u64(b.size());
    out_.insert(out_.end(), b.begin(), b.end());
  }

private:
  std::vector<uint8_t> &out_;
};

// Bounds-checked reader: every failure records the offset and the field being read.
class Reader {
public:
  Reader(const uint8_t *data, size_t size) : p_(data), size_(size) {}

  size_t remaining() const { return size_ - pos_; }
  size_t pos() const { return pos_; }
  const std::string &error() const { return error_; }

  bool u8(uint8_t &v, const char *what) {
    if (!need(1, what)) return false;
    v = p_[pos_++];
    return true;
  }
  bool u32(uint32_t &v, const char *what) {
    if (!need(4, what)) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(p_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return true;
  }
  bool u64(uint64_t &v, const char *what) {
    if (!need(8, what)) return false;
    v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(p_[pos_ + i]) << (8 * i);
    pos_ += 8;
    return true;
  }
  bool i64(int64_t &v, const char *what) {
    uint64_t u;
    if (!u64(u, what)) return false;
    v = int64_t(u);
    return true;
  }
  bool f64(double &v, const char *what) {
    uint64_t u;
    if (!u64(u, what)) return false;
    std::memcpy(&v, &u, 8);
    return true;
  }
  bool str(std::string &s, const char *what) {
    uint32_t n;
    if (!u32(n, what) || !need(n, what)) return false;
    s.assign(reinterpret_cast<const char *>(p_ + pos_), n);
    pos_ += n;
    return true;
  }
  // A count of elements that each occupy at least `minBytes` bytes in the payload.
  bool count(uint32_t &n, size_t minBytes, const char *what) {
    if (!u32(n, what)) return false;
    if (uint64_t(n) * minBytes > remaining())
      return fail(cat(what, " count ", n, " exceeds the ", remaining(), " bytes left"));
    return true;
  }
  bool shape(std::vector<int64_t> &dims, const char *what) {
    uint32_t rank;
    if (!u32(rank, what)) return false;
    if (rank > kMaxRank) return fail(cat(what, " rank ", rank, " exceeds the maximum of ", kMaxRank));
    if (!need(size_t(rank) * 8, what)) return false;
    dims.resize(rank);
    for (auto &d : dims) i64(d, what);
    return true;
  }
  bool bytes(std::vector<uint8_t> &b, const char *what) {
    uint64_t n;
    if (!u64(n, what) || !need(n, what)) return false;
    b.assign(p_ + pos_, p_ + pos_ + n);
    pos_ += size_t(n);
    return true;
  }
  bool fail(const std::string &msg) {
    if (error_.empty()) error_ = cat("at payload offset ", pos_, ": ", msg);
    return false;
  }

private:
  bool need(uint64_t n, const char *what) {
    if (n > remaining())
      return fail(cat("truncated ", what, " (needs ", n, " bytes, ", remaining(), " left)"));
    return true;
  }

  const uint8_t *p_;
  size_t size_;
  size_t pos_ = 0;
  std::string error_;
};

void writeFunction(Writer &w, const EntryFunction &fn) {
  w.str(fn.name);
  w.u32(uint32_t(fn.values.size()));
  for (const auto &v : fn.values) {
    w.str(v.name);
    w.u8(uint8_t(v.kind));
    w.u8(uint8_t(v.dtype));
    w.shape(v.shape);
    w.u32(v.index);
  }
  w.u32(uint32_t(fn.inputs.size()));
  for (uint32_t id : fn.inputs) w.u32(id);
  w.u32(uint32_t(fn.outputs.size()));
  for (uint32_t id : fn.outputs) w.u32(id);
  w.u32(uint32_t(fn.nodes.size()));
  for (const auto &n : fn.nodes) {
    w.str(n.op);
    w.u32(uint32_t(n.inputs.size()));
    for (uint32_t id : n.inputs) w.u32(id);
    w.u32(uint32_t(n.outputs.size()));
    for (uint32_t id : n.outputs) w.u32(id);
    w.u32(uint32_t(n.attrs.size()));
    for (const auto &[key, a] : n.attrs) {
      w.str(key);
      w.u8(uint8_t(a.kind));
      switch (a.kind) {
      case AttrValue::Kind::Int: w.i64(a.i); break;
      case AttrValue::Kind::Float: w.f64(a.f); break;
      case AttrValue::Kind::String: w.str(a.s); break;
      }
    }
    w.str(n.loc);
  }
}

bool readIds(Reader &r, std::vector<uint32_t> &ids, const char *what) {
  uint32_t n;
  if (!r.count(n, 4, what)) return false;
  ids.resize(n);
  for (auto &id : ids) r.u32(id, what);
  return true;
}

bool readDType(Reader &r, DType &t, const char *what) {
  uint8_t v;
  if (!r.u8(v, what)) return false;
  if (v > uint8_t(DType::BF16)) return r.fail(cat(what, ": unknown dtype code ", int(v)));
  t = DType(v);
  return true;
}

bool readNode(Reader &r, Node &n) {
  if (!r.str(n.op, "node op") || !readIds(r, n.inputs, "node inputs") ||
      !readIds(r, n.outputs, "node outputs"))
    return false;
  uint32_t nattrs;
  if (!r.count(nattrs, 4 + 1 + 4, "node attrs")) return false;
  for (uint32_t i = 0; i < nattrs; ++i) {
    std::string key;
    uint8_t kind;
    if (!r.str(key, "attr name") || !r.u8(kind, "attr kind")) return false;
    AttrValue a;
    switch (kind) {
    case uint8_t(AttrValue::Kind::Int): a.kind = AttrValue::Kind::Int; if (!r.i64(a.i, "attr value")) return false; break;
    case uint8_t(AttrValue::Kind::Float): a.kind = AttrValue::Kind::Float; if (!r.f64(a.f, "attr value")) return false; break;
    case uint8_t(AttrValue::Kind::String): a.kind = AttrValue::Kind::String; if (!r.str(a.s, "attr value")) return false; break;
    default: return r.fail(cat("attr '", key, "': unknown attr kind code ", int(kind)));
    }
    if (!n.attrs.emplace(key, std::move(a)).second) return r.fail(cat("duplicate attr '", key, "'"));
  }
  return r.str(n.loc, "node loc");
}

bool readFunction(Reader &r, EntryFunction &fn) {
  if (!r.str(fn.name, "function name")) return false;
  uint32_t nvalues;
  if (!r.count(nvalues, 4 + 1 + 1 + 4 + 4, "values")) return false;
  fn.values.resize(nvalues);
  for (auto &v : fn.values) {
    uint8_t kind;
    if (!r.str(v.name, "value name") || !r.u8(kind, "value kind")) return false;
    if (kind > uint8_t(ValueKind::State))
      return r.fail(cat("value '", v.name, "': unknown value kind code ", int(kind)));
    v.kind = ValueKind(kind);
    if (!readDType(r, v.dtype, "value dtype") || !r.shape(v.shape, "value shape") ||
        !r.u32(v.index, "value index"))
      return false;
  }
  if (!readIds(r, fn.inputs, "function inputs") || !readIds(r, fn.outputs, "function outputs"))
    return false;
  uint32_t nnodes;
  // Smallest node: op, 3 counts and loc = 5 x u32.
  if (!r.count(nnodes, 5 * 4, "nodes")) return false;
  fn.nodes.resize(nnodes);
  for (auto &n : fn.nodes)
    if (!readNode(r, n)) return false;
  return true;
}

bool readPayload(Reader &r, Artifact &a) {
  if (!r.str(a.modelName, "model name")) return false;
  uint32_t n;
  if (!r.count(n, 8, "metadata")) return false;
  for (uint32_t i = 0; i < n; ++i) {
    std::string k, v;
    if (!r.str(k, "metadata key") || !r.str(v, "metadata value")) return false;
    a.metadata[k] = v;
  }
  if (!r.count(n, 4 + 1 + 1 + 4, "params")) return false;
  a.params.resize(n);
  for (auto &p : a.params) {
    uint8_t init;
    if (!r.str(p.name, "param name") || !readDType(r, p.dtype, "param dtype") ||
        !r.u8(init, "param init"))
      return false;
    if (init > uint8_t(ParamInit::Normal))
      return r.fail(cat("param '", p.name, "': unknown init code ", int(init)));
    p.init = ParamInit(init);
    if (!r.shape(p.shape, "param shape")) return false;
  }
  if (!r.count(n, 4 + 1 + 4 + 8, "constants")) return false;
  a.constants.resize(n);
  for (auto &c : a.constants)
    if (!r.str(c.name, "constant name") || !readDType(r, c.dtype, "constant dtype") ||
        !r.shape(c.shape, "constant shape") || !r.bytes(c.data, "constant data"))
      return false;
  if (!r.count(n, 4 + 1 + 4, "states")) return false;
  a.states.resize(n);
  for (auto &st : a.states)
    if (!r.str(st.name, "state name") || !readDType(r, st.dtype, "state dtype") || !r.shape(st.shape, "state shape"))
      return false;
  if (!r.count(n, 4 * 5, "functions")) return false;
  a.functions.resize(n);
  for (auto &fn : a.functions)
    if (!readFunction(r, fn)) return false;
  if (r.remaining() != 0) return r.fail(cat(r.remaining(), " unexpected trailing bytes"));
  return true;
}

uint32_t readLE32(const uint8_t *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint64_t readLE64(const uint8_t *p) { return uint64_t(readLE32(p)) | uint64_t(readLE32(p + 4)) << 32; }

}  // namespace

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32: return 4;
  case DType::I32: return 4;
  case DType::Bool: return 1;
  case DType::BF16: return 2;
  }
  return 0;
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::I32: return "i32";
  case DType::Bool: return "bool";
  case DType::BF16: return "bf16";
  }
  return "unknown";
}

const EntryFunction *Artifact::findFunction(const std::string &name) const {
  for (const auto &fn : functions)
    if (fn.name == name) return &fn;
  return nullptr;
}

bool Artifact::usesState(const EntryFunction &fn) const {
  for (const ValueInfo &v : fn.values)
    if (v.kind == ValueKind::State) return true;
  return false;
}

bool Artifact::usesDynamicState(const EntryFunction &fn) const {
  for (const ValueInfo &v : fn.values)
    if (v.kind == ValueKind::State && v.index < states.size() && !isStaticState(states[v.index])) return true;
  return false;
}

int64_t Artifact::findParam(const std::string &name) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == name) return int64_t(i);
  return -1;
}

Status serializeArtifact(const Artifact &artifact, std::vector<uint8_t> &bytes) {
  // Refuse to write what the loader would refuse to read: catches compiler bugs at their source.
  TFMRT_RETURN_IF_ERROR(validateArtifact(artifact));
  return serializeArtifactUnchecked(artifact, bytes);
}

Status serializeArtifactUnchecked(const Artifact &artifact, std::vector<uint8_t> &bytes) {
  std::vector<uint8_t> payload;
  Writer w(payload);
  w.str(artifact.modelName);
  w.u32(uint32_t(artifact.metadata.size()));
  for (const auto &[k, v] : artifact.metadata) {
    w.str(k);
    w.str(v);
  }
  w.u32(uint32_t(artifact.params.size()));
  for (const auto &p : artifact.params) {
    w.str(p.name);
    w.u8(uint8_t(p.dtype));
    w.u8(uint8_t(p.init));
    w.shape(p.shape);
  }
  w.u32(uint32_t(artifact.constants.size()));
  for (const auto &c : artifact.constants) {
    w.str(c.name);
    w.u8(uint8_t(c.dtype));
    w.shape(c.shape);
    w.bytes(c.data);
  }
  w.u32(uint32_t(artifact.states.size()));
  for (const auto &st : artifact.states) {
    w.str(st.name);
    w.u8(uint8_t(st.dtype));
    w.shape(st.shape);
  }
  w.u32(uint32_t(artifact.functions.size()));
  for (const auto &fn : artifact.functions) writeFunction(w, fn);

  bytes.clear();
  bytes.reserve(kHeaderSize + payload.size());
  bytes.insert(bytes.end(), kMagic, kMagic + 8);
  Writer h(bytes);
  h.u32(kArtifactFormatVersion);
  h.u32(0);
  h.u64(payload.size());
  h.u32(crc32(payload.data(), payload.size()));
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  return Status::OK();
}

Status deserializeArtifact(const uint8_t *data, size_t size, Artifact &artifact) {
  if (size < 8 && (size == 0 || std::memcmp(data, kMagic, size) == 0))
    return dataLoss(cat("truncated artifact: ", size, " bytes, the header alone needs ", kHeaderSize));
  if (size < 8 || std::memcmp(data, kMagic, 8) != 0)
    return dataLoss("not a tfmx artifact: bad magic (expected \"TFMX\\0\\0\\0\\1\" in the first 8 bytes)");
  if (size < kHeaderSize)
    return dataLoss(cat("truncated artifact: ", size, " bytes, the header alone needs ", kHeaderSize));
  uint32_t version = readLE32(data + 8);
  if (version != kArtifactFormatVersion)
    return invalidArgument(cat("unsupported artifact format version ", version,
                               " (this runtime supports version ", kArtifactFormatVersion,
                               "): recompile the model with a matching tfmc"));
  if (uint32_t reserved = readLE32(data + 12); reserved != 0)
    return dataLoss(cat("corrupt artifact header: reserved field is ", reserved, ", expected 0"));
  uint64_t payloadSize = readLE64(data + 16);
  uint64_t present = size - kHeaderSize;
  if (payloadSize > present)
    return dataLoss(cat("truncated artifact: header declares a ", payloadSize, "-byte payload but only ",
                        present, " bytes follow the header"));
  if (payloadSize < present)
    return dataLoss(cat("corrupt artifact: ", present - payloadSize,
                        " unexpected bytes after the declared ", payloadSize, "-byte payload"));
  const uint8_t *payload = data + kHeaderSize;
  uint32_t stored = readLE32(data + 24);
  uint32_t computed = crc32(payload, size_t(payloadSize));
  if (stored != computed) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "(stored 0x%08x, computed 0x%08x)", stored, computed);
    return dataLoss(std::string("artifact checksum mismatch ") + buf + ": the file is corrupt");
  }
  Artifact a;
  Reader r(payload, size_t(payloadSize));
  if (!readPayload(r, a)) return dataLoss("malformed artifact payload " + r.error());
  a.formatVersion = version;
  TFMRT_RETURN_IF_ERROR(validateArtifact(a));
  artifact = std::move(a);
  return Status::OK();
}

Status writeArtifactFile(const Artifact &artifact, const std::string &path) {
  std::vector<uint8_t> bytes;
  TFMRT_RETURN_IF_ERROR(serializeArtifact(artifact, bytes));
  return writeFileBytes(path, "artifact", bytes.data(), bytes.size());
}

namespace {
// An executable written by `tfmc compile --emit=executable` is the program followed by the
// artifact and this trailer: artifact offset and size (u64, little-endian) and the magic.
constexpr char kEmbeddedMagic[8] = {'T', 'F', 'M', 'X', 'E', 'X', 'E', '1'};
constexpr size_t kTrailerSize = 24;

uint64_t readU64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void appendU64(std::vector<uint8_t> &out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(v >> (8 * i)));
}
}  // namespace

bool findEmbeddedArtifact(const std::vector<uint8_t> &file, size_t &offset, size_t &size, std::string *damage) {
  if (file.size() < kTrailerSize) return false;
  const uint8_t *t = file.data() + file.size() - kTrailerSize;
  if (std::memcmp(t + 16, kEmbeddedMagic, sizeof kEmbeddedMagic) != 0) {
    // No trailer. Bytes past the ELF image (its section header table ends it) are then a model
    // cut short, not the template tfm-embedded: a copy that stopped early said "carries no model".
    static const uint8_t kElf64[5] = {0x7f, 'E', 'L', 'F', 2};
    if (!damage || file.size() < 64 || std::memcmp(file.data(), kElf64, sizeof kElf64) != 0) return false;
    const uint64_t sectionHeaders = readU64(file.data() + 0x28);
    const uint64_t entrySize = uint64_t(file[0x3A]) | uint64_t(file[0x3B]) << 8;
    const uint64_t entries = uint64_t(file[0x3C]) | uint64_t(file[0x3D]) << 8;
    // (No section headers, or extended numbering (e_shnum 0), or an offset past the file: no claim.)
    if (sectionHeaders == 0 || entries == 0 || sectionHeaders >= file.size()) return false;
    const uint64_t elfEnd = sectionHeaders + entrySize * entries;
    if (elfEnd >= file.size()) return false;
    *damage = std::to_string(file.size() - elfEnd) + " bytes follow the program but end without the model's trailer: "
              "the file was cut short (an incomplete copy?)";
    return true;
  }
  const uint64_t off = readU64(t), len = readU64(t + 8);
  if (off > file.size() - kTrailerSize || len != file.size() - kTrailerSize - off) {
    if (!damage) return false;
    *damage = "its trailer places the model at bytes " + std::to_string(off) + " + " + std::to_string(len) +
              " of a " + std::to_string(file.size()) + "-byte file";
    return true;
  }
  offset = size_t(off);
  size = size_t(len);
  return true;
}

void appendEmbeddedArtifact(std::vector<uint8_t> &program, const std::vector<uint8_t> &artifactBytes) {
  const uint64_t offset = program.size();
  program.insert(program.end(), artifactBytes.begin(), artifactBytes.end());
  appendU64(program, offset);
  appendU64(program, artifactBytes.size());
  program.insert(program.end(), kEmbeddedMagic, kEmbeddedMagic + sizeof kEmbeddedMagic);
}

Status readArtifactFile(const std::string &path, Artifact &artifact) {
  std::vector<uint8_t> bytes;
  TFMRT_RETURN_IF_ERROR(readFileBytes(path, "artifact", bytes));
  size_t offset = 0, size = bytes.size();
  findEmbeddedArtifact(bytes, offset, size);  // an emitted executable: read the artifact it carries
  Status s = deserializeArtifact(bytes.data() + offset, size, artifact);
  if (!s.ok()) return Status(s.code(), path + ": " + s.message());
  return Status::OK();
}

}  // namespace tfmrt
