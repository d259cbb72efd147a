// Passes over the tfm dialect, in pipeline order (the order itself lives in Pipeline.cpp).
#ifndef TFM_PASSES_TD
#define TFM_PASSES_TD

include "mlir/Pass/PassBase.td"

class TfmFuncPass<string arg> : Pass<arg, "mlir::func::FuncOp"> {
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark for every candidate site, fused or not, and why not">
  ];
}

def RemoveInferenceDropout : TfmFuncPass<"tfm-remove-inference-dropout"> {
  let summary = "Drop tfm.dropout in inference entry functions (it is the identity there)";
  let description = [{
    Functions marked `tfm.mode = "inference"` never apply dropout; removing the ops lets the
    epilogue and attention patterns match across them.
  }];
}

def Autodiff : Pass<"tfm-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode autodiff: loss -> (loss, gradient of every parameter)";
  let description = [{
    Rewrites every function marked `tfm.differentiate` whose single result is the loss of a
    tfm.label_smoothed_xent. The backward ops (dialects/tfm/README.md, "Gradient ops") are
    appended in reverse program order; gradients reaching one value along several paths are
    summed with tfm.add, including tied parameters (one gradient per parameter name). The
    function then returns (loss, one gradient per parameter in the order of the tfm.param ops),
    each gradient named "grad:<parameter name>". Runs on the primitive graph, before any fusion pass; dropout
    must have been removed (training-mode dropout is not differentiated yet).
  }];
}

def AccumulateGradients : Pass<"tfm-accumulate-gradients", "mlir::ModuleOp"> {
  let summary = "Gradient accumulation: an accumulate entry and an apply_update entry";
  let description = [{
    For every function with a `tfm.accumulate` dictionary (the tfm.adam hyper-parameters) whose
    last two arguments are weight (tensor<f32>) and reset (tensor<i32>) and whose results are
    (loss, grad:<param>...) as tfm-autodiff leaves them: adds weight * grad into the session state
    "grad_accum/<param>" (tfm.grad_accumulate; reset overwrites instead of adding) and returns the
    loss alone. Adds `apply_update(step) -> grad_sq_norm`, which takes the Adam step of
    tfm-apply-adam from the accumulated gradients (same moments "adam.m/<param>",
    "adam.v/<param>" as train_step).
  }];
}

def ApplyAdam : Pass<"tfm-apply-adam", "mlir::ModuleOp"> {
  let summary = "Turn a differentiated function into a training step: Adam updates in place";
  let description = [{
    For every function with a `tfm.adam` dictionary (beta1, beta2, epsilon, lr_scale, d_model,
    warmup_steps) whose last argument is the step (tensor<i32>) and whose results are (loss,
    grad:<param>...) as tfm-autodiff leaves them: computes the learning rate once
    (tfm.lr_schedule), updates every parameter with tfm.adam_update just before the return (after
    every use of the old values), and returns (loss, grad_sq_norm = sum of squared gradients).
    With clip_norm > 0 in the dictionary, tfm.sum_squares of every gradient and tfm.clip_scale
    of their sum come first and scale every update (gradient clipping by the global norm);
    grad_sq_norm is then that sum, before clipping. weight_decay > 0 (decoupled, AdamW) becomes
    the attribute of every tfm.adam_update.
  }];
}

def MergeProjections : TfmFuncPass<"tfm-merge-projections"> {
  let summary = "Merge projections of one input within an attention site into one GEMM";
  let description = [{
    Self-attention Q, K, V projections (three linear layers reading the same value) become one
    matmul against the concatenated [3D, D] weight plus one bias add; cross-attention K and V
    (both reading the encoder output) become one [2D, D] GEMM. Results are split back with
    tfm.slice_last, which tfm-fuse-attention folds into its column offsets.
  }];
}

def FuseAttention : TfmFuncPass<"tfm-fuse-attention"> {
  let summary = "Fuse Q*K^T -> scale -> mask -> softmax -> (dropout) -> *V into tfm.fused_attention";
  let description = [{
    Matches encoder self-attention (padding mask), decoder causal self-attention and
    decoder-encoder cross-attention (memory mask). split_heads / merge_heads / slice_last around
    the pattern fold into the fused op's column offsets, so no transpose copies remain.
  }];
}

def FuseEpilogues : TfmFuncPass<"tfm-fuse-epilogues"> {
  let summary = "Fold bias, activation, residual and log_softmax into GEMMs; residual + LayerNorm into one op";
  let description = [{
    matmul + bias_add (+ relu / gelu) becomes tfm.linear. A residual add feeding only a
    LayerNorm (post-norm) becomes tfm.add_layer_norm; any other residual add of a linear's result
    (pre-norm) is folded into the GEMM as a binary post-op. A log_softmax that is a matmul's only
    user (decode_step's vocabulary projection) becomes the matmul's log_softmax attribute.
  }];
}

def AssignLayouts : TfmFuncPass<"tfm-assign-layouts"> {
  let summary = "Pack constant GEMM weights into the runtime's blocked layout";
  let description = [{
    Sets weight_layout = "packed" on tfm.matmul / tfm.linear whose weight is a parameter (or a
    tfm.concat of parameters): the runtime reorders it once, when weights are set, into the
    layout the GEMM primitive prefers.
  }];
}

def LowerPrecision : TfmFuncPass<"tfm-lower-precision"> {
  let summary = "bf16 GEMM operands with f32 accumulation";
  let description = [{
    `tfmc compile --precision=bf16`. Every tfm.linear and tfm.matmul with weight_layout =
    "packed" gets "packed_bf16": the runtime packs a bf16 copy of the f32 weight once per weights
    version (so after every Adam step in training) and rounds the other operand to bf16 (to
    nearest even), accumulating in f32. In training entries every tfm.weight_grad gets precision
    = "bf16" (both operands rounded per call), and every tfm.fused_attention precision = "bf16"
    (bf16 Q.K and P.V products, f32 softmax and accumulation). Runs after tfm-assign-layouts.
    GEMMs between two run-time values (the unfused attention chain's batch_matmul, unpacked
    matmuls), LayerNorm, softmax, the loss and the optimizer stay f32; master weights and
    checkpoints stay f32.
  }];
}

def QuantizeInt8 : TfmFuncPass<"tfm-quantize-int8"> {
  let summary = "int8 GEMMs in inference functions: weights per output column, inputs per row";
  let description = [{
    `tfmc compile --precision=int8`. In functions marked `tfm.mode = "inference"` (forward,
    encode, decode_step, decode), every tfm.linear and tfm.matmul with weight_layout = "packed"
    gets "packed_int8": the runtime quantizes the f32 weight to int8 per output column (symmetric,
    scale max|w| / 127) once per weights version and the other operand per row per call, adds the
    products in int32 and applies scale, bias, activation and residual in f32. Functions that
    compute gradients stay f32 (train_step, and `gradients`, whose results must be the gradients
    of forward's loss); so do GEMMs between two run-time values, attention, LayerNorm, softmax
    and the K/V caches. Runs after tfm-assign-layouts.
  }];
}

def LowerKvPrecision : Pass<"tfm-lower-kv-precision", "mlir::ModuleOp"> {
  let summary = "Decoding's keys and values in bf16: the K/V caches and the cross-attention K/V";
  let description = [{
    `tfmc compile --precision=bf16`, after tfm-lower-precision. Every tfm.state read only as a
    cache (tfm.cache_reorder / tfm.cache_write, whose results are caches in turn, and
    tfm.cached_attention's keys and values) becomes bf16, with the results of its cache ops:
    cache_write rounds each row to nearest even as it stores it. Every named function argument
    used only as tfm.gathered_attention's keys or values (and tfm.attention_weights' keys) becomes bf16, and every function result
    of the same name (`encode`'s cross_k.l, cross_v.l for `decode_step`'s) is rounded by
    tfm.to_bf16 before the return. The attention kernels widen keys and values to f32 as they
    load them, so only storage changes: half the bytes in the memory-bound part of a decoder
    step. States read any other way (the Adam moments), and the full-prefix `decode`, stay f32.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark for every candidate site, fused or not, and why not">
  ];
}

#endif
