// RUN: tfm-opt %s -pass-pipeline="builtin.module(func.func(tfm-quantize-int8{report=true}))" 2>/dev/null | FileCheck %s
// RUN: tfm-opt %s -pass-pipeline="builtin.module(func.func(tfm-quantize-int8{report=true}))" 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT

// In an inference function, packed GEMM weights become packed_int8; a GEMM against a run-time
// value stays f32. A training function keeps its packed f32 weights, and so does a function
// marked "inference" that computes gradients (the `gradients` entry).
// CHECK-LABEL: func.func @infer
// CHECK: tfm.linear %arg0, %{{.*}}, %{{.*}} {weight_layout = "packed_int8"}
// CHECK: tfm.matmul %arg0, %{{.*}} {transpose_b = true, weight_layout = "packed_int8"}
// CHECK: tfm.matmul %arg0, %arg1 {transpose_b = true} :
// CHECK-LABEL: func.func @train
// CHECK: tfm.linear %arg0, %{{.*}}, %{{.*}} {weight_layout = "packed"}
// CHECK-LABEL: func.func @gradients
// CHECK: tfm.linear %arg0, %{{.*}}, %{{.*}} {weight_layout = "packed"}
// CHECK-NOT: packed_int8
// REPORT: remark: quantize-int8: site: int8 operands, int32 accumulation (weight per column, input per row)
// REPORT: remark: quantize-int8: site: int8 operands, int32 accumulation (weight per column, input per row)
// REPORT: remark: quantize-int8: site: f32: the weight is not packed (not a constant)
// REPORT: remark: quantize-int8: site: f32: a function that computes gradients (training or `gradients`)
// REPORT: remark: quantize-int8: site: f32: a function that computes gradients (training or `gradients`)
func.func @infer(%x: tensor<?x8xf32>, %w_dyn: tensor<8x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) attributes {tfm.mode = "inference"} {
  %w = tfm.param "a.weight" : tensor<8x8xf32> loc(#site)
  %b = tfm.param "a.bias" : tensor<8xf32> loc(#site)
  %y = tfm.linear %x, %w, %b {weight_layout = "packed"} : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc(#site)
  %z = tfm.matmul %x, %w {transpose_b = true, weight_layout = "packed"} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> loc(#site)
  %d = tfm.matmul %x, %w_dyn {transpose_b = true} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> loc(#site)
  return %y, %z, %d : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}
func.func @train(%x: tensor<?x8xf32>) -> tensor<?x8xf32> attributes {tfm.mode = "training"} {
  %w = tfm.param "a.weight" : tensor<8x8xf32> loc(#site)
  %b = tfm.param "a.bias" : tensor<8xf32> loc(#site)
  %y = tfm.linear %x, %w, %b {weight_layout = "packed"} : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc(#site)
  return %y : tensor<?x8xf32>
}
func.func @gradients(%x: tensor<?x8xf32>, %dy: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<8x8xf32>) attributes {tfm.mode = "inference"} {
  %w = tfm.param "a.weight" : tensor<8x8xf32> loc(#site)
  %b = tfm.param "a.bias" : tensor<8xf32> loc(#site)
  %y = tfm.linear %x, %w, %b {weight_layout = "packed"} : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc(#site)
  %dw = tfm.weight_grad %dy, %x : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<8x8xf32> loc(#site)
  return %y, %dw : tensor<?x8xf32>, tensor<8x8xf32>
}
#site = loc("site"("spec.yaml":2:3))
