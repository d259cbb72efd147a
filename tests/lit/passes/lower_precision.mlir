// RUN: tfm-opt %s -pass-pipeline="builtin.module(func.func(tfm-lower-precision{report=true}))" 2>/dev/null | FileCheck %s
// RUN: tfm-opt %s -pass-pipeline="builtin.module(func.func(tfm-lower-precision{report=true}))" 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT

// Packed GEMM weights become packed_bf16 (inference and training entries alike); a GEMM against
// a run-time value stays f32; a weight gradient and a fused attention get precision "bf16".
// CHECK-LABEL: func.func @infer
// CHECK: tfm.linear %arg0, %{{.*}}, %{{.*}} {weight_layout = "packed_bf16"}
// CHECK: tfm.matmul %arg0, %{{.*}} {transpose_b = true, weight_layout = "packed_bf16"}
// CHECK: tfm.matmul %arg0, %arg1 {transpose_b = true} :
// CHECK: tfm.fused_attention {{.*}}precision = "bf16"
// CHECK-LABEL: func.func @train
// CHECK: tfm.linear %arg0, %{{.*}}, %{{.*}} {weight_layout = "packed_bf16"}
// CHECK: tfm.weight_grad %arg1, %arg0 {precision = "bf16"}
// REPORT: remark: lower-precision: site: bf16 operands, f32 accumulation (weight packed as bf16)
// REPORT: remark: lower-precision: site: bf16 operands, f32 accumulation (weight packed as bf16)
// REPORT: remark: lower-precision: site: f32: the weight is not packed (not a constant)
// REPORT: remark: lower-precision: site: bf16 Q.K and P.V operands, f32 softmax and accumulation (attention)
// REPORT: remark: lower-precision: site: bf16 operands, f32 accumulation (weight packed as bf16)
// REPORT: remark: lower-precision: site: bf16 operands, f32 accumulation (weight gradient)
func.func @infer(%x: tensor<?x8xf32>, %w_dyn: tensor<8x8xf32>, %qkv: tensor<?x?x24xf32>, %keep: tensor<?x?xi1>) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x?x8xf32>) attributes {tfm.mode = "inference"} {
  %w = tfm.param "a.weight" : tensor<8x8xf32> loc(#site)
  %b = tfm.param "a.bias" : tensor<8xf32> loc(#site)
  %y = tfm.linear %x, %w, %b {weight_layout = "packed"} : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc(#site)
  %z = tfm.matmul %x, %w {transpose_b = true, weight_layout = "packed"} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> loc(#site)
  %d = tfm.matmul %x, %w_dyn {transpose_b = true} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> loc(#site)
  %a = tfm.fused_attention %qkv, %qkv, %qkv, %keep {head_dim = 4 : i64, heads = 2 : i64, k_offset = 8 : i64, q_offset = 0 : i64, scale = 0.5 : f64, v_offset = 16 : i64} : (tensor<?x?x24xf32>, tensor<?x?x24xf32>, tensor<?x?x24xf32>, tensor<?x?xi1>) -> tensor<?x?x8xf32> loc(#site)
  return %y, %z, %d, %a : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x?x8xf32>
}
func.func @train(%x: tensor<?x8xf32>, %dy: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<8x8xf32>) {
  %w = tfm.param "a.weight" : tensor<8x8xf32> loc(#site)
  %b = tfm.param "a.bias" : tensor<8xf32> loc(#site)
  %y = tfm.linear %x, %w, %b {weight_layout = "packed"} : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc(#site)
  %dw = tfm.weight_grad %dy, %x : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<8x8xf32> loc(#site)
  return %y, %dw : tensor<?x8xf32>, tensor<8x8xf32>
}
#site = loc("site"("spec.yaml":2:3))
