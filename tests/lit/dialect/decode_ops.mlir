// RUN: tfm-opt %s | FileCheck %s
// RUN: tfm-opt %s | tfm-opt | FileCheck %s
// RUN: tfm-opt %s -canonicalize -cse | FileCheck %s --check-prefix=KEPT
// The incremental-decoding ops round-trip; the in-place cache updates survive canonicalize + CSE
// (they write session state) while their results chain the writes in program order.

// CHECK-LABEL: func.func @decode_layer
// KEPT-LABEL: func.func @decode_layer
func.func @decode_layer(%tok: tensor<?x1x8xf32>, %step: tensor<i32>, %parents: tensor<?xi32>, %rows: tensor<?xi32>,
                        %k: tensor<?x?x8xf32>, %v: tensor<?x?x8xf32>, %keep: tensor<?x?xi1>) -> (tensor<?x1x8xf32>, tensor<?x1x8xf32>) {
  %pos = tfm.position_table {max_len = 16, dim = 8} : tensor<16x8xf32>
  // CHECK: tfm.add_position_at %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x1x8xf32>, tensor<16x8xf32>, tensor<i32>) -> tensor<?x1x8xf32>
  %x = tfm.add_position_at %tok, %pos, %step : (tensor<?x1x8xf32>, tensor<16x8xf32>, tensor<i32>) -> tensor<?x1x8xf32>
  // CHECK: tfm.state "dec.k_cache" : tensor<?x?x8xf32>
  %c0 = tfm.state "dec.k_cache" : tensor<?x?x8xf32>
  // CHECK: tfm.cache_reorder %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<?xi32>, tensor<i32>) -> tensor<?x?x8xf32>
  // KEPT: tfm.cache_reorder
  %c1 = tfm.cache_reorder %c0, %parents, %step : (tensor<?x?x8xf32>, tensor<?xi32>, tensor<i32>) -> tensor<?x?x8xf32>
  // CHECK: tfm.cache_write %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<?x1x8xf32>, tensor<i32>) -> tensor<?x?x8xf32>
  // KEPT: tfm.cache_write
  %c2 = tfm.cache_write %c1, %x, %step : (tensor<?x?x8xf32>, tensor<?x1x8xf32>, tensor<i32>) -> tensor<?x?x8xf32>
  // CHECK: tfm.cached_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 4 : i64, heads = 2 : i64, scale = 5.000000e-01 : f64}
  %a = tfm.cached_attention %x, %c2, %c2, %step {heads = 2, head_dim = 4, q_offset = 0, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<i32>) -> tensor<?x1x8xf32>
  // CHECK: tfm.gathered_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 4 : i64, heads = 2 : i64
  %g = tfm.gathered_attention %a, %k, %v, %keep, %rows {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x8xf32>
  return %a, %g : tensor<?x1x8xf32>, tensor<?x1x8xf32>
}

// Word alignment: the head-averaged weights of a gathered attention's query rows over the keys of
// their sentences ([R, 1, S]; S stays dynamic), f32 or bf16 keys read at an offset; pure (CSE merges
// a duplicate, an unused one is removed).
// CHECK-LABEL: func.func @alignment
// KEPT-LABEL: func.func @alignment
func.func @alignment(%q: tensor<?x1x8xf32>, %k: tensor<?x?x10xf32>, %kb: tensor<3x5x8xbf16>, %keep: tensor<?x?xi1>,
                     %keep3: tensor<3x5xi1>, %rows: tensor<?xi32>) -> (tensor<?x1x?xf32>, tensor<?x1x?xf32>, tensor<?x1x5xf32>) {
  // CHECK: tfm.attention_weights %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 4 : i64, heads = 2 : i64, k_offset = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<?x1x8xf32>, tensor<?x?x10xf32>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x?xf32>
  // KEPT-COUNT-2: tfm.attention_weights
  // KEPT-NOT: tfm.attention_weights
  %w = tfm.attention_weights %q, %k, %keep, %rows {heads = 2, head_dim = 4, k_offset = 2, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x10xf32>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x?xf32>
  %same = tfm.attention_weights %q, %k, %keep, %rows {heads = 2, head_dim = 4, k_offset = 2, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x10xf32>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x?xf32>
  %unused = tfm.attention_weights %q, %k, %keep, %rows {heads = 1, head_dim = 8, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x10xf32>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x?xf32>
  // CHECK: tfm.attention_weights {{.*}} : (tensor<?x1x8xf32>, tensor<3x5x8xbf16>, tensor<3x5xi1>, tensor<?xi32>) -> tensor<?x1x5xf32>
  %b = tfm.attention_weights %q, %kb, %keep3, %rows {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<3x5x8xbf16>, tensor<3x5xi1>, tensor<?xi32>) -> tensor<?x1x5xf32>
  return %w, %same, %b : tensor<?x1x?xf32>, tensor<?x1x?xf32>, tensor<?x1x5xf32>
}

// Continuous batching: one position per row (step [R]).
// CHECK-LABEL: func.func @per_row_positions
// CHECK: tfm.add_position_at %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x1x8xf32>, tensor<16x8xf32>, tensor<?xi32>) -> tensor<?x1x8xf32>
// CHECK: tfm.cache_reorder %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x?x8xf32>
// CHECK: tfm.cache_write %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x?x8xf32>
// CHECK: tfm.cached_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {{.*}} : (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?xi32>) -> tensor<?x1x8xf32>
// KEPT-LABEL: func.func @per_row_positions
// KEPT: tfm.cache_reorder
// KEPT: tfm.cache_write
func.func @per_row_positions(%tok: tensor<?x1x8xf32>, %steps: tensor<?xi32>, %parents: tensor<?xi32>) -> tensor<?x1x8xf32> {
  %pos = tfm.position_table {max_len = 16, dim = 8} : tensor<16x8xf32>
  %x = tfm.add_position_at %tok, %pos, %steps : (tensor<?x1x8xf32>, tensor<16x8xf32>, tensor<?xi32>) -> tensor<?x1x8xf32>
  %c0 = tfm.state "dec.k_cache" : tensor<?x?x8xf32>
  %c1 = tfm.cache_reorder %c0, %parents, %steps : (tensor<?x?x8xf32>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x?x8xf32>
  %c2 = tfm.cache_write %c1, %x, %steps : (tensor<?x?x8xf32>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x?x8xf32>
  %a = tfm.cached_attention %x, %c2, %c2, %steps {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?xi32>) -> tensor<?x1x8xf32>
  return %a : tensor<?x1x8xf32>
}

// Gradient accumulation writes its state in place: kept by canonicalize + CSE though its result
// is unused.
// CHECK-LABEL: func.func @accumulate
// CHECK: tfm.grad_accumulate %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<i32>) -> tensor<4x8xf32>
// KEPT-LABEL: func.func @accumulate
// KEPT: tfm.grad_accumulate
func.func @accumulate(%g: tensor<4x8xf32>, %w: tensor<f32>, %reset: tensor<i32>) {
  %acc = tfm.state "grad_accum/p" : tensor<4x8xf32>
  %0 = tfm.grad_accumulate %acc, %g, %w, %reset : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<i32>) -> tensor<4x8xf32>
  return
}

// bf16 keys and values (tfm-lower-kv-precision): a bf16 cache chain, bf16 cross K/V, and
// tfm.to_bf16; the cache ops' results take the cache's element type.
// CHECK-LABEL: func.func @bf16_kv
func.func @bf16_kv(%x: tensor<?x1x8xf32>, %step: tensor<?xi32>, %parents: tensor<?xi32>, %rows: tensor<?xi32>,
                   %mem: tensor<?x?x8xf32>, %keep: tensor<?x?xi1>) -> tensor<?x1x8xf32> {
  // CHECK: tfm.state "dec.v_cache" : tensor<?x?x8xbf16>
  %c0 = tfm.state "dec.v_cache" : tensor<?x?x8xbf16>
  // CHECK: tfm.cache_reorder {{.*}} -> tensor<?x?x8xbf16>
  %c1 = tfm.cache_reorder %c0, %parents, %step : (tensor<?x?x8xbf16>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x?x8xbf16>
  // CHECK: tfm.cache_write {{.*}} : (tensor<?x?x8xbf16>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x?x8xbf16>
  %c2 = tfm.cache_write %c1, %x, %step : (tensor<?x?x8xbf16>, tensor<?x1x8xf32>, tensor<?xi32>) -> tensor<?x?x8xbf16>
  // CHECK: tfm.cached_attention {{.*}} : (tensor<?x1x8xf32>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>, tensor<?xi32>) -> tensor<?x1x8xf32>
  %a = tfm.cached_attention %x, %c2, %c2, %step {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>, tensor<?xi32>) -> tensor<?x1x8xf32>
  // CHECK: tfm.to_bf16 %{{.*}} : (tensor<?x?x8xf32>) -> tensor<?x?x8xbf16>
  %kv = tfm.to_bf16 %mem : (tensor<?x?x8xf32>) -> tensor<?x?x8xbf16>
  // CHECK: tfm.gathered_attention {{.*}} : (tensor<?x1x8xf32>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x8xf32>
  %g = tfm.gathered_attention %a, %kv, %kv, %keep, %rows {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xbf16>, tensor<?x?x8xbf16>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x8xf32>
  return %g : tensor<?x1x8xf32>
}
