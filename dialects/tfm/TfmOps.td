// Ops of the tfm dialect. Semantics are summarised in README.md next to this file; the runtime's
// reference kernels implement exactly these.
#ifndef TFM_OPS_TD
#define TFM_OPS_TD

include "TfmDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Operand and result constraints: element type and the accepted ranks, checked by ODS here and
// by the runtime through the generated op table (dialects/tfm/rules).
def Tfm_F32Tensor : Tfm_F32<0, Tfm_MaxRank>;
def Tfm_I32Scalar : Tfm_I32<0>;
// A decoder position: a scalar (every row at the same position) or [R] (row r at positions[r]:
// continuous batching, where sentences that entered the batch at different steps share a call).
def Tfm_I32Positions : Tfm_I32<0, 1>;

class Tfm_UnaryOp<string mnemonic, int minRank = 0, list<Trait> traits = []>
    : Tfm_ExecOp<mnemonic, "sameAsFirst", !listconcat([Pure, SameOperandsAndResultType], traits), 1> {
  let arguments = (ins Tfm_F32<minRank, Tfm_MaxRank>:$input);
  let results = (outs Tfm_F32Tensor:$result);
  // One type when the types are equal, else all of them: SameOperandsAndResultType accepts
  // compatible shapes (?x1x4 with ?x?x4), and one printed type did not parse back.
  let assemblyFormat = "$input attr-dict `:` custom<SameOrAllTypes>(type($input), type($result))";
}

// How the runtime may store a constant GEMM weight (selects the kernel's layout).
// "packed_bf16": packed with bf16 elements (f32 master kept), operands rounded to bf16, f32
// accumulation (tfm-lower-precision).
// "packed_int8": quantized to int8 per output column (f32 master kept), the other operand per
// row, int32 accumulation (tfm-quantize-int8).
def Tfm_WeightLayout : Tfm_StrIn<"plain,packed,packed_bf16,packed_int8">;
def Tfm_Precision : Tfm_StrIn<"f32,bf16">;  // operand precision of a GEMM without weights

//===----------------------------------------------------------------------===//
// Values from outside the computation
//===----------------------------------------------------------------------===//

def Tfm_ParamOp : Tfm_Op<"param", [Pure]> {
  let summary = "A named model weight";
  let description = [{
    Weights are values rather than function arguments so that layout passes can rewrite their
    uses and autodiff can find them by name. Names follow models/README.md.
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tfm_PositionTableOp : Tfm_Op<"position_table", [Pure]> {
  let summary = "Sinusoidal position table [max_len, dim], a compile-time constant";
  let arguments = (ins I64Attr:$max_len, I64Attr:$dim);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embeddings and elementwise
//===----------------------------------------------------------------------===//

def Tfm_EmbeddingOp : Tfm_ExecOp<"embedding", "embedding", [Pure]> {
  let summary = "Row gather: table [V, D], ids [B, S] -> [B, S, D]";
  let arguments = (ins Tfm_F32<2>:$table, Tfm_I32<2>:$ids);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` functional-type(operands, results)";
}

def Tfm_AddPositionsOp : Tfm_ExecOp<"add_positions", "addPositions", [Pure]> {
  let summary = "x [B, S, D] + table[:S] for a table [L, D]";
  let arguments = (ins Tfm_F32<3>:$input, Tfm_F32<2>:$table);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input `,` $table attr-dict `:` functional-type(operands, results)";
}

def Tfm_ScaleOp : Tfm_UnaryOp<"scale"> {
  let summary = "x * factor";
  let arguments = (ins Tfm_F32Tensor:$input, F64Attr:$factor);
}

def Tfm_ReluOp : Tfm_UnaryOp<"relu"> { let summary = "max(x, 0)"; }
def Tfm_GeluOp : Tfm_UnaryOp<"gelu"> { let summary = "Exact (erf) GELU"; }

def Tfm_SoftmaxOp : Tfm_UnaryOp<"softmax", 1> {
  let summary = "Softmax over the last axis; an all -inf row gives zeros";
}

def Tfm_LogSoftmaxOp : Tfm_UnaryOp<"log_softmax", 1> {
  let summary = "log(softmax(x)) over the last axis: decode_step's next-token log-probabilities";
}

def Tfm_DropoutOp : Tfm_ExecOp<"dropout", "sameAsFirst", [Pure, AllTypesMatch<["input", "result"]>], 1> {
  let summary = "Inverted dropout with a counter-based mask; the identity without a step";
  let description = [{
    Without `step` (inference entry functions) it is the identity, and tfm-remove-inference-dropout
    deletes it. With `step` (tensor<i32>, training entries) element i (flat, row-major) is kept
    and scaled by 1 / (1 - rate) iff u_i >= round(rate * 2^24), where
      key = splitmix64(seed ^ splitmix64(fnv1a64(site) ^ splitmix64(step)))
      u_i = splitmix64(key + i * 0x9E3779B97F4A7C15) >> 40        (all mod 2^64)
    so the mask depends only on (seed, site, step, i): the backward pass applies the same op to
    the gradient, and a resumed run draws the same masks. `site` names the dropout site
    ("encoder.layers.0.self_attn.probs"), so masks do not depend on op order.
  }];
  let arguments = (ins Tfm_F32Tensor:$input, Optional<Tfm_I32Scalar>:$step, Tfm_Probability:$rate,
                       DefaultValuedAttr<I64Attr, "0">:$seed, DefaultValuedAttr<StrAttr, "\"\"">:$site);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input (`step` `(` $step^ `:` type($step) `)`)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tfm_AddOp : Tfm_ExecOp<"add", "elementwise", [Pure, SameOperandsAndResultType], 1> {
  let summary = "Elementwise a + b (residual connections)";
  let arguments = (ins Tfm_F32Tensor:$lhs, Tfm_F32Tensor:$rhs);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` custom<SameOrAllTypes>(type($lhs), type($rhs), type($result))";
}

def Tfm_BiasAddOp : Tfm_ExecOp<"bias_add", "biasAdd", [Pure]> {
  let summary = "x [..., N] + bias [N]";
  let arguments = (ins Tfm_F32<1, Tfm_MaxRank>:$input, Tfm_F32<1>:$bias);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input `,` $bias attr-dict `:` functional-type(operands, results)";
}

def Tfm_LayerNormOp : Tfm_ExecOp<"layer_norm", "layerNorm", [Pure]> {
  let summary = "LayerNorm over the last axis (biased variance) with scale and shift";
  let arguments = (ins Tfm_F32<1, Tfm_MaxRank>:$input, Tfm_F32<1>:$gamma, Tfm_F32<1>:$beta, Tfm_Positive:$epsilon);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Tfm_MatmulOp : Tfm_ExecOp<"matmul", "matmul", [Pure, AllElementTypesMatch<["lhs", "rhs"]>]> {
  let summary = "a [..., M, K] x b [K, N] (b [N, K] when transpose_b) -> [..., M, N]";
  let description = [{
    A linear layer is `matmul` with `transpose_b = true` on PyTorch's [out, in] weight, followed
    by `bias_add`. Leading dimensions of `a` are flattened into M. With `log_softmax` the result
    is log_softmax of the product over its last axis (tfm-fuse-epilogues folds decode_step's
    vocabulary projection and its tfm.log_softmax into one op: the rows are normalised in place
    right after the product, so the log-probabilities need no second buffer and no write of
    their own).
  }];
  let arguments = (ins Tfm_GemmOperand<2, Tfm_MaxRank>:$lhs, Tfm_GemmOperand<2>:$rhs, DefaultValuedAttr<BoolAttr, "false">:$transpose_b,
                       DefaultValuedAttr<Tfm_WeightLayout, "\"plain\"">:$weight_layout,
                       DefaultValuedAttr<BoolAttr, "false">:$log_softmax);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

def Tfm_BatchMatmulOp : Tfm_ExecOp<"batch_matmul", "batchMatmul", [Pure, AllElementTypesMatch<["lhs", "rhs"]>]> {
  let summary = "Per-(batch, head) matmul: [B, H, M, K] x [B, H, K, N] -> [B, H, M, N]";
  let description = [{
    `transpose_a` reads lhs as [B, H, K, M], `transpose_b` reads rhs as [B, H, N, K] (both through
    strides, no copy). The importer uses transpose_b (Q K^T); autodiff adds transpose_a (K and V
    gradients).
  }];
  let arguments = (ins Tfm_GemmOperand<4>:$lhs, Tfm_GemmOperand<4>:$rhs, DefaultValuedAttr<BoolAttr, "false">:$transpose_b,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_a);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Attention plumbing
//===----------------------------------------------------------------------===//

def Tfm_SplitHeadsOp : Tfm_ExecOp<"split_heads", "splitHeads", [Pure]> {
  let summary = "[B, S, H*K] -> [B, H, S, K]";
  let arguments = (ins Tfm_F32<3>:$input, Tfm_HeadCount:$heads);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Tfm_MergeHeadsOp : Tfm_ExecOp<"merge_heads", "mergeHeads", [Pure]> {
  let summary = "[B, H, S, K] -> [B, S, H*K]";
  let arguments = (ins Tfm_F32<4>:$input);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Tfm_PaddingMaskOp : Tfm_ExecOp<"padding_mask", "sameAsFirst", [Pure]> {
  let summary = "ids [B, S] -> keep [B, S] (ids != pad_id)";
  let arguments = (ins Tfm_I32<2>:$ids, Tfm_I32Value:$pad_id);
  let results = (outs Tfm_Bool<0, Tfm_MaxRank>:$result);
  let assemblyFormat = "$ids attr-dict `:` functional-type(operands, results)";
}

def Tfm_MaskOp : Tfm_ExecOp<"mask", "mask", [Pure]> {
  let summary = "Set masked attention scores to -inf";
  let description = [{
    scores [B, H, Q, K]; key_keep [B, K]. A score is masked when its key is padding, or when
    `causal` and the key position is after the query position (decoder self-attention). For
    cross-attention, `key_keep` is the source (memory) padding mask.
  }];
  let arguments = (ins Tfm_F32<4>:$scores, Tfm_Bool<2>:$key_keep, DefaultValuedAttr<BoolAttr, "false">:$causal);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$scores `,` $key_keep attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def Tfm_LabelSmoothedXentOp : Tfm_ExecOp<"label_smoothed_xent", "xent", [Pure]> {
  let summary = "Mean label-smoothed cross-entropy over non-pad targets";
  let arguments = (ins Tfm_F32<3>:$logits, Tfm_I32<2>:$targets, Tfm_Probability:$smoothing, Tfm_I32Value:$pad_id);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Fused ops: produced by the fusion passes, never by the importer
//===----------------------------------------------------------------------===//

def Tfm_LinearOp : Tfm_ExecOp<"linear", "linear", [Pure]> {
  let summary = "GEMM with epilogue: act(x W^T + bias) (+ residual)";
  let description = [{
    x [..., K], weight [N, K] (PyTorch's [out, in]), bias [N], optional residual [..., N].
    `activation` is "none", "relu" or "gelu"; it is applied before the residual add (the order
    of oneDNN post-ops). `weight_layout` is "plain" (row-major, read as given) or "packed" (the
    runtime reorders the constant weight once, at load, into the GEMM's preferred blocked layout)
    or "packed_bf16" (packed as bf16, multiplied in bf16 with f32 accumulation) or "packed_int8"
    (quantized to int8 per output column, x per row, int32 accumulation).
    Produced by tfm-fuse-epilogues, tfm-assign-layouts, tfm-lower-precision and tfm-quantize-int8.
  }];
  let arguments = (ins Tfm_F32<1, Tfm_MaxRank>:$input, Tfm_F32<2>:$weight, Tfm_F32<1>:$bias,
                       Optional<Tfm_F32<1, Tfm_MaxRank>>:$residual,
                       DefaultValuedAttr<Tfm_StrIn<"none,relu,gelu">, "\"none\"">:$activation,
                       DefaultValuedAttr<Tfm_WeightLayout, "\"plain\"">:$weight_layout);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias (`,` $residual^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_FusedAttentionOp : Tfm_ExecOp<"fused_attention", "fusedAttention", [Pure]> {
  let summary = "softmax(mask(Q K^T * scale)) V over heads read in place, heads merged";
  let description = [{
    q [B, Sq, Wq], k [B, Sk, Wk], v [B, Sk, Wv], key_keep [B, Sk] -> [B, Sq, heads * head_dim].
    Head h of Q is the column block [q_offset + h * head_dim, q_offset + (h + 1) * head_dim) of q
    (likewise K, V with k_offset, v_offset), so a merged QKV projection feeds it without a copy
    and no split/merge transposes exist. Masking is that of tfm.mask (key padding, and `causal`
    for decoder self-attention); a fully masked row gives zeros. `dropout_rate` is applied to the
    probabilities in training entries. The B x H x Sq x Sk score matrix is never materialised.
    `precision` "bf16" (tfm-lower-precision): the Q.K and P.V products take bf16 operands with f32
    accumulation; the softmax, its running max and sum and the output stay f32.
  }];
  let arguments = (ins Tfm_F32<3>:$q, Tfm_F32<3>:$k, Tfm_F32<3>:$v,
                       Tfm_Bool<2>:$key_keep, Tfm_HeadCount:$heads, Tfm_HeadCount:$head_dim,
                       Tfm_Offset:$q_offset, Tfm_Offset:$k_offset, Tfm_Offset:$v_offset, F64Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       DefaultValuedAttr<Tfm_Probability, "0.0">:$dropout_rate,
                       DefaultValuedAttr<Tfm_Precision, "\"f32\"">:$precision);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $key_keep attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_AddLayerNormOp : Tfm_ExecOp<"add_layer_norm", "addLayerNorm", [Pure]> {
  let summary = "LayerNorm(a + b): the post-norm residual join in one pass over memory";
  let arguments = (ins Tfm_F32<1, Tfm_MaxRank>:$lhs, Tfm_F32<1, Tfm_MaxRank>:$rhs, Tfm_F32<1>:$gamma,
                       Tfm_F32<1>:$beta, Tfm_Positive:$epsilon);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $gamma `,` $beta attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_ConcatOp : Tfm_ExecOp<"concat", "concat", [Pure]> {
  let summary = "Concatenate along axis 0 (merged projection weights and biases)";
  let description = [{
    All operands have equal trailing dimensions. When every operand is a weight, the runtime
    evaluates it once when weights are set, not per call.
  }];
  let arguments = (ins Variadic<Tfm_F32<1, Tfm_MaxRank>>:$inputs);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
}

def Tfm_LastPositionOp : Tfm_ExecOp<"last_position", "lastPosition", [Pure]> {
  let summary = "x [B, T, D] -> [B, 1, D]: each row's last position";
  let description = [{
    The decode entry of translation needs only the newest position's logits: taking it before
    the vocabulary projection saves (T - 1) / T of that GEMM and of the logits copied out.
  }];
  let arguments = (ins Tfm_F32<3>:$input);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Tfm_SliceLastOp : Tfm_ExecOp<"slice_last", "sliceLast", [Pure]> {
  let summary = "Columns [offset, offset + size) of the last axis";
  let description = [{
    Splits a merged projection's output back into Q, K, V. tfm-fuse-attention folds it into the
    attention op's offsets, so after fusion it only remains where attention was not fused.
  }];
  let arguments = (ins Tfm_F32<1, Tfm_MaxRank>:$input, Tfm_Offset:$offset, Tfm_Count:$size);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Incremental decoding: session state (the K/V cache) and the ops of `decode_step`, built by the
// importer for --entries=...,translate. A cache is [rows, steps, d_model] with the heads side by
// side in the last axis (head h at columns [h * head_dim, (h + 1) * head_dim)), as the projection
// GEMM writes them.
//===----------------------------------------------------------------------===//

def Tfm_StateOp : Tfm_Op<"state", [Pure]> {
  let summary = "A named session state tensor (kept across calls, updated in place)";
  let description = [{
    The runtime allocates one tensor per name per session (tfmrt::Session::bindStates binds the
    dynamic dims: [rows, steps, d_model] for a cache). Only tfm.cache_reorder and tfm.cache_write
    modify it; their results are the same state, so program order of the writes is data flow.
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Tfm_KV<0, Tfm_MaxRank>:$result);  // bf16: a K/V cache under tfm-lower-kv-precision
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tfm_CacheReorderOp : Tfm_ExecOp<"cache_reorder", "cacheReorder", [MemoryEffects<[MemWrite]>, AllTypesMatch<["cache", "result"]>], 1> {
  let summary = "Beam reordering of a cache in place: row r <- row parents[r], positions [0, step)";
  let description = [{
    cache [Rc, Tc, D] (a tfm.state or a cache op's result), parents [R] i32 (R <= Rc, each in
    [0, Rc)), step: i32 in [0, Tc], a scalar or one per row ([R]). Afterwards row r (< R) holds,
    at positions [0, step[r]), what row parents[r] held before; rows whose parent is themselves
    are not copied, so an unchanged beam costs nothing, and a row at step 0 (a sentence that has
    just entered the batch) copies nothing. Rows past R are left as they are (finished sentences
    drop out of the batch by being absent from parents). The result is the updated cache.
  }];
  let arguments = (ins Tfm_KV<3>:$cache, Tfm_I32<1>:$parents, Tfm_I32Positions:$step);
  let results = (outs Tfm_KV<3>:$result);
  let assemblyFormat = "$cache `,` $parents `,` $step attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_CacheWriteOp : Tfm_ExecOp<"cache_write", "cacheWrite", [MemoryEffects<[MemWrite]>, AllTypesMatch<["cache", "result"]>], 1> {
  let summary = "cache[r, step[r], :] = update[r, 0, update_offset + (0..D)] for every row r of update, in place";
  let description = [{
    cache [Rc, Tc, D], update [R, 1, W] with R <= Rc and update_offset + D <= W, step: i32 in
    [0, Tc), a scalar or one per row ([R]). The columns are read in place, so a key or value
    written straight from a merged projection needs no slice (tfm-fuse-attention folds
    tfm.slice_last into the offset). A bf16 cache stores the update rounded to nearest (ties
    to even). The result is the updated cache.
  }];
  let arguments = (ins Tfm_KV<3>:$cache, Tfm_F32<3>:$update, Tfm_I32Positions:$step,
                       DefaultValuedAttr<Tfm_Offset, "0">:$update_offset);
  let results = (outs Tfm_KV<3>:$result);
  let assemblyFormat = "$cache `,` $update `,` $step attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_CachedAttentionOp : Tfm_ExecOp<"cached_attention", "cachedAttention", [Pure, AllElementTypesMatch<["k_cache", "v_cache"]>]> {
  let summary = "One query row per cache row over the cache's positions [0, step[r]]";
  let description = [{
    q [R, 1, Wq] (head h at columns q_offset + h * head_dim), k_cache and v_cache [Rc, Tc,
    heads * head_dim] (R <= Rc), step: i32 in [0, Tc), a scalar or one per row ([R]) ->
    [R, 1, heads * head_dim]: query row r attends to positions 0..step[r] of cache row r
    (decoder self-attention of the newest position, which is causal by construction),
    softmax(q k^T * scale) v per head.
  }];
  let arguments = (ins Tfm_F32<3>:$q, Tfm_KV<3>:$k_cache, Tfm_KV<3>:$v_cache,
                       Tfm_I32Positions:$step, Tfm_HeadCount:$heads, Tfm_HeadCount:$head_dim,
                       DefaultValuedAttr<Tfm_Offset, "0">:$q_offset, F64Attr:$scale);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = [{
    $q `,` $k_cache `,` $v_cache `,` $step attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_GatheredAttentionOp : Tfm_ExecOp<"gathered_attention", "gatheredAttention", [Pure, AllElementTypesMatch<["k", "v"]>]> {
  let summary = "One query row attending to the keys of another batch's row rows[r]";
  let description = [{
    q [R, 1, Wq], k [N, S, Wk], v [N, S, Wv], key_keep [N, S] i1, rows [R] i32 in [0, N)
    -> [R, 1, heads * head_dim]: query row r attends to row rows[r] of k and v where key_keep
    holds (cross-attention of every hypothesis to its sentence's encoder output: the beam
    shares one copy of K and V per sentence). Heads are read in place at the offsets, as in
    tfm.fused_attention; a fully masked row gives zeros.
  }];
  let arguments = (ins Tfm_F32<3>:$q, Tfm_KV<3>:$k, Tfm_KV<3>:$v,
                       Tfm_Bool<2>:$key_keep, Tfm_I32<1>:$rows, Tfm_HeadCount:$heads, Tfm_HeadCount:$head_dim,
                       DefaultValuedAttr<Tfm_Offset, "0">:$q_offset, DefaultValuedAttr<Tfm_Offset, "0">:$k_offset,
                       DefaultValuedAttr<Tfm_Offset, "0">:$v_offset, F64Attr:$scale);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $key_keep `,` $rows attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_AttentionWeightsOp : Tfm_ExecOp<"attention_weights", "attentionWeights", [Pure]> {
  let summary = "The head-averaged attention weights of tfm.gathered_attention's query rows";
  let description = [{
    q [R, 1, Wq], k [N, S, Wk], key_keep [N, S] i1, rows [R] i32 in [0, N) -> [R, 1, S]:
    for query row r, the mean over heads h of softmax(q_h k_h^T * scale) over the keys of row
    rows[r] where key_keep holds; masked keys weigh 0 and a fully masked row is all zeros. Heads
    are read at the offsets as in tfm.gathered_attention, whose weights these are. Translation's
    word alignment (`--entries=...,translate,alignment`): the last decoder layer's
    cross-attention, as Marian's and fairseq's alignments read it.
  }];
  let arguments = (ins Tfm_F32<3>:$q, Tfm_KV<3>:$k, Tfm_Bool<2>:$key_keep, Tfm_I32<1>:$rows,
                       Tfm_HeadCount:$heads, Tfm_HeadCount:$head_dim,
                       DefaultValuedAttr<Tfm_Offset, "0">:$q_offset, DefaultValuedAttr<Tfm_Offset, "0">:$k_offset,
                       F64Attr:$scale);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $key_keep `,` $rows attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_ToBf16Op : Tfm_ExecOp<"to_bf16", "sameAsFirst", [Pure]> {
  let summary = "f32 -> bf16, rounded to nearest (ties to even)";
  let description = [{
    `encode`'s cross-attention keys and values under tfm-lower-kv-precision: stored, copied into
    the translator's slots and read by tfm.gathered_attention at half the bytes.
  }];
  let arguments = (ins Tfm_F32<0, Tfm_MaxRank>:$input);
  let results = (outs Tfm_Tensor<[BF16], "BF16", 0, Tfm_MaxRank>:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Tfm_AddPositionAtOp : Tfm_ExecOp<"add_position_at", "addPositionAt", [Pure]> {
  let summary = "x[b] + table[step[b]] for x [B, 1, D], a table [L, D] and step in [0, L) (a scalar or [B])";
  let arguments = (ins Tfm_F32<3>:$input, Tfm_F32<2>:$table, Tfm_I32Positions:$step);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input `,` $table `,` $step attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Gradients: produced by tfm-autodiff, never by the importer. `dy` is the gradient of the loss
// with respect to the forward op's result.
//===----------------------------------------------------------------------===//

def Tfm_WeightGradOp : Tfm_ExecOp<"weight_grad", "weightGrad", [Pure]> {
  let summary = "dy [..., N], x [..., K] -> [N, K]: sum over positions of dy^T x";
  let description = [{
    The gradient of a linear layer's [N, K] weight (matmul with transpose_b): every leading
    position is a row of the contraction. `precision` "bf16" (tfm-lower-precision): both operands
    rounded to bf16 (nearest even), products summed in f32; "f32" on CPUs without AVX512-BF16.
  }];
  let arguments = (ins Tfm_F32<2, Tfm_MaxRank>:$dy, Tfm_F32<2, Tfm_MaxRank>:$input,
                       DefaultValuedAttr<Tfm_Precision, "\"f32\"">:$precision);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$dy `,` $input attr-dict `:` functional-type(operands, results)";
}

def Tfm_BiasGradOp : Tfm_ExecOp<"bias_grad", "biasGrad", [Pure]> {
  let summary = "dy [..., N] -> [N]: sum over all leading positions";
  let arguments = (ins Tfm_F32<1, Tfm_MaxRank>:$dy);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$dy attr-dict `:` functional-type(operands, results)";
}

def Tfm_ReluGradOp : Tfm_ExecOp<"relu_grad", "elementwise", [Pure, SameOperandsAndResultType], 1> {
  let summary = "dy where the forward value > 0, else 0 (relu's input or output: both are > 0 at the same places)";
  let arguments = (ins Tfm_F32Tensor:$input, Tfm_F32Tensor:$dy);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input `,` $dy attr-dict `:` custom<SameOrAllTypes>(type($input), type($dy), type($result))";
}

def Tfm_GeluGradOp : Tfm_ExecOp<"gelu_grad", "elementwise", [Pure, SameOperandsAndResultType], 1> {
  let summary = "dy * GELU'(x) for the exact (erf) GELU";
  let arguments = (ins Tfm_F32Tensor:$input, Tfm_F32Tensor:$dy);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input `,` $dy attr-dict `:` custom<SameOrAllTypes>(type($input), type($dy), type($result))";
}

def Tfm_SoftmaxGradOp : Tfm_ExecOp<"softmax_grad", "elementwise", [Pure, SameOperandsAndResultType], 1> {
  let summary = "y * (dy - sum(dy * y)) over the last axis, y the softmax output";
  let description = [{
    Zero where y is zero: masked (-inf) scores, and fully masked rows, get no gradient, so
    tfm.mask needs no backward op of its own.
  }];
  let arguments = (ins Tfm_F32<1, Tfm_MaxRank>:$output, Tfm_F32<1, Tfm_MaxRank>:$dy);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$output `,` $dy attr-dict `:` custom<SameOrAllTypes>(type($output), type($dy), type($result))";
}

def Tfm_LayerNormGradOp : Tfm_ExecOp<"layer_norm_grad", "layerNormGrad", [Pure]> {
  let summary = "LayerNorm backward for the input: dx from x, gamma and dy";
  let description = [{
    Recomputes mean and variance of x (biased, + epsilon) rather than storing them. With
    xhat = (x - mean) * rstd and g = dy * gamma: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
    The beta gradient is tfm.bias_grad of dy, the gamma gradient tfm.layer_norm_gamma_grad.
  }];
  let arguments = (ins Tfm_F32<1, Tfm_MaxRank>:$input, Tfm_F32<1>:$gamma, Tfm_F32<1, Tfm_MaxRank>:$dy, Tfm_Positive:$epsilon);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $dy attr-dict `:` functional-type(operands, results)
  }];
}

def Tfm_LayerNormGammaGradOp : Tfm_ExecOp<"layer_norm_gamma_grad", "layerNormGammaGrad", [Pure]> {
  let summary = "x [..., N], dy [..., N] -> [N]: sum over positions of dy * xhat";
  let arguments = (ins Tfm_F32<1, Tfm_MaxRank>:$input, Tfm_F32<1, Tfm_MaxRank>:$dy, Tfm_Positive:$epsilon);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Tfm_EmbeddingGradOp : Tfm_ExecOp<"embedding_grad", "embeddingGrad", [Pure]> {
  let summary = "ids [B, S], dy [B, S, D] -> [V, D]: row ids[b, s] accumulates dy[b, s]";
  let description = [{
    V = num_rows (the table's row count; ids must be below it). Every id is counted, padding included,
    as in the forward gather; padding positions carry no loss, so their dy is zero anyway unless a
    later op mixes positions.
  }];
  let arguments = (ins Tfm_I32<2>:$ids, Tfm_F32<3>:$dy, Tfm_Count:$num_rows);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$ids `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Tfm_PositionsGradOp : Tfm_ExecOp<"positions_grad", "positionsGrad", [Pure]> {
  let summary = "dy [B, S, D] -> [L, D]: row s < S is sum over b of dy[b, s]; rows >= S are zero";
  let description = [{
    The gradient of a learned position table [L, D] used by tfm.add_positions; L = num_rows.
  }];
  let arguments = (ins Tfm_F32<3>:$dy, Tfm_Count:$num_rows);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$dy attr-dict `:` functional-type(operands, results)";
}

def Tfm_LabelSmoothedXentGradOp : Tfm_ExecOp<"label_smoothed_xent_grad", "xentGrad", [Pure]> {
  let summary = "d(mean label-smoothed cross-entropy)/d logits";
  let description = [{
    (softmax(logits) - q) / N at non-pad targets, 0 at pad targets, where q is the smoothed
    target distribution of tfm.label_smoothed_xent and N the number of non-pad targets (the
    loss is the final result, so its own gradient is 1).
  }];
  let arguments = (ins Tfm_F32<3>:$logits, Tfm_I32<2>:$targets, Tfm_Probability:$smoothing, Tfm_I32Value:$pad_id);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Optimizer: produced by tfm-apply-adam after tfm-autodiff, never by the importer.
//===----------------------------------------------------------------------===//

def Tfm_LrScheduleOp : Tfm_ExecOp<"lr_schedule", "scalar", [Pure]> {
  let summary = "The paper's learning rate: lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)";
  let description = [{
    step: tensor<i32> (rank 0, >= 1; the runtime refuses 0 and negatives) -> tensor<f32>.
  }];
  let arguments = (ins Tfm_I32Scalar:$step, Tfm_Positive:$lr_scale, Tfm_Count:$d_model, Tfm_Count:$warmup_steps);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$step attr-dict `:` functional-type(operands, results)";
}

def Tfm_SumSquaresOp : Tfm_ExecOp<"sum_squares", "scalar", [Pure]> {
  let summary = "sum(x^2) over every element, as a tensor<f32> (a gradient's part of the global norm)";
  let description = [{
    Accumulated in f64, returned in f32. tfm-apply-adam sums these over every gradient when the
    spec clips gradients (training.clip_norm), before any parameter is updated.
  }];
  let arguments = (ins Tfm_F32Tensor:$input);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Tfm_ClipScaleOp : Tfm_ExecOp<"clip_scale", "scalar", [Pure]> {
  let summary = "Gradient clipping's factor: min(1, max_norm / (sqrt(sq_norm) + 1e-6))";
  let description = [{
    sq_norm: tensor<f32>, the squared global gradient norm (summed tfm.sum_squares) -> tensor<f32>,
    the factor every gradient is multiplied by before the Adam update (PyTorch's
    clip_grad_norm_, fairseq's and Marian's --clip-norm). A non-finite sq_norm gives a non-finite
    factor: the step's update is then not finite either, as without clipping.
  }];
  let arguments = (ins Tfm_F32<0>:$sq_norm, Tfm_Positive:$max_norm);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = "$sq_norm attr-dict `:` functional-type(operands, results)";
}

def Tfm_AdamUpdateOp : Tfm_ExecOp<"adam_update", "adamUpdate", [MemoryEffects<[MemWrite]>]> {
  let summary = "One Adam step on a parameter and its moments, in place; returns sum(grad^2)";
  let description = [{
    param must be a tfm.param result; grad has its shape; lr: tensor<f32>; step: tensor<i32>
    (>= 1, the step being taken); m, v: the moments, session state of the parameter's shape
    (tfm.state "adam.m/<param>", "adam.v/<param>"). PyTorch's bias-corrected Adam without
    weight decay:
      m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2,
      param -= lr * (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + epsilon).
    param, m and v are written in place. The moments are zeros when weights are set and are saved
    and restored with training checkpoints. The parameter is written after every other use of it
    in the function (the pass puts all updates just before the return). With grad_scale
    (tensor<f32>, tfm.clip_scale's result: gradient clipping) the update uses grad_scale * g for g.
    With weight_decay (decoupled, as torch.optim.AdamW and fairseq's Adam) the parameter is
    first multiplied by 1 - lr * weight_decay. The result, sum(grad^2) of the unscaled gradient,
    gives the global gradient norm.
  }];
  let arguments = (ins Tfm_F32Tensor:$param, Tfm_F32Tensor:$grad, Tfm_F32<0>:$lr, Tfm_I32Scalar:$step,
                       Tfm_F32Tensor:$m, Tfm_F32Tensor:$v, Optional<Tfm_F32<0>>:$grad_scale,
                       Tfm_Probability:$beta1, Tfm_Probability:$beta2, Tfm_Positive:$epsilon,
                       DefaultValuedAttr<Tfm_Probability, "0.0">:$weight_decay);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = [{
    $param `,` $grad `,` $lr `,` $step `,` $m `,` $v (`scale` $grad_scale^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_GradAccumulateOp : Tfm_ExecOp<"grad_accumulate", "gradAccumulate", [MemoryEffects<[MemWrite]>, AllTypesMatch<["accumulator", "result"]>], 1> {
  let summary = "accumulator = (reset ? 0 : accumulator) + weight * grad, in place (gradient accumulation)";
  let description = [{
    accumulator: a tfm.state of the parameter's shape ("grad_accum/<param>"); grad: its gradient
    for one micro-batch; weight: tensor<f32>, the micro-batch's share of the update's target
    tokens; reset: tensor<i32>, nonzero on the first micro-batch of an update (the accumulator is
    overwritten, so whatever it held, including what a checkpoint does not save, is never read).
    The result is the updated accumulator (tfm-accumulate-gradients; apply_update reads it).
  }];
  let arguments = (ins Tfm_F32Tensor:$accumulator, Tfm_F32Tensor:$grad, Tfm_F32<0>:$weight, Tfm_I32Scalar:$reset);
  let results = (outs Tfm_F32Tensor:$result);
  let assemblyFormat = [{
    $accumulator `,` $grad `,` $weight `,` $reset attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif
