// RUN: tfm-opt %s -pass-pipeline="builtin.module(func.func(tfm-assign-layouts{report=true}))" 2>/dev/null | FileCheck %s
// RUN: tfm-opt %s -pass-pipeline="builtin.module(func.func(tfm-assign-layouts{report=true}))" 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT

// Weights that are parameters, or concatenations of parameters, are packed; a GEMM against a
// run-time value keeps the plain layout.
// CHECK-LABEL: func.func @layouts
// CHECK: tfm.linear %arg0, %{{.*}}, %{{.*}} {weight_layout = "packed"}
// CHECK: tfm.matmul %arg0, %{{.*}} {transpose_b = true, weight_layout = "packed"}
// CHECK: tfm.matmul %arg0, %arg1 {transpose_b = true} :
// REPORT: remark: assign-layouts: site: weight packed into the GEMM's blocked layout
// REPORT: remark: assign-layouts: site: weight packed into the GEMM's blocked layout
// REPORT: remark: assign-layouts: site: plain layout: the weight is not a constant
func.func @layouts(%x: tensor<?x8xf32>, %w_dyn: tensor<8x8xf32>) -> (tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %wq = tfm.param "a.weight" : tensor<8x8xf32> loc(#site)
  %wk = tfm.param "b.weight" : tensor<8x8xf32> loc(#site)
  %bq = tfm.param "a.bias" : tensor<8xf32> loc(#site)
  %bk = tfm.param "b.bias" : tensor<8xf32> loc(#site)
  %w = tfm.concat %wq, %wk : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32> loc(#site)
  %b = tfm.concat %bq, %bk : (tensor<8xf32>, tensor<8xf32>) -> tensor<16xf32> loc(#site)
  %y = tfm.linear %x, %w, %b : (tensor<?x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<?x16xf32> loc(#site)
  %z = tfm.matmul %x, %wq {transpose_b = true} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> loc(#site)
  %d = tfm.matmul %x, %w_dyn {transpose_b = true} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> loc(#site)
  return %y, %z, %d : tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}
#site = loc("site"("spec.yaml":2:3))
