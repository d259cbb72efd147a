// RUN: tfm-opt %s -tfm-lower-kv-precision="report=true" 2>/dev/null | FileCheck %s
// RUN: tfm-opt %s -tfm-lower-kv-precision="report=true" 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT

// encode's cross K/V results become bf16 through tfm.to_bf16 because decode_step takes them (by
// name) only as tfm.gathered_attention keys and values; its memory result, which nothing takes
// that way, stays f32.
// CHECK-LABEL: func.func @encode
// CHECK-SAME: -> (tensor<?x?x8xf32> {tfm.name = "memory"}, tensor<?x?x8xbf16> {tfm.name = "cross_k.0"}, tensor<?x?x8xbf16> {tfm.name = "cross_v.0"})
// CHECK: %[[K:.*]] = tfm.to_bf16 %arg1 : (tensor<?x?x8xf32>) -> tensor<?x?x8xbf16>
// CHECK: %[[V:.*]] = tfm.to_bf16 %arg2 : (tensor<?x?x8xf32>) -> tensor<?x?x8xbf16>
// CHECK: return %arg0, %[[K]], %[[V]]
func.func @encode(%m: tensor<?x?x8xf32>, %k: tensor<?x?x8xf32>, %v: tensor<?x?x8xf32>)
    -> (tensor<?x?x8xf32> {tfm.name = "memory"}, tensor<?x?x8xf32> {tfm.name = "cross_k.0"}, tensor<?x?x8xf32> {tfm.name = "cross_v.0"}) {
  return %m, %k, %v : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// The self-attention cache (read only by cache ops and tfm.cached_attention) becomes bf16 along
// its whole chain; the cross K/V arguments become bf16 (the keys are also read by
// tfm.attention_weights, the alignment: it reads bf16 keys too); `other`, also read by tfm.scale,
// and the Adam-like state read by tfm.adam_update stay f32.
// CHECK-LABEL: func.func @decode_step
// CHECK-SAME: %arg4: tensor<?x?x8xbf16> {tfm.name = "cross_k.0"}, %arg5: tensor<?x?x8xbf16> {tfm.name = "cross_v.0"}, %arg6: tensor<?x?x8xf32> {tfm.name = "other"}
// CHECK: tfm.state "k_cache" : tensor<?x?x8xbf16>
// CHECK: tfm.cache_reorder {{.*}} -> tensor<?x?x8xbf16>
// CHECK: tfm.cache_write {{.*}} -> tensor<?x?x8xbf16>
// CHECK: tfm.state "v_cache" : tensor<?x?x8xbf16>
// CHECK: tfm.cached_attention {{.*}} : (tensor<?x1x8xf32>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>, tensor<?xi32>) -> tensor<?x1x8xf32>
// CHECK: tfm.gathered_attention {{.*}} : (tensor<?x1x8xf32>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>, tensor<?x?xi1>, tensor<?xi32>)
// CHECK: tfm.gathered_attention {{.*}} : (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi1>, tensor<?xi32>)
// CHECK: tfm.attention_weights {{.*}} : (tensor<?x1x8xf32>, tensor<?x?x8xbf16>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x?xf32>
// CHECK: tfm.state "seen" : tensor<?x?x8xf32>
func.func @decode_step(%x: tensor<?x1x8xf32>, %step: tensor<?xi32>, %parents: tensor<?xi32>, %rows: tensor<?xi32>,
                       %k: tensor<?x?x8xf32> {tfm.name = "cross_k.0"}, %v: tensor<?x?x8xf32> {tfm.name = "cross_v.0"},
                       %other: tensor<?x?x8xf32> {tfm.name = "other"}, %keep: tensor<?x?xi1>)
    -> (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x?xf32>) {
  %kc0 = tfm.state "k_cache" : tensor<?x?x8xf32>
  %kc1 = tfm.cache_reorder %kc0, %parents, %step : (tensor<?x?x8xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x?x8xf32>
  %kc2 = tfm.cache_write %kc1, %x, %step : (tensor<?x?x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x?x8xf32>
  %vc0 = tfm.state "v_cache" : tensor<?x?x8xf32>
  %vc1 = tfm.cache_write %vc0, %x, %step : (tensor<?x?x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x?x8xf32>
  %a = tfm.cached_attention %x, %kc2, %vc1, %step {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?xi32>) -> tensor<?x1x8xf32>
  %g = tfm.gathered_attention %a, %k, %v, %keep, %rows {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x8xf32>
  %h = tfm.gathered_attention %g, %other, %other, %keep, %rows {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x8xf32>
  %w = tfm.attention_weights %g, %k, %keep, %rows {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x?xf32>
  %o = tfm.scale %other {factor = 1.0 : f64} : tensor<?x?x8xf32>
  %s0 = tfm.state "seen" : tensor<?x?x8xf32>
  %s1 = tfm.cache_write %s0, %x, %step : (tensor<?x?x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x?x8xf32>
  return %h, %o, %s1, %w : tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x?xf32>
}

// Keys and values of one attention share an element type: `v_cache2` is also returned (not a
// cache only), so `k_cache2`, which alone would qualify, stays f32 with it; likewise the named
// argument `k_only`, whose partner `v_used` is also scaled.
// CHECK-LABEL: func.func @one_side_only
// CHECK-SAME: %arg3: tensor<?x?x8xf32> {tfm.name = "k_only"}, %arg4: tensor<?x?x8xf32> {tfm.name = "v_used"}
// CHECK: tfm.state "k_cache2" : tensor<?x?x8xf32>
// CHECK: tfm.state "v_cache2" : tensor<?x?x8xf32>
// CHECK-NOT: bf16
func.func @one_side_only(%x: tensor<?x1x8xf32>, %step: tensor<?xi32>, %rows: tensor<?xi32>,
                         %k: tensor<?x?x8xf32> {tfm.name = "k_only"}, %v: tensor<?x?x8xf32> {tfm.name = "v_used"},
                         %keep: tensor<?x?xi1>) -> (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %kc0 = tfm.state "k_cache2" : tensor<?x?x8xf32>
  %kc1 = tfm.cache_write %kc0, %x, %step : (tensor<?x?x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x?x8xf32>
  %vc0 = tfm.state "v_cache2" : tensor<?x?x8xf32>
  %vc1 = tfm.cache_write %vc0, %x, %step : (tensor<?x?x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x?x8xf32>
  %a = tfm.cached_attention %x, %kc1, %vc1, %step {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?xi32>) -> tensor<?x1x8xf32>
  %g = tfm.gathered_attention %a, %k, %v, %keep, %rows {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x8xf32>
  %o = tfm.scale %v {factor = 1.0 : f64} : tensor<?x?x8xf32>
  return %g, %vc1, %o : tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// REPORT: remark: lower-kv-precision: {{.*}}: bf16 cache (rounded as written, widened as read)
// REPORT: remark: lower-kv-precision: {{.*}}: bf16 cache (rounded as written, widened as read)
// REPORT: remark: lower-kv-precision: {{.*}}: bf16 argument 'cross_k.0' (cross-attention K/V)
// REPORT: remark: lower-kv-precision: {{.*}}: bf16 argument 'cross_v.0' (cross-attention K/V)
// REPORT: remark: lower-kv-precision: {{.*}}: bf16 result 'cross_k.0'
// REPORT: remark: lower-kv-precision: {{.*}}: bf16 result 'cross_v.0'
