// RUN: tfm-opt %s -split-input-file -pass-pipeline="builtin.module(func.func(tfm-fuse-attention{report=true}))" 2>/dev/null | FileCheck %s
// RUN: tfm-opt %s -split-input-file -pass-pipeline="builtin.module(func.func(tfm-fuse-attention{report=true}))" 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT

// Decoder self-attention over a merged QKV projection: the slices and head transposes fold
// into column offsets; the causal flag and the scale carry over.
// CHECK-LABEL: func.func @causal_self_attention
// CHECK: %[[OUT:.*]] = tfm.fused_attention %arg0, %arg0, %arg0, %arg1 {causal = true, dropout_rate = 1.000000e-01 : f64, head_dim = 4 : i64, heads = 2 : i64, k_offset = 8 : i64, q_offset = 0 : i64, scale = 5.000000e-01 : f64, v_offset = 16 : i64} : (tensor<?x?x24xf32>, tensor<?x?x24xf32>, tensor<?x?x24xf32>, tensor<?x?xi1>) -> tensor<?x?x8xf32>
// CHECK-NOT: tfm.softmax
// CHECK-NOT: tfm.split_heads
// CHECK-NOT: tfm.slice_last
// CHECK: return %[[OUT]]
// REPORT: spec.yaml:7:3: remark: fuse-attention: decoder.layers.0.self_attn: fused (causal self-attention); Q, K, V read in place from one merged projection
func.func @causal_self_attention(%qkv: tensor<?x?x24xf32>, %keep: tensor<?x?xi1>) -> tensor<?x?x8xf32> {
  %q0 = tfm.slice_last %qkv {offset = 0, size = 8} : (tensor<?x?x24xf32>) -> tensor<?x?x8xf32> loc(#self)
  %k0 = tfm.slice_last %qkv {offset = 8, size = 8} : (tensor<?x?x24xf32>) -> tensor<?x?x8xf32> loc(#self)
  %v0 = tfm.slice_last %qkv {offset = 16, size = 8} : (tensor<?x?x24xf32>) -> tensor<?x?x8xf32> loc(#self)
  %q = tfm.split_heads %q0 {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> loc(#self)
  %k = tfm.split_heads %k0 {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> loc(#self)
  %v = tfm.split_heads %v0 {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> loc(#self)
  %s = tfm.batch_matmul %q, %k {transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32> loc(#self)
  %s1 = tfm.scale %s {factor = 0.5 : f64} : tensor<?x2x?x?xf32> loc(#self)
  %s2 = tfm.mask %s1, %keep {causal = true} : (tensor<?x2x?x?xf32>, tensor<?x?xi1>) -> tensor<?x2x?x?xf32> loc(#self)
  %p = tfm.softmax %s2 : tensor<?x2x?x?xf32> loc(#self)
  %p1 = tfm.dropout %p {rate = 0.1 : f64} : tensor<?x2x?x?xf32> loc(#self)
  %c = tfm.batch_matmul %p1, %v : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32> loc(#self)
  %o = tfm.merge_heads %c : (tensor<?x2x?x4xf32>) -> tensor<?x?x8xf32> loc(#self)
  return %o : tensor<?x?x8xf32>
}
#self = loc("decoder.layers.0.self_attn"("spec.yaml":7:3))

// -----
// Cross-attention: Q from the decoder, K and V from one merged projection of the memory, masked
// by the source padding; no dropout op means dropout_rate 0.
// CHECK-LABEL: func.func @cross_attention
// CHECK: tfm.fused_attention %arg0, %arg1, %arg1, %arg2 {head_dim = 4 : i64, heads = 2 : i64, k_offset = 0 : i64, q_offset = 0 : i64, scale = 5.000000e-01 : f64, v_offset = 8 : i64} : (tensor<?x?x8xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?xi1>) -> tensor<?x?x8xf32>
// REPORT: remark: fuse-attention: decoder.layers.0.cross_attn: fused (cross-attention, memory mask); K, V read in place from one merged projection
func.func @cross_attention(%y: tensor<?x?x8xf32>, %kv: tensor<?x?x16xf32>, %src_keep: tensor<?x?xi1>) -> tensor<?x?x8xf32> {
  %k0 = tfm.slice_last %kv {offset = 0, size = 8} : (tensor<?x?x16xf32>) -> tensor<?x?x8xf32> loc(#cross)
  %v0 = tfm.slice_last %kv {offset = 8, size = 8} : (tensor<?x?x16xf32>) -> tensor<?x?x8xf32> loc(#cross)
  %q = tfm.split_heads %y {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> loc(#cross)
  %k = tfm.split_heads %k0 {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> loc(#cross)
  %v = tfm.split_heads %v0 {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> loc(#cross)
  %s = tfm.batch_matmul %q, %k {transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32> loc(#cross)
  %s1 = tfm.scale %s {factor = 0.5 : f64} : tensor<?x2x?x?xf32> loc(#cross)
  %s2 = tfm.mask %s1, %src_keep : (tensor<?x2x?x?xf32>, tensor<?x?xi1>) -> tensor<?x2x?x?xf32> loc(#cross)
  %p = tfm.softmax %s2 : tensor<?x2x?x?xf32> loc(#cross)
  %c = tfm.batch_matmul %p, %v : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32> loc(#cross)
  %o = tfm.merge_heads %c : (tensor<?x2x?x4xf32>) -> tensor<?x?x8xf32> loc(#cross)
  return %o : tensor<?x?x8xf32>
}
#cross = loc("decoder.layers.0.cross_attn"("spec.yaml":7:3))

// -----
// Negative: the probabilities are also returned, so the score matrix must exist; nothing fuses.
// CHECK-LABEL: func.func @probabilities_escape
// CHECK: tfm.softmax
// CHECK-NOT: tfm.fused_attention
// REPORT: remark: fuse-attention: encoder.layers.0.self_attn: not fused: the attention probabilities are used elsewhere
func.func @probabilities_escape(%x: tensor<?x?x8xf32>, %keep: tensor<?x?xi1>) -> (tensor<?x?x8xf32>, tensor<?x2x?x?xf32>) {
  %q = tfm.split_heads %x {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> loc(#enc)
  %s = tfm.batch_matmul %q, %q {transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32> loc(#enc)
  %s1 = tfm.scale %s {factor = 0.5 : f64} : tensor<?x2x?x?xf32> loc(#enc)
  %s2 = tfm.mask %s1, %keep : (tensor<?x2x?x?xf32>, tensor<?x?xi1>) -> tensor<?x2x?x?xf32> loc(#enc)
  %p = tfm.softmax %s2 : tensor<?x2x?x?xf32> loc(#enc)
  %c = tfm.batch_matmul %p, %q : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32> loc(#enc)
  %o = tfm.merge_heads %c : (tensor<?x2x?x4xf32>) -> tensor<?x?x8xf32> loc(#enc)
  return %o, %p : tensor<?x?x8xf32>, tensor<?x2x?x?xf32>
}
#enc = loc("encoder.layers.0.self_attn"("spec.yaml":7:3))

// -----
// Negative: a training dropout (with a step) draws masks, which the fused kernel does not; kept
// unfused even when nothing else reads the probabilities.
// CHECK-LABEL: func.func @training_dropout
// CHECK: tfm.dropout
// CHECK-NOT: tfm.fused_attention
// REPORT: remark: fuse-attention: encoder.layers.0.self_attn: not fused: training dropout on the attention probabilities
func.func @training_dropout(%x: tensor<?x?x8xf32>, %keep: tensor<?x?xi1>, %step: tensor<i32>) -> tensor<?x?x8xf32> {
  %q = tfm.split_heads %x {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> loc(#enc2)
  %s = tfm.batch_matmul %q, %q {transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32> loc(#enc2)
  %s1 = tfm.scale %s {factor = 0.5 : f64} : tensor<?x2x?x?xf32> loc(#enc2)
  %s2 = tfm.mask %s1, %keep : (tensor<?x2x?x?xf32>, tensor<?x?xi1>) -> tensor<?x2x?x?xf32> loc(#enc2)
  %p = tfm.softmax %s2 : tensor<?x2x?x?xf32> loc(#enc2)
  %p1 = tfm.dropout %p step(%step : tensor<i32>) {rate = 0.1 : f64, site = "encoder.layers.0.self_attn.probs"} : tensor<?x2x?x?xf32> loc(#enc2)
  %c = tfm.batch_matmul %p1, %q : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32> loc(#enc2)
  %o = tfm.merge_heads %c : (tensor<?x2x?x4xf32>) -> tensor<?x?x8xf32> loc(#enc2)
  return %o : tensor<?x?x8xf32>
}
#enc2 = loc("encoder.layers.0.self_attn"("spec.yaml":7:3))

// -----
// Negative: a softmax that is not attention (no mask / Q*K^T feeding it).
// CHECK-LABEL: func.func @plain_softmax
// CHECK: tfm.softmax
// REPORT: remark: fuse-attention: <unnamed>: not fused: softmax input is not a tfm.mask
func.func @plain_softmax(%x: tensor<?x?x2x?xf32>) -> tensor<?x?x2x?xf32> {
  %p = tfm.softmax %x : tensor<?x?x2x?xf32>
  return %p : tensor<?x?x2x?xf32>
}

// -----
// Negative: a causal mask between two different sequences (query i, key j > i) is not the fused
// op's rule (j > i + Sk - Sq), so it is left alone.
// CHECK-LABEL: func.func @causal_across_sequences
// CHECK: tfm.softmax
// CHECK-NOT: tfm.fused_attention
// REPORT: remark: fuse-attention: x.attn: not fused: causal mask over queries and keys from different sequences
func.func @causal_across_sequences(%a: tensor<?x?x8xf32>, %b: tensor<?x?x8xf32>, %keep: tensor<?x?xi1>) -> tensor<?x?x8xf32> {
  %q = tfm.split_heads %a {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> loc(#x)
  %k = tfm.split_heads %b {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> loc(#x)
  %s = tfm.batch_matmul %q, %k {transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32> loc(#x)
  %s1 = tfm.scale %s {factor = 0.5 : f64} : tensor<?x2x?x?xf32> loc(#x)
  %s2 = tfm.mask %s1, %keep {causal = true} : (tensor<?x2x?x?xf32>, tensor<?x?xi1>) -> tensor<?x2x?x?xf32> loc(#x)
  %p = tfm.softmax %s2 : tensor<?x2x?x?xf32> loc(#x)
  %c = tfm.batch_matmul %p, %k : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32> loc(#x)
  %o = tfm.merge_heads %c : (tensor<?x2x?x4xf32>) -> tensor<?x?x8xf32> loc(#x)
  return %o : tensor<?x?x8xf32>
}
#x = loc("x.attn"("spec.yaml":7:3))

// -----
// decode_step's self-attention over a merged QKV projection: the query slice folds into
// q_offset, the key and value slices into the cache writes' update_offset; the slices are gone.
// CHECK-LABEL: func.func @decode_slices
// CHECK-NOT: tfm.slice_last
// CHECK: %[[K:.*]] = tfm.cache_write %{{.*}}, %arg0, %arg1 {update_offset = 8 : i64}
// CHECK: %[[V:.*]] = tfm.cache_write %{{.*}}, %arg0, %arg1 {update_offset = 16 : i64}
// CHECK: tfm.cached_attention %arg0, %[[K]], %[[V]], %arg1 {head_dim = 4 : i64, heads = 2 : i64, scale = 5.000000e-01 : f64}
// CHECK-NOT: tfm.slice_last
// REPORT: remark: fuse-attention: d.attn: cache update read in place from the merged projection
// REPORT: remark: fuse-attention: d.attn: cache update read in place from the merged projection
// REPORT: remark: fuse-attention: d.attn: query read in place from the merged projection
func.func @decode_slices(%qkv: tensor<?x1x24xf32>, %step: tensor<i32>) -> tensor<?x1x8xf32> {
  %q = tfm.slice_last %qkv {offset = 0 : i64, size = 8 : i64} : (tensor<?x1x24xf32>) -> tensor<?x1x8xf32> loc(#d)
  %k = tfm.slice_last %qkv {offset = 8 : i64, size = 8 : i64} : (tensor<?x1x24xf32>) -> tensor<?x1x8xf32> loc(#d)
  %v = tfm.slice_last %qkv {offset = 16 : i64, size = 8 : i64} : (tensor<?x1x24xf32>) -> tensor<?x1x8xf32> loc(#d)
  %kc = tfm.state "k" : tensor<?x?x8xf32> loc(#d)
  %kw = tfm.cache_write %kc, %k, %step : (tensor<?x?x8xf32>, tensor<?x1x8xf32>, tensor<i32>) -> tensor<?x?x8xf32> loc(#d)
  %vc = tfm.state "v" : tensor<?x?x8xf32> loc(#d)
  %vw = tfm.cache_write %vc, %v, %step : (tensor<?x?x8xf32>, tensor<?x1x8xf32>, tensor<i32>) -> tensor<?x?x8xf32> loc(#d)
  %o = tfm.cached_attention %q, %kw, %vw, %step {head_dim = 4 : i64, heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<i32>) -> tensor<?x1x8xf32> loc(#d)
  return %o : tensor<?x1x8xf32>
}
#d = loc("d.attn"("spec.yaml":9:3))
