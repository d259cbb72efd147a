// The compiled artifact (.tfmx): the contract between the MLIR compiler and the runtime.
//
// A self-describing, versioned program: parameter table, constants (e.g. position tables),
// and one or more entry functions (forward today; train_step, encode, decode_step later), each a
// topologically ordered list of kernel invocations over numbered values. The runtime needs no
// MLIR to execute it.
//
// File layout (all integers little-endian):
//   magic "TFMX\0\0\0\1" (8 bytes) | u32 format version | u32 reserved (0)
//   u64 payload size | u32 CRC-32 (IEEE) of the payload | payload
// The payload is the sequence of fields written by serializeArtifact (see artifact.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tfmrt/status.h"

namespace tfmrt {

// 2: session state (StateInfo, ValueKind::State) for the K/V cache of decode_step.
constexpr uint32_t kArtifactFormatVersion = 2;
constexpr int64_t kDynamicDim = -1;  // a batch or sequence-length dimension bound at run time
constexpr uint32_t kMaxRank = 8;     // larger ranks are rejected as corrupt

// Element types; the codes are stored in artifacts (tfm::rules::ElementType uses the same ones).
// BF16 is bfloat16 (the upper half of an f32), the operand type of bf16 GEMMs; room is left for
// f16 and int8.
enum class DType : uint8_t { F32 = 0, I32 = 1, Bool = 2 /* one byte per element */, BF16 = 3 };
size_t dtypeSize(DType t);
const char *dtypeName(DType t);

// Attribute values carried on nodes: enough for every tfm op (ints, floats, bools, strings).
struct AttrValue {
  enum class Kind : uint8_t { Int = 0, Float = 1, String = 2 } kind = Kind::Int;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  static AttrValue ofInt(int64_t v) { AttrValue a; a.kind = Kind::Int; a.i = v; return a; }
  static AttrValue ofFloat(double v) { AttrValue a; a.kind = Kind::Float; a.f = v; return a; }
  static AttrValue ofString(std::string v) { AttrValue a; a.kind = Kind::String; a.s = std::move(v); return a; }
};

enum class ValueKind : uint8_t {
  Input = 0,         // bound by the caller, in EntryFunction::inputs order
  Parameter = 1,     // a model weight; `index` points into Artifact::params
  Constant = 2,      // compile-time data; `index` points into Artifact::constants
  Intermediate = 3,  // produced by a node (entry outputs are intermediates listed in `outputs`)
  // Session state (e.g. a K/V cache): persists across calls of a tfmrt::Session, owned by it, and
  // updated in place by the nodes that list it as their result; `index` points into
  // Artifact::states. Every State value of a function refers to a distinct state.
  State = 4,
};

struct ValueInfo {
  std::string name;  // input name, parameter name, constant name, or "%N" for intermediates
  ValueKind kind = ValueKind::Intermediate;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // kDynamicDim for run-time dims
  uint32_t index = 0;          // for Parameter / Constant
};

struct Node {
  std::string op;  // dialect op name, e.g. "tfm.matmul"
  std::vector<uint32_t> inputs;   // value ids
  std::vector<uint32_t> outputs;  // value ids
  std::map<std::string, AttrValue> attrs;
  std::string loc;  // "spec.yaml:12:5" of the spec entry that produced it (for error messages)
};

struct EntryFunction {
  std::string name;
  std::vector<ValueInfo> values;
  std::vector<uint32_t> inputs;   // value ids bound by the caller, in order
  std::vector<uint32_t> outputs;  // value ids returned, in order
  std::vector<Node> nodes;        // topological order
};

enum class ParamInit : uint8_t { XavierUniform = 0, Zeros = 1, Ones = 2, Normal = 3 };

struct ParamInfo {
  std::string name;  // documented in models/README.md; matches the PyTorch reference's state_dict
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  ParamInit init = ParamInit::XavierUniform;
};

struct Constant {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// A tensor a Session keeps across calls (a decoder's K/V cache). Dynamic dims are bound when the
// session allocates its state (Session::bindStates), not per call.
struct StateInfo {
  std::string name;  // "decoder.layers.0.self_attn.k_cache"
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // kDynamicDim where bound by Session::bindStates
};

// A state without dynamic dims (train_step's Adam moments) is training state: allocated with each
// session and saved in checkpoints. One with dynamic dims (a K/V cache) is bound per session.
inline bool isStaticState(const StateInfo &s) {
  for (int64_t d : s.shape)
    if (d == kDynamicDim) return false;
  return true;
}

// Gradient accumulators ("grad_accum/<param>") are static but scratch: the first micro-batch of
// every update overwrites them, so checkpoints leave them out. Every other static state (the Adam
// moments) is training state that checkpoints save.
inline bool isCheckpointedState(const StateInfo &s) {
  return isStaticState(s) && s.name.rfind("grad_accum/", 0) != 0;
}

struct Artifact {
  uint32_t formatVersion = kArtifactFormatVersion;
  std::string modelName;
  std::map<std::string, std::string> metadata;  // spec fields (d_model, pad_id, beam_size, ...)
  std::vector<ParamInfo> params;
  std::vector<Constant> constants;
  std::vector<StateInfo> states;
  std::vector<EntryFunction> functions;

  const EntryFunction *findFunction(const std::string &name) const;
  int64_t findParam(const std::string &name) const;  // -1 if absent
  bool usesState(const EntryFunction &fn) const;     // has a State value
  // Has a State value with dynamic dims (a K/V cache): bound per Session, planned there.
  bool usesDynamicState(const EntryFunction &fn) const;
};

Status serializeArtifact(const Artifact &artifact, std::vector<uint8_t> &bytes);
// Validates magic, version, size and checksum, then every index in the program; never crashes on
// bad input.
Status deserializeArtifact(const uint8_t *data, size_t size, Artifact &artifact);
// The structural checks deserializeArtifact runs (also run by serializeArtifact and Model::fromArtifact):
// unique names, every value id / param / constant index in range and consistent with its table
// entry, constant sizes, and SSA order (each intermediate produced once, before its first use).
// Op names and attributes are checked when a Model is created from the artifact.
Status validateArtifact(const Artifact &artifact);
Status writeArtifactFile(const Artifact &artifact, const std::string &path);
// Reads an artifact file, or the artifact embedded in an executable emitted by
// `tfmc compile --emit=executable` (see appendEmbeddedArtifact).
Status readArtifactFile(const std::string &path, Artifact &artifact);
// Appends serialized artifact bytes and a trailer locating them to an executable's bytes.
void appendEmbeddedArtifact(std::vector<uint8_t> &program, const std::vector<uint8_t> &artifactBytes);
// Where the artifact of an emitted executable is (false if `file` carries none). With `damage`:
// a trailer whose offset or size does not fit the file is reported there (and true returned),
// not taken for no trailer.
bool findEmbeddedArtifact(const std::vector<uint8_t> &file, size_t &offset, size_t &size,
                          std::string *damage = nullptr);

}  // namespace tfmrt
