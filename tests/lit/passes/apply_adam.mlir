// RUN: tfm-opt %s -split-input-file -verify-diagnostics -pass-pipeline="builtin.module(tfm-autodiff,tfm-apply-adam)" | FileCheck %s

// A differentiated function with a tfm.adam dictionary becomes a training step: one learning rate
// from the step argument, one in-place Adam update per parameter (after every forward and
// backward op) with its moments as session state named after the parameter, and results
// (loss, grad_sq_norm = sum of the updates' squared-gradient sums).
// CHECK-LABEL: func.func @train_step(%arg0: tensor<?x?x8xf32>, %arg1: tensor<?x?xi32>, %arg2: tensor<i32> {tfm.name = "step"}) -> (tensor<f32> {tfm.name = "loss"}, tensor<f32> {tfm.name = "grad_sq_norm"}) attributes {tfm.mode = "inference"} {
// CHECK: %[[W1:.*]] = tfm.param "fc1.weight"
// CHECK: %[[W2:.*]] = tfm.param "out.weight"
// CHECK: %[[LOSS:.*]] = tfm.label_smoothed_xent
// CHECK: tfm.label_smoothed_xent_grad
// CHECK: %[[GOUT:.*]] = tfm.weight_grad {{.*}} -> tensor<11x8xf32>
// CHECK: %[[GFC1:.*]] = tfm.weight_grad {{.*}} -> tensor<8x8xf32>
// CHECK: %[[LR:.*]] = tfm.lr_schedule %arg2 {d_model = 8 : i64, lr_scale = 5.000000e-01 : f64, warmup_steps = 10 : i64} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT: %[[M1:.*]] = tfm.state "adam.m/fc1.weight" : tensor<8x8xf32>
// CHECK-NEXT: %[[V1:.*]] = tfm.state "adam.v/fc1.weight" : tensor<8x8xf32>
// CHECK-NEXT: %[[U1:.*]] = tfm.adam_update %[[W1]], %[[GFC1]], %[[LR]], %arg2, %[[M1]], %[[V1]] {beta1 = 9.000000e-01 : f64, beta2 = 0.97999999999999998 : f64, epsilon = 1.000000e-09 : f64}
// CHECK-NEXT: %[[M2:.*]] = tfm.state "adam.m/out.weight" : tensor<11x8xf32>
// CHECK-NEXT: %[[V2:.*]] = tfm.state "adam.v/out.weight" : tensor<11x8xf32>
// CHECK-NEXT: %[[U2:.*]] = tfm.adam_update %[[W2]], %[[GOUT]], %[[LR]], %arg2, %[[M2]], %[[V2]]
// CHECK-NEXT: %[[SUM:.*]] = tfm.add %[[U1]], %[[U2]] : tensor<f32>
// CHECK-NEXT: return %[[LOSS]], %[[SUM]] : tensor<f32>, tensor<f32>
func.func @train_step(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>, %step: tensor<i32> {tfm.name = "step"}) -> tensor<f32>
    attributes {tfm.differentiate, tfm.mode = "inference",
                tfm.adam = {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64, lr_scale = 0.5 : f64, d_model = 8 : i64, warmup_steps = 10 : i64}} {
  %w1 = tfm.param "fc1.weight" : tensor<8x8xf32>
  %h = tfm.matmul %x, %w1 {transpose_b = true} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %h, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// clip_norm > 0: the global norm first (tfm.sum_squares of every gradient, summed, before any
// parameter changes), one tfm.clip_scale of it, and every update scaled by it; grad_sq_norm is
// the norm before clipping.
// CHECK-LABEL: func.func @clipped
// CHECK: %[[G1:.*]] = tfm.weight_grad {{.*}} -> tensor<11x8xf32>
// CHECK: %[[G2:.*]] = tfm.weight_grad {{.*}} -> tensor<8x8xf32>
// CHECK: %[[LR:.*]] = tfm.lr_schedule %arg2
// CHECK-NOT: tfm.adam_update
// CHECK: %[[S1:.*]] = tfm.sum_squares %[[G2]] : (tensor<8x8xf32>) -> tensor<f32>
// CHECK-NEXT: %[[S2:.*]] = tfm.sum_squares %[[G1]] : (tensor<11x8xf32>) -> tensor<f32>
// CHECK-NEXT: %[[SUM:.*]] = tfm.add %[[S1]], %[[S2]] : tensor<f32>
// CHECK-NEXT: %[[SCALE:.*]] = tfm.clip_scale %[[SUM]] {max_norm = 2.500000e-01 : f64} : (tensor<f32>) -> tensor<f32>
// CHECK: tfm.adam_update %{{.*}}, %[[G2]], %[[LR]], %arg2, %{{.*}}, %{{.*}} scale %[[SCALE]] {beta1
// CHECK: tfm.adam_update %{{.*}}, %[[G1]], %[[LR]], %arg2, %{{.*}}, %{{.*}} scale %[[SCALE]] {beta1
// CHECK-NEXT: return %{{.*}}, %[[SUM]] : tensor<f32>, tensor<f32>
func.func @clipped(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>, %step: tensor<i32> {tfm.name = "step"}) -> tensor<f32>
    attributes {tfm.differentiate, tfm.mode = "inference",
                tfm.adam = {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64, lr_scale = 0.5 : f64, d_model = 8 : i64, warmup_steps = 10 : i64, clip_norm = 0.25 : f64}} {
  %w1 = tfm.param "fc1.weight" : tensor<8x8xf32>
  %h = tfm.matmul %x, %w1 {transpose_b = true} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %h, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// weight_decay > 0: decoupled weight decay, an attribute of every update.
// CHECK-LABEL: func.func @decayed
// CHECK: tfm.adam_update {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.97999999999999998 : f64, epsilon = 1.000000e-09 : f64, weight_decay = 1.000000e-02 : f64}
// CHECK-NOT: tfm.sum_squares
// CHECK: return
func.func @decayed(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>, %step: tensor<i32> {tfm.name = "step"}) -> tensor<f32>
    attributes {tfm.differentiate, tfm.mode = "inference",
                tfm.adam = {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64, lr_scale = 0.5 : f64, d_model = 8 : i64, warmup_steps = 10 : i64, weight_decay = 0.01 : f64}} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// A clip_norm that is not a number >= 0 is refused.
// expected-error @+1 {{tfm-apply-adam: 'bad_clip': tfm.adam's clip_norm must be an f64 >= 0 (0: no clipping)}}
func.func @bad_clip(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>, %step: tensor<i32>) -> tensor<f32>
    attributes {tfm.differentiate, tfm.adam = {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64, lr_scale = 0.5 : f64, d_model = 8 : i64, warmup_steps = 10 : i64, clip_norm = -1.0 : f64}} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// Functions without the dictionary keep their gradients (the `gradients` entry).
// CHECK-LABEL: func.func @gradients
// CHECK-NOT: tfm.adam_update
// CHECK: return %{{.*}}, %{{.*}} : tensor<f32>, tensor<11x8xf32>
func.func @gradients(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>) -> tensor<f32> attributes {tfm.differentiate} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// The step must be the last argument, a tensor<i32>.
// expected-error @+1 {{tfm-apply-adam: 'no_step': the last argument must be the step (tensor<i32>)}}
func.func @no_step(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>) -> tensor<f32>
    attributes {tfm.differentiate, tfm.adam = {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64, lr_scale = 0.5 : f64, d_model = 8 : i64, warmup_steps = 10 : i64}} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// Every hyper-parameter must be given.
// expected-error @+1 {{tfm-apply-adam: 'missing': tfm.adam needs beta1, beta2, epsilon, lr_scale (f64) and d_model, warmup_steps (i64)}}
func.func @missing(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>, %step: tensor<i32>) -> tensor<f32>
    attributes {tfm.differentiate, tfm.adam = {beta1 = 0.9 : f64}} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
