// tfm IR -> artifact. Each func.func becomes an entry function whose nodes are the tfm ops in
// program order; weights become the parameter table and position tables become constants.
#include "lower/TfmToArtifact.h"

#include <cstring>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include "lower/PositionTable.h"
#include "tfmrt/model_info.h"
#include "tfm/TfmDialect.h"

using namespace mlir;

namespace tfmc {
namespace {

std::string locationString(Location loc) {
  std::string name;
  if (auto named = dyn_cast<NameLoc>(loc)) {
    name = named.getName().str();
    loc = named.getChildLoc();
  }
  std::string out;
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    out = (file.getFilename().str() + ":" + std::to_string(file.getLine()) + ":" +
           std::to_string(file.getColumn()));
  if (!name.empty()) out += out.empty() ? name : " (" + name + ")";
  return out;
}

FailureOr<tfmrt::DType> dtypeOf(Operation *op, Type type) {
  Type element = cast<ShapedType>(type).getElementType();
  if (element.isF32()) return tfmrt::DType::F32;
  if (element.isInteger(32)) return tfmrt::DType::I32;
  if (element.isInteger(1)) return tfmrt::DType::Bool;
  if (element.isBF16()) return tfmrt::DType::BF16;
  op->emitError() << "the runtime has no element type " << element;
  return failure();
}

std::vector<int64_t> shapeOf(Type type) {
  std::vector<int64_t> shape;
  for (int64_t d : cast<ShapedType>(type).getShape())
    shape.push_back(ShapedType::isDynamic(d) ? tfmrt::kDynamicDim : d);
  return shape;
}

// Initialiser convention of models/README.md, derived from the parameter's name.
tfmrt::ParamInit initForParam(StringRef name, size_t rank) {
  if (name.ends_with("norm.weight")) return tfmrt::ParamInit::Ones;
  if (name.ends_with(".bias") || rank < 2) return tfmrt::ParamInit::Zeros;
  return tfmrt::ParamInit::XavierUniform;
}

class ArtifactLowering {
public:
  ArtifactLowering(tfmrt::Artifact &artifact) : artifact_(artifact) {}

  LogicalResult lowerFunction(func::FuncOp fn) {
    tfmrt::EntryFunction entry;
    entry.name = fn.getSymName().str();
    llvm::DenseMap<Value, uint32_t> ids;
    llvm::DenseMap<uint32_t, uint32_t> paramValues, constantValues, stateValues;

    auto addValue = [&](Operation *op, Value v, tfmrt::ValueKind kind, std::string name,
                        uint32_t index) -> FailureOr<uint32_t> {
      auto dtype = dtypeOf(op, v.getType());
      if (failed(dtype)) return failure();
      tfmrt::ValueInfo info;
      info.name = std::move(name);
      info.kind = kind;
      info.dtype = *dtype;
      info.shape = shapeOf(v.getType());
      info.index = index;
      entry.values.push_back(std::move(info));
      uint32_t id = entry.values.size() - 1;
      ids[v] = id;
      return id;
    };

    for (BlockArgument arg : fn.getArguments()) {
      auto nameAttr = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tfm.name");
      std::string name = nameAttr ? nameAttr.str() : "arg" + std::to_string(arg.getArgNumber());
      auto id = addValue(fn, arg, tfmrt::ValueKind::Input, name, 0);
      if (failed(id)) return failure();
      entry.inputs.push_back(*id);
    }

    for (Operation &op : fn.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          const uint32_t id = ids.lookup(v);
          entry.outputs.push_back(id);
          // A computed result takes its declared name ("logits", "loss", "grad:<param>"), which
          // callers read from the artifact and errors quote; inputs and weights keep theirs.
          auto nameAttr = fn.getResultAttrOfType<StringAttr>(i, "tfm.name");
          tfmrt::ValueInfo &info = entry.values[id];
          if (nameAttr && info.kind == tfmrt::ValueKind::Intermediate && info.name.rfind('%', 0) == 0)
            info.name = nameAttr.str();
        }
        continue;
      }
      if (auto param = dyn_cast<tfm::ParamOp>(op)) {
        auto index = paramIndex(param);
        if (failed(index)) return failure();
        auto it = paramValues.find(*index);
        if (it != paramValues.end()) {
          ids[param.getResult()] = it->second;  // tied weights share one value
          continue;
        }
        auto id = addValue(&op, param.getResult(), tfmrt::ValueKind::Parameter,
                           param.getName().str(), *index);
        if (failed(id)) return failure();
        paramValues[*index] = *id;
        continue;
      }
      if (auto table = dyn_cast<tfm::PositionTableOp>(op)) {
        uint32_t index = positionConstant(table.getMaxLen(), table.getDim());
        auto it = constantValues.find(index);
        if (it != constantValues.end()) {
          ids[table.getResult()] = it->second;
          continue;
        }
        auto id = addValue(&op, table.getResult(), tfmrt::ValueKind::Constant,
                           artifact_.constants[index].name, index);
        if (failed(id)) return failure();
        constantValues[index] = *id;
        continue;
      }
      if (auto state = dyn_cast<tfm::StateOp>(op)) {
        auto index = stateIndex(state);
        if (failed(index)) return failure();
        auto it = stateValues.find(*index);
        if (it != stateValues.end()) {
          ids[state.getResult()] = it->second;
          continue;
        }
        auto id = addValue(&op, state.getResult(), tfmrt::ValueKind::State, state.getName().str(), *index);
        if (failed(id)) return failure();
        stateValues[*index] = *id;
        continue;
      }
      if (!isa<tfm::TfmDialect>(op.getDialect()))
        return op.emitError() << "cannot lower op '" << op.getName()
                              << "' to the runtime artifact";

      tfmrt::Node node;
      node.op = op.getName().getStringRef().str();
      node.loc = locationString(op.getLoc());
      for (Value operand : op.getOperands()) {
        auto it = ids.find(operand);
        if (it == ids.end()) return op.emitError("operand defined outside the entry block");
        node.inputs.push_back(it->second);
      }
      // In-place state updates (caches, gradient accumulators): the result is the operand's
      // state, one buffer.
      if (isa<tfm::CacheReorderOp, tfm::CacheWriteOp, tfm::GradAccumulateOp>(op)) {
        const uint32_t stateId = node.inputs[0];
        if (entry.values[stateId].kind != tfmrt::ValueKind::State)
          return op.emitError("the updated operand does not lower to session state");
        node.outputs.push_back(stateId);
        ids[op.getResult(0)] = stateId;
        for (NamedAttribute attr : op.getAttrs())
          if (failed(convertAttr(&op, attr, node))) return failure();
        entry.nodes.push_back(std::move(node));
        continue;
      }
      for (Value result : op.getResults()) {
        auto id = addValue(&op, result, tfmrt::ValueKind::Intermediate,
                           "%" + std::to_string(entry.values.size()), 0);
        if (failed(id)) return failure();
        node.outputs.push_back(*id);
      }
      for (NamedAttribute attr : op.getAttrs()) {
        if (failed(convertAttr(&op, attr, node))) return failure();
      }
      entry.nodes.push_back(std::move(node));
    }
    artifact_.functions.push_back(std::move(entry));
    return success();
  }

private:
  FailureOr<uint32_t> paramIndex(tfm::ParamOp param) {
    std::string name = param.getName().str();
    std::vector<int64_t> shape = shapeOf(param.getType());
    auto it = paramIndices_.find(name);
    if (it != paramIndices_.end()) {
      if (artifact_.params[it->second].shape != shape)
        return param.emitError() << "parameter '" << name << "' is used with two shapes";
      return it->second;
    }
    tfmrt::ParamInfo info;
    info.name = name;
    info.shape = shape;
    info.init = initForParam(name, shape.size());
    artifact_.params.push_back(std::move(info));
    uint32_t index = artifact_.params.size() - 1;
    paramIndices_[name] = index;
    return index;
  }

  FailureOr<uint32_t> stateIndex(tfm::StateOp state) {
    std::string name = state.getName().str();
    std::vector<int64_t> shape = shapeOf(state.getType());
    FailureOr<tfmrt::DType> dtype = dtypeOf(state, state.getType());
    if (failed(dtype)) return failure();
    for (size_t i = 0; i < artifact_.states.size(); ++i)
      if (artifact_.states[i].name == name) {
        if (artifact_.states[i].shape != shape || artifact_.states[i].dtype != *dtype)
          return state.emitError() << "state '" << name << "' is used with two types";
        return uint32_t(i);
      }
    tfmrt::StateInfo info;
    info.name = name;
    info.dtype = *dtype;
    info.shape = shape;
    artifact_.states.push_back(std::move(info));
    return uint32_t(artifact_.states.size() - 1);
  }

  uint32_t positionConstant(int64_t maxLen, int64_t dim) {
    std::string name = "sinusoid_" + std::to_string(maxLen) + "x" + std::to_string(dim);
    for (size_t i = 0; i < artifact_.constants.size(); ++i)
      if (artifact_.constants[i].name == name) return i;
    std::vector<float> table = sinusoidalPositionTable(maxLen, dim);
    tfmrt::Constant constant;
    constant.name = name;
    constant.shape = {maxLen, dim};
    constant.data.resize(table.size() * sizeof(float));
    std::memcpy(constant.data.data(), table.data(), constant.data.size());
    artifact_.constants.push_back(std::move(constant));
    return artifact_.constants.size() - 1;
  }

  LogicalResult convertAttr(Operation *op, NamedAttribute attr, tfmrt::Node &node) {
    std::string key = attr.getName().str();
    Attribute value = attr.getValue();
    if (auto b = dyn_cast<BoolAttr>(value))
      node.attrs[key] = tfmrt::AttrValue::ofInt(b.getValue() ? 1 : 0);
    else if (auto i = dyn_cast<IntegerAttr>(value))
      node.attrs[key] = tfmrt::AttrValue::ofInt(i.getInt());
    else if (auto f = dyn_cast<FloatAttr>(value))
      node.attrs[key] = tfmrt::AttrValue::ofFloat(f.getValueAsDouble());
    else if (auto s = dyn_cast<StringAttr>(value))
      node.attrs[key] = tfmrt::AttrValue::ofString(s.str());
    else
      return op->emitError() << "attribute '" << key << "' has no artifact encoding";
    return success();
  }

  tfmrt::Artifact &artifact_;
  llvm::StringMap<uint32_t> paramIndices_;
};

void recordSpec(const ModelSpec &spec, tfmrt::Artifact &artifact) {
  const ModelSection &m = spec.model;
  tfmrt::ModelInfo info;
  info.specPath = spec.path;
  info.dModel = m.d_model;
  info.heads = m.heads;
  info.dFF = m.d_ff;
  info.encoderLayers = m.encoder_layers;
  info.decoderLayers = m.decoder_layers;
  info.srcVocabSize = m.src_vocab_size;
  info.tgtVocabSize = m.tgt_vocab_size;
  info.maxLen = m.max_len;
  info.padId = m.pad_id;
  info.bosId = m.bos_id;
  info.eosId = m.eos_id;
  info.positions = m.positions == PositionKind::Sinusoidal ? "sinusoidal" : "learned";
  info.norm = m.norm == NormPlacement::Post ? "post" : "pre";
  info.activation = m.activation == Activation::ReLU ? "relu" : "gelu";
  info.labelSmoothing = spec.training.label_smoothing;
  info.batchTokens = spec.training.batch_tokens;
  info.maxSteps = spec.training.max_steps;
  info.seed = spec.training.seed;
  info.lrScale = spec.training.lr_scale;
  info.warmupSteps = spec.training.warmup_steps;
  info.dropout = m.dropout;
  info.attentionDropout = m.attention_dropout;
  info.activationDropout = m.activation_dropout;
  info.adamBeta1 = spec.training.adam_beta1;
  info.adamBeta2 = spec.training.adam_beta2;
  info.adamEps = spec.training.adam_eps;
  info.clipNorm = spec.training.clip_norm;
  info.weightDecay = spec.training.weight_decay;
  info.beamSize = spec.decoding.beam_size;
  info.lengthPenalty = spec.decoding.length_penalty;
  info.maxLengthRatio = spec.decoding.max_length_ratio;
  info.maxLengthOffset = spec.decoding.max_length_offset;
  info.compileBatch = spec.compile.batch;
  info.compileSrcLen = spec.compile.src_len;
  info.compileTgtLen = spec.compile.tgt_len;
  for (auto &[key, value] : tfmrt::toMetadata(info)) artifact.metadata[key] = value;
}

}  // namespace

LogicalResult lowerToArtifact(ModuleOp module, const ModelSpec &spec, tfmrt::Artifact &artifact) {
  artifact.modelName = spec.name;
  recordSpec(spec, artifact);
  ArtifactLowering lowering(artifact);
  for (auto fn : module.getOps<func::FuncOp>())
    if (failed(lowering.lowerFunction(fn))) return failure();
  return success();
}

}  // namespace tfmc
