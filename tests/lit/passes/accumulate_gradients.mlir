// RUN: tfm-opt %s -split-input-file -verify-diagnostics -pass-pipeline="builtin.module(tfm-autodiff,tfm-accumulate-gradients)" | FileCheck %s

// A differentiated function with a tfm.accumulate dictionary adds weight * gradient into the
// session state "grad_accum/<param>" of each parameter (reset overwrites) and returns the loss
// alone; apply_update(step) takes one Adam step from those accumulators, with the moments as
// the session state train_step would use, and returns grad_sq_norm.
// CHECK-LABEL: func.func @accumulate_gradients(%arg0: tensor<?x?x8xf32>, %arg1: tensor<?x?xi32>, %arg2: tensor<i32>, %arg3: tensor<f32>, %arg4: tensor<i32>) -> (tensor<f32> {tfm.name = "loss"})
// CHECK: %[[W:.*]] = tfm.param "out.weight"
// CHECK: %[[LOSS:.*]] = tfm.label_smoothed_xent
// CHECK: %[[G:.*]] = tfm.weight_grad
// CHECK: %[[ACC:.*]] = tfm.state "grad_accum/out.weight" : tensor<11x8xf32>
// CHECK-NEXT: tfm.grad_accumulate %[[ACC]], %[[G]], %arg3, %arg4 : (tensor<11x8xf32>, tensor<11x8xf32>, tensor<f32>, tensor<i32>) -> tensor<11x8xf32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
// CHECK-LABEL: func.func @apply_update(%arg0: tensor<i32> {tfm.name = "step"}) -> (tensor<f32> {tfm.name = "grad_sq_norm"}) attributes {tfm.mode = "training"}
// CHECK-NEXT: %[[P:.*]] = tfm.param "out.weight" : tensor<11x8xf32>
// CHECK-NEXT: %[[A:.*]] = tfm.state "grad_accum/out.weight" : tensor<11x8xf32>
// CHECK-NEXT: %[[LR:.*]] = tfm.lr_schedule %arg0 {d_model = 8 : i64, lr_scale = 5.000000e-01 : f64, warmup_steps = 10 : i64}
// CHECK-NEXT: %[[M:.*]] = tfm.state "adam.m/out.weight"
// CHECK-NEXT: %[[V:.*]] = tfm.state "adam.v/out.weight"
// CHECK-NEXT: %[[U:.*]] = tfm.adam_update %[[P]], %[[A]], %[[LR]], %arg0, %[[M]], %[[V]]
// CHECK-NEXT: return %[[U]] : tensor<f32>
func.func @accumulate_gradients(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>, %step: tensor<i32>, %weight: tensor<f32>, %reset: tensor<i32>) -> tensor<f32>
    attributes {tfm.differentiate, tfm.mode = "training",
                tfm.accumulate = {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64, lr_scale = 0.5 : f64, d_model = 8 : i64, warmup_steps = 10 : i64}} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// The weight and reset must be the last two arguments.
// expected-error @+1 {{tfm-accumulate-gradients: 'no_weight': the last two arguments must be the weight (tensor<f32>) and reset (tensor<i32>)}}
func.func @no_weight(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>, %step: tensor<i32>) -> tensor<f32>
    attributes {tfm.differentiate, tfm.accumulate = {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64, lr_scale = 0.5 : f64, d_model = 8 : i64, warmup_steps = 10 : i64}} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// Missing Adam hyper-parameters are named.
// expected-error @+1 {{tfm-accumulate-gradients: 'no_hyper': tfm.adam needs beta1, beta2, epsilon, lr_scale (f64) and d_model, warmup_steps (i64)}}
func.func @no_hyper(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>, %step: tensor<i32>, %weight: tensor<f32>, %reset: tensor<i32>) -> tensor<f32>
    attributes {tfm.differentiate, tfm.accumulate = {beta1 = 0.9 : f64}} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
