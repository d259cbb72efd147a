// RUN: tfm-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(tfm-remove-inference-dropout))' | FileCheck %s

// CHECK-LABEL: func.func @inference
// CHECK-NOT: tfm.dropout
// CHECK: return %arg0
func.func @inference(%x: tensor<?x8xf32>) -> tensor<?x8xf32> attributes {tfm.mode = "inference"} {
  %0 = tfm.dropout %x {rate = 0.1 : f64} : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----
// Functions not marked as inference keep their dropout (training entries apply it).
// CHECK-LABEL: func.func @training
// CHECK: tfm.dropout %arg0 {rate = 1.000000e-01 : f64}
func.func @training(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = tfm.dropout %x {rate = 0.1 : f64} : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}
