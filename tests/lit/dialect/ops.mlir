// RUN: tfm-opt %s | FileCheck %s
// RUN: tfm-opt %s | tfm-opt | FileCheck %s
// Round-trips every tfm op through the printer and parser.

// CHECK-LABEL: func.func @attention_block
func.func @attention_block(%ids: tensor<?x?xi32>) -> tensor<?x?x8xf32> {
  // CHECK: tfm.param "emb.weight" : tensor<11x8xf32>
  %table = tfm.param "emb.weight" : tensor<11x8xf32>
  // CHECK: tfm.position_table {dim = 8 : i64, max_len = 16 : i64} : tensor<16x8xf32>
  %pos = tfm.position_table {max_len = 16, dim = 8} : tensor<16x8xf32>
  // CHECK: tfm.embedding %{{.*}}, %{{.*}} : (tensor<11x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %x0 = tfm.embedding %table, %ids : (tensor<11x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  // CHECK: tfm.scale %{{.*}} {factor = 2.8
  %x1 = tfm.scale %x0 {factor = 2.828427 : f64} : tensor<?x?x8xf32>
  // CHECK: tfm.add_positions
  %x = tfm.add_positions %x1, %pos : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfm.padding_mask %{{.*}} {pad_id = 0 : i64} : (tensor<?x?xi32>) -> tensor<?x?xi1>
  %keep = tfm.padding_mask %ids {pad_id = 0} : (tensor<?x?xi32>) -> tensor<?x?xi1>
  %w = tfm.param "q.weight" : tensor<8x8xf32>
  %b = tfm.param "q.bias" : tensor<8xf32>
  // CHECK: tfm.matmul %{{.*}}, %{{.*}} {transpose_b = true}
  %q0 = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfm.bias_add
  %q1 = tfm.bias_add %q0, %b : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfm.split_heads %{{.*}} {heads = 2 : i64} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32>
  %q = tfm.split_heads %q1 {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32>
  // CHECK: tfm.batch_matmul %{{.*}}, %{{.*}} {transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32>
  %s0 = tfm.batch_matmul %q, %q {transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32>
  // CHECK: tfm.mask %{{.*}}, %{{.*}} {causal = true}
  %s1 = tfm.mask %s0, %keep {causal = true} : (tensor<?x2x?x?xf32>, tensor<?x?xi1>) -> tensor<?x2x?x?xf32>
  // CHECK: tfm.softmax %{{.*}} : tensor<?x2x?x?xf32>
  %p0 = tfm.softmax %s1 : tensor<?x2x?x?xf32>
  // CHECK: tfm.dropout %{{.*}} {rate = 1.000000e-01 : f64}
  %p = tfm.dropout %p0 {rate = 0.1 : f64} : tensor<?x2x?x?xf32>
  // CHECK: tfm.batch_matmul %{{.*}}, %{{.*}} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %c = tfm.batch_matmul %p, %q : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  // CHECK: tfm.merge_heads %{{.*}} : (tensor<?x2x?x4xf32>) -> tensor<?x?x8xf32>
  %m = tfm.merge_heads %c : (tensor<?x2x?x4xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfm.relu
  %r = tfm.relu %m : tensor<?x?x8xf32>
  // CHECK: tfm.gelu
  %g = tfm.gelu %r : tensor<?x?x8xf32>
  // CHECK: tfm.add
  %a = tfm.add %g, %x : tensor<?x?x8xf32>
  %gamma = tfm.param "ln.weight" : tensor<8xf32>
  %beta = tfm.param "ln.bias" : tensor<8xf32>
  // CHECK: tfm.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64}
  %y = tfm.layer_norm %a, %gamma, %beta {epsilon = 1.0e-5 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// CHECK-LABEL: func.func @loss
func.func @loss(%logits: tensor<?x?x11xf32>, %targets: tensor<?x?xi32>) -> tensor<f32> {
  // CHECK: tfm.label_smoothed_xent %{{.*}}, %{{.*}} {pad_id = 0 : i64, smoothing = 1.000000e-01 : f64} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  %l = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// Gradient ops (produced by tfm-autodiff) and batch_matmul's transpose_a.
// CHECK-LABEL: func.func @gradients
func.func @gradients(%x: tensor<?x?x8xf32>, %dy: tensor<?x?x16xf32>, %dx: tensor<?x?x8xf32>, %ids: tensor<?x?xi32>, %gamma: tensor<8xf32>, %p: tensor<?x2x?x?xf32>, %dp: tensor<?x2x?x?xf32>, %c: tensor<?x2x?x4xf32>, %logits: tensor<?x?x11xf32>) {
  // CHECK: tfm.weight_grad %arg1, %arg0 : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
  %0 = tfm.weight_grad %dy, %x : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
  // CHECK: tfm.bias_grad %arg1 : (tensor<?x?x16xf32>) -> tensor<16xf32>
  %1 = tfm.bias_grad %dy : (tensor<?x?x16xf32>) -> tensor<16xf32>
  // CHECK: tfm.relu_grad %arg0, %arg2 : tensor<?x?x8xf32>
  %2 = tfm.relu_grad %x, %dx : tensor<?x?x8xf32>
  // CHECK: tfm.gelu_grad %arg0, %arg2 : tensor<?x?x8xf32>
  %3 = tfm.gelu_grad %x, %dx : tensor<?x?x8xf32>
  // CHECK: tfm.softmax_grad %arg5, %arg6 : tensor<?x2x?x?xf32>
  %4 = tfm.softmax_grad %p, %dp : tensor<?x2x?x?xf32>
  // CHECK: tfm.layer_norm_grad %arg0, %arg4, %arg2 {epsilon = 1.000000e-05 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %5 = tfm.layer_norm_grad %x, %gamma, %dx {epsilon = 1.0e-5 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfm.layer_norm_gamma_grad %arg0, %arg2 {epsilon = 1.000000e-05 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8xf32>
  %6 = tfm.layer_norm_gamma_grad %x, %dx {epsilon = 1.0e-5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<8xf32>
  // CHECK: tfm.embedding_grad %arg3, %arg2 {num_rows = 11 : i64} : (tensor<?x?xi32>, tensor<?x?x8xf32>) -> tensor<11x8xf32>
  %7 = tfm.embedding_grad %ids, %dx {num_rows = 11} : (tensor<?x?xi32>, tensor<?x?x8xf32>) -> tensor<11x8xf32>
  // CHECK: tfm.positions_grad %arg2 {num_rows = 16 : i64} : (tensor<?x?x8xf32>) -> tensor<16x8xf32>
  %8 = tfm.positions_grad %dx {num_rows = 16} : (tensor<?x?x8xf32>) -> tensor<16x8xf32>
  // CHECK: tfm.label_smoothed_xent_grad %arg8, %arg3 {pad_id = 0 : i64, smoothing = 1.000000e-01 : f64} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<?x?x11xf32>
  %9 = tfm.label_smoothed_xent_grad %logits, %ids {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<?x?x11xf32>
  // CHECK: tfm.batch_matmul %arg5, %arg7 {transpose_a = true} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %10 = tfm.batch_matmul %p, %c {transpose_a = true} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  // CHECK: tfm.batch_matmul %arg7, %arg7 {transpose_a = true, transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %11 = tfm.batch_matmul %c, %c {transpose_a = true, transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  // An explicit default (false) is not printed.
  // CHECK: tfm.batch_matmul %arg7, %arg7 {transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32>
  %12 = tfm.batch_matmul %c, %c {transpose_a = false, transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32>
  // Static shapes: lhs [2, 3, 5, 7] read as [2, 3, 7, 5].
  // CHECK: tfm.batch_matmul %{{.*}}, %{{.*}} {transpose_a = true} : (tensor<2x3x5x7xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x7x4xf32>
  %a = tfm.param "a" : tensor<2x3x5x7xf32>
  %b = tfm.param "b" : tensor<2x3x5x4xf32>
  %13 = tfm.batch_matmul %a, %b {transpose_a = true} : (tensor<2x3x5x7xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x7x4xf32>
  return
}

// Optimizer ops (tfm-apply-adam).
// CHECK-LABEL: func.func @optimizer
func.func @optimizer(%step: tensor<i32>, %g: tensor<4x3xf32>) -> tensor<f32> {
  // CHECK: tfm.lr_schedule %arg0 {d_model = 512 : i64, lr_scale = 1.000000e+00 : f64, warmup_steps = 4000 : i64} : (tensor<i32>) -> tensor<f32>
  %lr = tfm.lr_schedule %step {lr_scale = 1.0 : f64, d_model = 512, warmup_steps = 4000} : (tensor<i32>) -> tensor<f32>
  %w = tfm.param "w" : tensor<4x3xf32>
  %m = tfm.state "adam.m/w" : tensor<4x3xf32>
  %v = tfm.state "adam.v/w" : tensor<4x3xf32>
  // CHECK: tfm.adam_update %{{.*}}, %arg1, %{{.*}}, %arg0, %{{.*}}, %{{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.97999999999999998 : f64, epsilon = 1.000000e-09 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i32>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  %sq = tfm.adam_update %w, %g, %lr, %step, %m, %v {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i32>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  // Gradient clipping: the norm, its factor, and an update scaled by it.
  // CHECK: %[[N:.*]] = tfm.sum_squares %arg1 : (tensor<4x3xf32>) -> tensor<f32>
  %n = tfm.sum_squares %g : (tensor<4x3xf32>) -> tensor<f32>
  // CHECK: %[[C:.*]] = tfm.clip_scale %[[N]] {max_norm = 1.000000e+00 : f64} : (tensor<f32>) -> tensor<f32>
  %c = tfm.clip_scale %n {max_norm = 1.0 : f64} : (tensor<f32>) -> tensor<f32>
  // CHECK: tfm.adam_update %{{.*}}, %arg1, %{{.*}}, %arg0, %{{.*}}, %{{.*}} scale %[[C]] {beta1 = 9.000000e-01 : f64, beta2 = 0.97999999999999998 : f64, epsilon = 1.000000e-09 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>) -> tensor<f32>
  %sq2 = tfm.adam_update %w, %g, %lr, %step, %m, %v scale %c {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>) -> tensor<f32>
  // Decoupled weight decay (AdamW).
  // CHECK: tfm.adam_update {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.97999999999999998 : f64, epsilon = 1.000000e-09 : f64, weight_decay = 1.000000e-02 : f64}
  %sq3 = tfm.adam_update %w, %g, %lr, %step, %m, %v {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64, weight_decay = 0.01 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i32>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  %all2 = tfm.add %sq, %sq2 : tensor<f32>
  %all = tfm.add %all2, %sq3 : tensor<f32>
  return %all : tensor<f32>
}

// Training dropout: keyed by (seed, site, step).
// CHECK-LABEL: func.func @training_dropout
func.func @training_dropout(%x: tensor<?x?x8xf32>, %step: tensor<i32>) -> tensor<?x?x8xf32> {
  // CHECK: tfm.dropout %arg0 step(%arg1 : tensor<i32>) {rate = 1.000000e-01 : f64, seed = 3 : i64, site = "encoder.embed"} : tensor<?x?x8xf32>
  %0 = tfm.dropout %x step(%step : tensor<i32>) {rate = 0.1 : f64, seed = 3, site = "encoder.embed"} : tensor<?x?x8xf32>
  return %0 : tensor<?x?x8xf32>
}

// CHECK-LABEL: func.func @last_position
func.func @last_position(%x: tensor<?x?x8xf32>) -> tensor<?x1x8xf32> {
  // CHECK: tfm.last_position %arg0 : (tensor<?x?x8xf32>) -> tensor<?x1x8xf32>
  %0 = tfm.last_position %x : (tensor<?x?x8xf32>) -> tensor<?x1x8xf32>
  return %0 : tensor<?x1x8xf32>
}

// bf16 GEMM operands (f32 result): the open dtypes of the op table.
// CHECK-LABEL: func.func @bf16_matmul
// CHECK: tfm.matmul %{{.*}}, %{{.*}} {transpose_b = true} : (tensor<?x4xbf16>, tensor<3x4xbf16>) -> tensor<?x3xf32>
// CHECK: tfm.batch_matmul %{{.*}}, %{{.*}} : (tensor<?x2x?x4xbf16>, tensor<?x2x4x?xbf16>) -> tensor<?x2x?x?xf32>
func.func @bf16_matmul(%a: tensor<?x4xbf16>, %b: tensor<3x4xbf16>, %q: tensor<?x2x?x4xbf16>, %k: tensor<?x2x4x?xbf16>) {
  %0 = tfm.matmul %a, %b {transpose_b = true} : (tensor<?x4xbf16>, tensor<3x4xbf16>) -> tensor<?x3xf32>
  %1 = tfm.batch_matmul %q, %k : (tensor<?x2x?x4xbf16>, tensor<?x2x4x?xbf16>) -> tensor<?x2x?x?xf32>
  return
}

// Compatible but unequal shapes (decode_step's residual: one position plus a dynamic length)
// print every type; one printed type did not parse back.
// CHECK-LABEL: func.func @compatible_shapes
// CHECK: tfm.add %arg0, %arg1 : (tensor<?x1x8xf32>, tensor<?x?x8xf32>) -> tensor<?x1x8xf32>
// CHECK: tfm.relu %{{.*}} : (tensor<?x1x8xf32>) -> tensor<?x?x8xf32>
// CHECK: tfm.relu_grad %arg0, %arg1 : (tensor<?x1x8xf32>, tensor<?x?x8xf32>) -> tensor<?x1x8xf32>
func.func @compatible_shapes(%x: tensor<?x1x8xf32>, %y: tensor<?x?x8xf32>) {
  %0 = tfm.add %x, %y : (tensor<?x1x8xf32>, tensor<?x?x8xf32>) -> tensor<?x1x8xf32>
  %1 = tfm.relu %0 : (tensor<?x1x8xf32>) -> tensor<?x?x8xf32>
  %2 = tfm.relu_grad %x, %y : (tensor<?x1x8xf32>, tensor<?x?x8xf32>) -> tensor<?x1x8xf32>
  return
}
