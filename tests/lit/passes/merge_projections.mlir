// RUN: tfm-opt %s -split-input-file -pass-pipeline="builtin.module(func.func(tfm-merge-projections{report=true}))" 2>/dev/null | FileCheck %s
// RUN: tfm-opt %s -split-input-file -pass-pipeline="builtin.module(func.func(tfm-merge-projections{report=true}))" 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT
// IR printed without locations (tfm-opt's default) has no named sites: nothing merges, and the
// pass says why instead of nothing.
// RUN: tfm-opt %s -split-input-file | tfm-opt -split-input-file -tfm-merge-projections 2>&1 >/dev/null | FileCheck %s --check-prefix=UNNAMED
// UNNAMED: warning: tfm-merge-projections: no tfm.matmul carries a name location, and attention sites are found by name: nothing merged (print the IR with --mlir-print-debuginfo; tfm-opt drops locations without it)

// Q, K, V projections of one input in one site: one [24 x 8] GEMM, sliced back.
// CHECK-LABEL: func.func @self_attention
// CHECK-DAG: %[[W:.*]] = tfm.concat %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<24x8xf32>
// CHECK-DAG: %[[B:.*]] = tfm.concat %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<24xf32>
// CHECK: %[[MM:.*]] = tfm.matmul %arg0, %[[W]] {transpose_b = true} : (tensor<?x?x8xf32>, tensor<24x8xf32>) -> tensor<?x?x24xf32>
// CHECK: %[[Y:.*]] = tfm.bias_add %[[MM]], %[[B]]
// CHECK: %[[Q:.*]] = tfm.slice_last %[[Y]] {offset = 0 : i64, size = 8 : i64}
// CHECK: tfm.split_heads %[[Q]]
// CHECK: %[[K:.*]] = tfm.slice_last %[[Y]] {offset = 8 : i64, size = 8 : i64}
// CHECK: %[[V:.*]] = tfm.slice_last %[[Y]] {offset = 16 : i64, size = 8 : i64}
// CHECK: return %{{.*}}, %[[K]], %[[V]]
func.func @self_attention(%x: tensor<?x?x8xf32>) -> (tensor<?x2x?x4xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %wq = tfm.param "l.self_attn.q_proj.weight" : tensor<8x8xf32> loc(#site)
  %bq = tfm.param "l.self_attn.q_proj.bias" : tensor<8xf32> loc(#site)
  %q0 = tfm.matmul %x, %wq {transpose_b = true} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32> loc(#site)
  // REPORT: spec.yaml:{{[0-9]+}}:5: remark: merge-projections: l.self_attn: merged 3 projections into one GEMM [24 x 8]
  %q = tfm.bias_add %q0, %bq : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32> loc(#site)
  // A user of Q between the projections must move below the merged GEMM.
  %qh = tfm.split_heads %q {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> loc(#site)
  %wk = tfm.param "l.self_attn.k_proj.weight" : tensor<8x8xf32> loc(#site)
  %bk = tfm.param "l.self_attn.k_proj.bias" : tensor<8xf32> loc(#site)
  %k0 = tfm.matmul %x, %wk {transpose_b = true} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32> loc(#site)
  %k = tfm.bias_add %k0, %bk : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32> loc(#site)
  %wv = tfm.param "l.self_attn.v_proj.weight" : tensor<8x8xf32> loc(#site)
  %bv = tfm.param "l.self_attn.v_proj.bias" : tensor<8xf32> loc(#site)
  %v0 = tfm.matmul %x, %wv {transpose_b = true} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32> loc(#site)
  %v = tfm.bias_add %v0, %bv : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32> loc(#site)
  return %qh, %k, %v : tensor<?x2x?x4xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
}
#site = loc("l.self_attn"("spec.yaml":3:5))

// -----
// A projection alone in its site, and projections outside attention sites, are left alone.
// CHECK-LABEL: func.func @lonely
// CHECK-NOT: tfm.concat
// CHECK-NOT: tfm.slice_last
func.func @lonely(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %wq = tfm.param "l.cross_attn.q_proj.weight" : tensor<8x8xf32> loc(#cross)
  %bq = tfm.param "l.cross_attn.q_proj.bias" : tensor<8xf32> loc(#cross)
  // REPORT: spec.yaml:{{[0-9]+}}:5: remark: merge-projections: l.cross_attn: not merged: no other projection in this site reads the input of l.cross_attn.q_proj.weight
  %q0 = tfm.matmul %x, %wq {transpose_b = true} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> loc(#cross)
  %q = tfm.bias_add %q0, %bq : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc(#cross)
  %w1 = tfm.param "l.ffn.fc1.weight" : tensor<8x8xf32> loc(#ffn)
  %b1 = tfm.param "l.ffn.fc1.bias" : tensor<8xf32> loc(#ffn)
  %h0 = tfm.matmul %y, %w1 {transpose_b = true} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> loc(#ffn)
  %h = tfm.bias_add %h0, %b1 : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc(#ffn)
  %g0 = tfm.matmul %y, %w1 {transpose_b = true} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> loc(#ffn)
  %g = tfm.bias_add %g0, %b1 : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc(#ffn)
  return %q, %h, %g : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}
#cross = loc("l.cross_attn"("spec.yaml":3:5))
#ffn = loc("l.ffn"("spec.yaml":4:5))
