#include "safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "file_io.h"
#include "format.h"
#include "json.h"

namespace tfmrt {
namespace {

// The reference implementation's limit: a larger header is almost certainly corruption.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;
constexpr int64_t kMaxElements = int64_t(1) << 48;

struct Entry {
  std::string name;
  std::string dtype;  // as written in the file
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

bool fileDtype(const std::string &name, size_t &elemSize, DType &dtype) {
  if (name == "F32") { elemSize = 4; dtype = DType::F32; return true; }
  if (name == "I32") { elemSize = 4; dtype = DType::I32; return true; }
  if (name == "I64") { elemSize = 8; dtype = DType::I32; return true; }
  if (name == "BOOL") { elemSize = 1; dtype = DType::Bool; return true; }
  if (name == "BF16") { elemSize = 2; dtype = DType::BF16; return true; }
  return false;
}

const char *safetensorsDtype(DType t) {
  switch (t) {
  case DType::F32: return "F32";
  case DType::I32: return "I32";
  case DType::Bool: return "BOOL";
  case DType::BF16: return "BF16";
  }
  return "?";
}

bool nonNegativeInt(const JsonValue &v, uint64_t &out) {
  if (v.type != JsonValue::Type::Number || !v.isInteger || v.integer < 0) return false;
  out = uint64_t(v.integer);
  return true;
}

Status parseEntry(const std::string &src, const std::string &name, const JsonValue &v, Entry &e) {
  std::string where = cat(src, ": tensor '", name, "'");
  if (v.type != JsonValue::Type::Object)
    return invalidArgument(cat(where, ": header entry must be an object, got ", JsonValue::typeName(v.type)));
  const JsonValue *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
  for (const auto &[key, val] : v.members) {
    if (key == "dtype") dtype = &val;
    else if (key == "shape") shape = &val;
    else if (key == "data_offsets") offsets = &val;
    else return invalidArgument(cat(where, ": unknown header key \"", key, "\""));
  }
  if (!dtype || !shape || !offsets)
    return invalidArgument(cat(where, ": header entry needs \"dtype\", \"shape\" and \"data_offsets\""));
  if (dtype->type != JsonValue::Type::String) return invalidArgument(cat(where, ": \"dtype\" must be a string"));
  e.name = name;
  e.dtype = dtype->string;
  if (shape->type != JsonValue::Type::Array || shape->items.size() > kMaxRank)
    return invalidArgument(cat(where, ": \"shape\" must be an array of at most ", kMaxRank, " integers"));
  for (const auto &d : shape->items) {
    uint64_t dim;
    if (!nonNegativeInt(d, dim)) return invalidArgument(cat(where, ": \"shape\" must hold non-negative integers"));
    e.shape.push_back(int64_t(dim));
  }
  if (offsets->type != JsonValue::Type::Array || offsets->items.size() != 2 ||
      !nonNegativeInt(offsets->items[0], e.begin) || !nonNegativeInt(offsets->items[1], e.end) || e.end < e.begin)
    return invalidArgument(cat(where, ": \"data_offsets\" must be [begin, end] with 0 <= begin <= end"));
  return Status::OK();
}

}  // namespace

Status parseSafetensors(const uint8_t *data, size_t size, TensorMap &tensors, MetadataMap *metadata,
                        const std::string &src) {
  std::map<std::string, TensorInFile> inFile;
  return parseSafetensorsSelected(data, size, [](const std::string &) { return true; }, tensors, inFile, metadata, src);
}

Status parseSafetensorsSelected(const uint8_t *data, size_t size, const std::function<bool(const std::string &)> &copy,
                                TensorMap &tensors, std::map<std::string, TensorInFile> &inFile, MetadataMap *metadata,
                                const std::string &src) {
  if (size < 8) return dataLoss(cat(src, ": truncated safetensors file (", size, " bytes, the header length alone needs 8)"));
  uint64_t headerLen = 0;
  for (int i = 0; i < 8; ++i) headerLen |= uint64_t(data[i]) << (8 * i);
  if (headerLen > size - 8)
    return dataLoss(cat(src, ": not a safetensors file, or a truncated one: its first 8 bytes give a header of ",
                        headerLen, " bytes, but only ", size - 8, " follow"));
  if (headerLen > kMaxHeaderBytes)
    return invalidArgument(cat(src, ": safetensors header length ", headerLen, " exceeds the 100 MiB limit"));
  JsonValue header;
  Status s = parseJson(reinterpret_cast<const char *>(data + 8), size_t(headerLen), header);
  if (!s.ok()) return invalidArgument(cat(src, ": safetensors header: ", s.message()));
  if (header.type != JsonValue::Type::Object)
    return invalidArgument(cat(src, ": safetensors header must be a JSON object, got ", JsonValue::typeName(header.type)));

  const uint8_t *section = data + 8 + headerLen;
  const uint64_t sectionSize = size - 8 - headerLen;
  std::vector<Entry> entries;
  MetadataMap meta;
  for (const auto &[name, v] : header.members) {
    if (name == "__metadata__") {
      if (v.type != JsonValue::Type::Object) return invalidArgument(cat(src, ": \"__metadata__\" must be an object"));
      for (const auto &[k, mv] : v.members) {
        if (mv.type != JsonValue::Type::String)
          return invalidArgument(cat(src, ": \"__metadata__\" value for \"", k, "\" must be a string"));
        meta[k] = mv.string;
      }
      continue;
    }
    // The writer refuses an empty name, so the reader does too (found by fuzz_safetensors).
    if (name.empty()) return invalidArgument(cat(src, ": a tensor has an empty name"));
    Entry e;
    TFMRT_RETURN_IF_ERROR(parseEntry(src, name, v, e));
    entries.push_back(std::move(e));
  }

  // Sizes, bounds and overlaps, before any tensor is allocated.
  for (const Entry &e : entries) {
    std::string where = cat(src, ": tensor '", e.name, "'");
    size_t elemSize;
    DType dtype;
    if (!fileDtype(e.dtype, elemSize, dtype))
      return invalidArgument(cat(where, ": unsupported dtype \"", e.dtype, "\" (supported: F32, BF16, I32, I64, BOOL)"));
    int64_t numel;
    if (!checkedNumel(e.shape, kMaxElements, numel))
      return invalidArgument(cat(where, ": shape ", shapeStr(e.shape), " is too large"));
    if (e.end > sectionSize)
      return dataLoss(cat(where, ": data_offsets [", e.begin, ", ", e.end, "] run past the end of the data section (",
                          sectionSize, " bytes): truncated file?"));
    if (e.end - e.begin != uint64_t(numel) * elemSize)
      return invalidArgument(cat(where, ": data_offsets [", e.begin, ", ", e.end, "] span ", e.end - e.begin,
                                 " bytes, but ", e.dtype, shapeStr(e.shape), " needs ", uint64_t(numel) * elemSize));
  }
  std::vector<const Entry *> order;
  for (const Entry &e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry *a, const Entry *b) { return a->begin < b->begin; });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i]->begin < order[i - 1]->end)
      return invalidArgument(cat(src, ": tensors '", order[i - 1]->name, "' and '", order[i]->name,
                                 "' have overlapping data_offsets"));
  // As the format's reference reader: the tensors cover the data section, with nothing after
  // them (bytes appended to a file were taken silently).
  const uint64_t covered = order.empty() ? 0 : order.back()->end;
  if (covered != sectionSize)
    return dataLoss(cat(src, ": ", sectionSize - covered, " byte(s) after the last tensor's data: the file is corrupt ",
                        "or was appended to"));

  TensorMap out;
  std::map<std::string, TensorInFile> left;
  for (const Entry &e : entries) {
    size_t elemSize = 0;
    DType dtype = DType::F32;
    fileDtype(e.dtype, elemSize, dtype);  // validated above
    if (e.dtype != "I64" && !copy(e.name)) {
      left[e.name] = TensorInFile{dtype, e.shape, section + e.begin, size_t(e.end - e.begin)};
      continue;
    }
    Tensor t = Tensor::uninitialized(dtype, e.shape);  // every element is written below
    const uint8_t *src8 = section + e.begin;
    if (e.dtype == "I64") {
      int32_t *dst = t.data<int32_t>();
      for (int64_t i = 0, n = t.numel(); i < n; ++i) {
        int64_t v;
        std::memcpy(&v, src8 + 8 * i, 8);
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
          return invalidArgument(cat(src, ": tensor '", e.name, "': I64 value ", v, " at element ", i,
                                     " does not fit in i32"));
        dst[i] = int32_t(v);
      }
    } else if (e.end > e.begin) {
      std::memcpy(t.rawData(), src8, size_t(e.end - e.begin));
    }
    out.emplace(e.name, std::move(t));
  }
  tensors = std::move(out);
  inFile = std::move(left);
  if (metadata) *metadata = std::move(meta);
  return Status::OK();
}

Status serializeSafetensorsRefs(const TensorRefList &tensors, const MetadataMap &metadata, std::vector<uint8_t> &bytes) {
  std::string header = "{";
  uint64_t offset = 0;
  bool first = true;
  for (const auto &[name, tp] : tensors) {
    const Tensor &t = *tp;
    if (name.empty() || name == "__metadata__")
      return invalidArgument(cat("safetensors: invalid tensor name '", name, "'"));
    if (!t.valid())
      return invalidArgument(cat("safetensors: tensor '", name, "' (", t.describe(), ") has storage smaller than its shape"));
    if (!first) header += ',';
    first = false;
    appendJsonString(header, name);
    header += cat(":{\"dtype\":\"", safetensorsDtype(t.dtype), "\",\"shape\":[");
    for (size_t i = 0; i < t.shape.size(); ++i) header += cat(i ? "," : "", t.shape[i]);
    header += cat("],\"data_offsets\":[", offset, ",", offset + t.nbytes(), "]}");
    offset += t.nbytes();
  }
  if (!metadata.empty()) {
    if (!first) header += ',';
    header += "\"__metadata__\":{";
    bool firstMeta = true;
    for (const auto &[k, v] : metadata) {
      if (!firstMeta) header += ',';
      firstMeta = false;
      appendJsonString(header, k);
      header += ':';
      appendJsonString(header, v);
    }
    header += '}';
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');

  bytes.clear();
  bytes.reserve(8 + header.size() + offset);
  for (int i = 0; i < 8; ++i) bytes.push_back(uint8_t(uint64_t(header.size()) >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  for (const auto &[name, t] : tensors) {
    const uint8_t *p = static_cast<const uint8_t *>(t->rawData());
    bytes.insert(bytes.end(), p, p + t->nbytes());
  }
  return Status::OK();
}

Status serializeSafetensors(const TensorMap &tensors, const MetadataMap &metadata, std::vector<uint8_t> &bytes) {
  TensorRefList refs;
  for (const auto &[name, t] : tensors) refs.emplace_back(name, &t);
  return serializeSafetensorsRefs(refs, metadata, bytes);
}

Status readSafetensors(const std::string &path, TensorMap &tensors, MetadataMap *metadata) {
  FileView file;
  TFMRT_RETURN_IF_ERROR(file.open(path, "safetensors file"));
  return parseSafetensors(file.data(), file.size(), tensors, metadata, path);
}

Status writeSafetensors(const std::string &path, const TensorMap &tensors, const MetadataMap &metadata) {
  std::vector<uint8_t> bytes;
  TFMRT_RETURN_IF_ERROR(serializeSafetensors(tensors, metadata, bytes));
  return writeFileBytes(path, "safetensors file", bytes.data(), bytes.size());
}

}  // namespace tfmrt
