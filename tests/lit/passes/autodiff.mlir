// RUN: tfm-opt %s -split-input-file -verify-diagnostics -pass-pipeline="builtin.module(tfm-autodiff)" | FileCheck %s

// Embedding -> linear (transpose_b) -> bias -> ReLU -> LayerNorm -> plain matmul to logits -> loss.
// The backward ops follow in reverse program order, seeded by the loss gradient; the function
// returns the loss and one gradient per parameter in first-use order, and loses its
// tfm.differentiate marker (the signature ends right after the results).
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %arg0: tensor<?x?xi32>, %arg1: tensor<?x?xi32>) -> (tensor<f32> {tfm.name = "loss"}, tensor<11x8xf32> {tfm.name = "grad:emb.weight"}, tensor<16x8xf32> {tfm.name = "grad:fc1.weight"}, tensor<16xf32> {tfm.name = "grad:fc1.bias"}, tensor<16xf32> {tfm.name = "grad:norm.weight"}, tensor<16xf32> {tfm.name = "grad:norm.bias"}, tensor<16x11xf32> {tfm.name = "grad:out.weight"}) {
// CHECK: %[[EMB:.*]] = tfm.param "emb.weight"
// CHECK: %[[X:.*]] = tfm.embedding %[[EMB]], %arg0
// CHECK: %[[W1:.*]] = tfm.param "fc1.weight"
// CHECK: %[[H0:.*]] = tfm.matmul %[[X]], %[[W1]] {transpose_b = true}
// CHECK: %[[B1:.*]] = tfm.param "fc1.bias"
// CHECK: %[[H1:.*]] = tfm.bias_add %[[H0]], %[[B1]]
// CHECK: %[[H:.*]] = tfm.relu %[[H1]]
// CHECK: %[[G:.*]] = tfm.param "norm.weight"
// CHECK: %[[N:.*]] = tfm.layer_norm %[[H]], %[[G]], %{{.*}} {epsilon = 1.000000e-05 : f64}
// CHECK: %[[WO:.*]] = tfm.param "out.weight"
// CHECK: %[[LOGITS:.*]] = tfm.matmul %[[N]], %[[WO]] :
// CHECK: %[[LOSS:.*]] = tfm.label_smoothed_xent %[[LOGITS]], %arg1
// CHECK-NEXT: %[[DLOGITS:.*]] = tfm.label_smoothed_xent_grad %[[LOGITS]], %arg1 {pad_id = 0 : i64, smoothing = 1.000000e-01 : f64} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<?x?x11xf32>
// y = n W (W [K, N]): dn = dy W^T, dW = n^T dy.
// CHECK: %[[DN:.*]] = tfm.matmul %[[DLOGITS]], %[[WO]] {transpose_b = true} : (tensor<?x?x11xf32>, tensor<16x11xf32>) -> tensor<?x?x16xf32>
// CHECK: %[[DWO:.*]] = tfm.weight_grad %[[N]], %[[DLOGITS]] : (tensor<?x?x16xf32>, tensor<?x?x11xf32>) -> tensor<16x11xf32>
// CHECK: %[[DH:.*]] = tfm.layer_norm_grad %[[H]], %[[G]], %[[DN]] {epsilon = 1.000000e-05 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
// CHECK: %[[DG:.*]] = tfm.layer_norm_gamma_grad %[[H]], %[[DN]] {epsilon = 1.000000e-05 : f64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<16xf32>
// CHECK: %[[DBETA:.*]] = tfm.bias_grad %[[DN]] : (tensor<?x?x16xf32>) -> tensor<16xf32>
// The ReLU mask from its output, so the pre-activation has no other use (bias + ReLU fuse).
// CHECK: %[[DH1:.*]] = tfm.relu_grad %[[H]], %[[DH]] : tensor<?x?x16xf32>
// CHECK: %[[DB1:.*]] = tfm.bias_grad %[[DH1]] : (tensor<?x?x16xf32>) -> tensor<16xf32>
// y = x W^T (W [N, K]): dx = dy W, dW = dy^T x.
// CHECK: %[[DX:.*]] = tfm.matmul %[[DH1]], %[[W1]] : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[DW1:.*]] = tfm.weight_grad %[[DH1]], %[[X]] : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<16x8xf32>
// CHECK: %[[DEMB:.*]] = tfm.embedding_grad %arg0, %[[DX]] {num_rows = 11 : i64} : (tensor<?x?xi32>, tensor<?x?x8xf32>) -> tensor<11x8xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DEMB]], %[[DW1]], %[[DB1]], %[[DG]], %[[DBETA]], %[[DWO]] : tensor<f32>, tensor<11x8xf32>, tensor<16x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16x11xf32>
func.func @mlp(%ids: tensor<?x?xi32>, %targets: tensor<?x?xi32>) -> tensor<f32> attributes {tfm.differentiate} {
  %emb = tfm.param "emb.weight" : tensor<11x8xf32>
  %x = tfm.embedding %emb, %ids : (tensor<11x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %w1 = tfm.param "fc1.weight" : tensor<16x8xf32>
  %h0 = tfm.matmul %x, %w1 {transpose_b = true} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %b1 = tfm.param "fc1.bias" : tensor<16xf32>
  %h1 = tfm.bias_add %h0, %b1 : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  %h = tfm.relu %h1 : tensor<?x?x16xf32>
  %g = tfm.param "norm.weight" : tensor<16xf32>
  %beta = tfm.param "norm.bias" : tensor<16xf32>
  %n = tfm.layer_norm %h, %g, %beta {epsilon = 1.0e-5 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  %wo = tfm.param "out.weight" : tensor<16x11xf32>
  %logits = tfm.matmul %n, %wo : (tensor<?x?x16xf32>, tensor<16x11xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// Tied weights: the embedding table and the output projection are two tfm.param sites of one
// name. They get ONE gradient result (at the position of the first use), the tfm.add of the
// embedding_grad and weight_grad contributions. A learned position table gets positions_grad.
// CHECK-LABEL: func.func @tied_sites(
// CHECK-SAME: -> (tensor<f32> {tfm.name = "loss"}, tensor<11x8xf32> {tfm.name = "grad:shared.weight"}, tensor<16x8xf32> {tfm.name = "grad:pos.weight"}) {
// CHECK: %[[E0:.*]] = tfm.param "shared.weight"
// CHECK: %[[X:.*]] = tfm.embedding %[[E0]], %arg0
// CHECK: %[[XP:.*]] = tfm.add_positions %[[X]]
// CHECK: %[[H:.*]] = tfm.gelu %[[XP]]
// CHECK: %[[E1:.*]] = tfm.param "shared.weight"
// CHECK: %[[LOGITS:.*]] = tfm.matmul %[[H]], %[[E1]] {transpose_b = true}
// CHECK: %[[LOSS:.*]] = tfm.label_smoothed_xent %[[LOGITS]]
// CHECK-NEXT: %[[DL:.*]] = tfm.label_smoothed_xent_grad %[[LOGITS]], %arg1
// CHECK: %[[DH:.*]] = tfm.matmul %[[DL]], %[[E1]] :
// CHECK: %[[DOUT:.*]] = tfm.weight_grad %[[DL]], %[[H]] : (tensor<?x?x11xf32>, tensor<?x?x8xf32>) -> tensor<11x8xf32>
// CHECK: %[[DXP:.*]] = tfm.gelu_grad %[[XP]], %[[DH]] : tensor<?x?x8xf32>
// CHECK: %[[DPOS:.*]] = tfm.positions_grad %[[DXP]] {num_rows = 16 : i64} : (tensor<?x?x8xf32>) -> tensor<16x8xf32>
// CHECK: %[[DEMB:.*]] = tfm.embedding_grad %arg0, %[[DXP]] {num_rows = 11 : i64}
// CHECK: %[[DSHARED:.*]] = tfm.add %[[DEMB]], %[[DOUT]] : tensor<11x8xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DSHARED]], %[[DPOS]] : tensor<f32>, tensor<11x8xf32>, tensor<16x8xf32>
func.func @tied_sites(%ids: tensor<?x?xi32>, %targets: tensor<?x?xi32>) -> tensor<f32> attributes {tfm.differentiate} {
  %e0 = tfm.param "shared.weight" : tensor<11x8xf32>
  %x = tfm.embedding %e0, %ids : (tensor<11x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %pt = tfm.param "pos.weight" : tensor<16x8xf32>
  %xp = tfm.add_positions %x, %pt : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %h = tfm.gelu %xp : tensor<?x?x8xf32>
  %e1 = tfm.param "shared.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %h, %e1 {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// The same tied weight as one SSA value read twice: the two contributions are summed when they
// meet at the value, again one gradient result.
// CHECK-LABEL: func.func @tied_value(
// CHECK-SAME: -> (tensor<f32> {tfm.name = "loss"}, tensor<11x8xf32> {tfm.name = "grad:shared.weight"}) {
// CHECK: %[[E:.*]] = tfm.param "shared.weight"
// CHECK: %[[X:.*]] = tfm.embedding %[[E]], %arg0
// CHECK: %[[LOGITS:.*]] = tfm.matmul %[[X]], %[[E]] {transpose_b = true}
// CHECK: %[[LOSS:.*]] = tfm.label_smoothed_xent %[[LOGITS]]
// CHECK-NEXT: %[[DL:.*]] = tfm.label_smoothed_xent_grad %[[LOGITS]]
// CHECK: %[[DX:.*]] = tfm.matmul %[[DL]], %[[E]] :
// CHECK: %[[DOUT:.*]] = tfm.weight_grad %[[DL]], %[[X]]
// CHECK: %[[DEMB:.*]] = tfm.embedding_grad %arg0, %[[DX]] {num_rows = 11 : i64}
// CHECK: %[[DSHARED:.*]] = tfm.add %[[DOUT]], %[[DEMB]] : tensor<11x8xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DSHARED]] : tensor<f32>, tensor<11x8xf32>
func.func @tied_value(%ids: tensor<?x?xi32>, %targets: tensor<?x?xi32>) -> tensor<f32> attributes {tfm.differentiate} {
  %e = tfm.param "shared.weight" : tensor<11x8xf32>
  %x = tfm.embedding %e, %ids : (tensor<11x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %logits = tfm.matmul %x, %e {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.0 : f64, pad_id = 1} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// Attention: S = Q K^T (transpose_b), scale, causal/padding mask, softmax, C = P V, merged heads,
// residual. Backward: dP = dC V^T, dV = P^T dC (transpose_a); dS = softmax_grad, scaled, with no
// op for the mask; dQ = dS K, dK = dS^T Q (transpose_a). The residual input's gradient sums the
// skip path and the three projections; the constant sinusoidal table and the mask get nothing.
// CHECK-LABEL: func.func @attention(
// CHECK-SAME: -> (tensor<f32> {tfm.name = "loss"}, tensor<11x8xf32> {tfm.name = "grad:emb.weight"}, tensor<8x8xf32> {tfm.name = "grad:q.weight"}, tensor<8x8xf32> {tfm.name = "grad:k.weight"}, tensor<8x8xf32> {tfm.name = "grad:v.weight"}, tensor<11x8xf32> {tfm.name = "grad:out.weight"}) {
// CHECK: %[[X:.*]] = tfm.add_positions
// CHECK: %[[WQ:.*]] = tfm.param "q.weight"
// CHECK: %[[Q:.*]] = tfm.split_heads
// CHECK: %[[WK:.*]] = tfm.param "k.weight"
// CHECK: %[[K:.*]] = tfm.split_heads
// CHECK: %[[WV:.*]] = tfm.param "v.weight"
// CHECK: %[[V:.*]] = tfm.split_heads
// CHECK: %[[P:.*]] = tfm.softmax
// CHECK: %[[R:.*]] = tfm.add %[[X]], %{{.*}} : tensor<?x?x8xf32>
// CHECK: %[[WO:.*]] = tfm.param "out.weight"
// CHECK: tfm.label_smoothed_xent
// CHECK-NEXT: %[[DL:.*]] = tfm.label_smoothed_xent_grad
// CHECK: %[[DR:.*]] = tfm.matmul %[[DL]], %[[WO]] :
// CHECK: %[[DWO:.*]] = tfm.weight_grad %[[DL]], %[[R]]
// CHECK: %[[DC:.*]] = tfm.split_heads %[[DR]] {heads = 2 : i64} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32>
// CHECK: %[[DP:.*]] = tfm.batch_matmul %[[DC]], %[[V]] {transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32>
// CHECK: %[[DV:.*]] = tfm.batch_matmul %[[P]], %[[DC]] {transpose_a = true} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
// CHECK: %[[DS2:.*]] = tfm.softmax_grad %[[P]], %[[DP]] : tensor<?x2x?x?xf32>
// CHECK-NOT: tfm.mask
// CHECK: %[[DS:.*]] = tfm.scale %[[DS2]] {factor = 5.000000e-01 : f64} : tensor<?x2x?x?xf32>
// CHECK: %[[DQ:.*]] = tfm.batch_matmul %[[DS]], %[[K]] : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
// CHECK: %[[DK:.*]] = tfm.batch_matmul %[[DS]], %[[Q]] {transpose_a = true} : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
// CHECK: %[[DV0:.*]] = tfm.merge_heads %[[DV]] : (tensor<?x2x?x4xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[DXV:.*]] = tfm.matmul %[[DV0]], %[[WV]] :
// CHECK: %[[ACC1:.*]] = tfm.add %[[DR]], %[[DXV]]
// CHECK: %[[DWV:.*]] = tfm.weight_grad %[[DV0]], %[[X]]
// CHECK: %[[DK0:.*]] = tfm.merge_heads %[[DK]]
// CHECK: %[[DXK:.*]] = tfm.matmul %[[DK0]], %[[WK]] :
// CHECK: %[[ACC2:.*]] = tfm.add %[[ACC1]], %[[DXK]]
// CHECK: %[[DWK:.*]] = tfm.weight_grad %[[DK0]], %[[X]]
// CHECK: %[[DQ0:.*]] = tfm.merge_heads %[[DQ]]
// CHECK: %[[DXQ:.*]] = tfm.matmul %[[DQ0]], %[[WQ]] :
// CHECK: %[[ACC3:.*]] = tfm.add %[[ACC2]], %[[DXQ]]
// CHECK: %[[DWQ:.*]] = tfm.weight_grad %[[DQ0]], %[[X]]
// CHECK-NOT: tfm.positions_grad
// CHECK: %[[DEMB:.*]] = tfm.embedding_grad %arg0, %[[ACC3]] {num_rows = 11 : i64}
// CHECK-NEXT: return %{{.*}}, %[[DEMB]], %[[DWQ]], %[[DWK]], %[[DWV]], %[[DWO]] :
func.func @attention(%ids: tensor<?x?xi32>, %targets: tensor<?x?xi32>) -> tensor<f32> attributes {tfm.differentiate} {
  %keep = tfm.padding_mask %ids {pad_id = 0} : (tensor<?x?xi32>) -> tensor<?x?xi1>
  %pos = tfm.position_table {max_len = 16, dim = 8} : tensor<16x8xf32>
  %e = tfm.param "emb.weight" : tensor<11x8xf32>
  %x0 = tfm.embedding %e, %ids : (tensor<11x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %x = tfm.add_positions %x0, %pos : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %wq = tfm.param "q.weight" : tensor<8x8xf32>
  %q0 = tfm.matmul %x, %wq {transpose_b = true} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %q = tfm.split_heads %q0 {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32>
  %wk = tfm.param "k.weight" : tensor<8x8xf32>
  %k0 = tfm.matmul %x, %wk {transpose_b = true} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %k = tfm.split_heads %k0 {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32>
  %wv = tfm.param "v.weight" : tensor<8x8xf32>
  %v0 = tfm.matmul %x, %wv {transpose_b = true} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %v = tfm.split_heads %v0 {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32>
  %s = tfm.batch_matmul %q, %k {transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x?xf32>
  %s1 = tfm.scale %s {factor = 0.5 : f64} : tensor<?x2x?x?xf32>
  %s2 = tfm.mask %s1, %keep {causal = true} : (tensor<?x2x?x?xf32>, tensor<?x?xi1>) -> tensor<?x2x?x?xf32>
  %p = tfm.softmax %s2 : tensor<?x2x?x?xf32>
  %c = tfm.batch_matmul %p, %v : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %o = tfm.merge_heads %c : (tensor<?x2x?x4xf32>) -> tensor<?x?x8xf32>
  %r = tfm.add %x, %o : tensor<?x?x8xf32>
  %wo = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %r, %wo {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// Only functions marked tfm.differentiate are rewritten: @forward keeps its signature and body
// next to a marked function in the same module.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %arg0: tensor<?x?x8xf32>, %arg1: tensor<?x?xi32>) -> tensor<f32> {
// CHECK-NEXT: %[[W:.*]] = tfm.param "out.weight" : tensor<11x8xf32>
// CHECK-NEXT: %[[L:.*]] = tfm.matmul %arg0, %[[W]] {transpose_b = true}
// CHECK-NEXT: %[[LOSS:.*]] = tfm.label_smoothed_xent %[[L]], %arg1
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
// CHECK-NEXT: }
// CHECK-LABEL: func.func @marked(
// CHECK-SAME: -> (tensor<f32> {tfm.name = "loss"}, tensor<11x8xf32> {tfm.name = "grad:out.weight"}) {
// CHECK: tfm.weight_grad
func.func @forward(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>) -> tensor<f32> {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @marked(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>) -> tensor<f32> attributes {tfm.differentiate} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// Errors. The loss must be the only result...
// expected-error @+1 {{tfm-autodiff: 'two_results' must return exactly the loss, got 2 results}}
func.func @two_results(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>) -> (tensor<?x?x11xf32>, tensor<f32>) attributes {tfm.differentiate} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %logits, %loss : tensor<?x?x11xf32>, tensor<f32>
}

// -----
// ...and the result of tfm.label_smoothed_xent itself (here it is rescaled after the fact).
// expected-error @+1 {{tfm-autodiff: the loss of 'scaled_loss' must be the result of tfm.label_smoothed_xent}}
func.func @scaled_loss(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>) -> tensor<f32> attributes {tfm.differentiate} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  %scaled = tfm.scale %loss {factor = 2.0 : f64} : tensor<f32>
  return %scaled : tensor<f32>
}

// -----
// Training dropout (with a step) masks the gradient with the same op (same step, seed, site);
// a step-less dropout is the identity, so its gradient passes through.
// CHECK-LABEL: func.func @dropout
// CHECK: %[[D:.*]] = tfm.dropout %{{.*}} step(%arg2 : tensor<i32>) {rate = 1.000000e-01 : f64, seed = 7 : i64, site = "fc1.residual"} : tensor<?x?x8xf32>
// CHECK: %[[ID:.*]] = tfm.dropout %[[D]] {rate = 2.000000e-01 : f64} : tensor<?x?x8xf32>
// CHECK: %[[G:.*]] = tfm.matmul %{{.*}}, %{{.*}} : (tensor<?x?x11xf32>, tensor<11x8xf32>) -> tensor<?x?x8xf32>
// CHECK-NEXT: tfm.weight_grad %{{.*}}, %[[ID]]
// CHECK-NEXT: %[[GD:.*]] = tfm.dropout %[[G]] step(%arg2 : tensor<i32>) {rate = 1.000000e-01 : f64, seed = 7 : i64, site = "fc1.residual"} : tensor<?x?x8xf32>
// CHECK-NEXT: tfm.weight_grad %[[GD]], %arg0
func.func @dropout(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>, %step: tensor<i32>) -> tensor<f32> attributes {tfm.differentiate} {
  %w1 = tfm.param "fc1.weight" : tensor<8x8xf32>
  %h = tfm.matmul %x, %w1 {transpose_b = true} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %d = tfm.dropout %h step(%step : tensor<i32>) {rate = 0.1 : f64, seed = 7, site = "fc1.residual"} : tensor<?x?x8xf32>
  %e = tfm.dropout %d {rate = 0.2 : f64} : tensor<?x?x8xf32>
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %e, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// A parameter whose value never reaches the loss (used, but only by dead code) has no gradient.
// expected-error @+1 {{tfm-autodiff: parameter 'unused.bias' does not affect the loss}}
func.func @dead_param(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>) -> tensor<f32> attributes {tfm.differentiate} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %logits = tfm.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<11x8xf32>) -> tensor<?x?x11xf32>
  %b = tfm.param "unused.bias" : tensor<8xf32>
  %dead = tfm.bias_add %x, %b : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// Fused ops have no backward rule: autodiff runs before fusion.
func.func @fused(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>) -> tensor<f32> attributes {tfm.differentiate} {
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  %b = tfm.param "out.bias" : tensor<11xf32>
  // expected-error @+1 {{tfm-autodiff: no backward rule for tfm.linear}}
  %logits = tfm.linear %x, %w, %b : (tensor<?x?x8xf32>, tensor<11x8xf32>, tensor<11xf32>) -> tensor<?x?x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// A forward batch_matmul that already reads lhs transposed is not differentiated.
func.func @forward_transpose_a(%a: tensor<2x2x4x5xf32>, %targets: tensor<2x5xi32>) -> tensor<f32> attributes {tfm.differentiate} {
  %w = tfm.param "w" : tensor<2x2x4x8xf32>
  // expected-error @+1 {{tfm-autodiff: batch_matmul with transpose_a is not differentiated}}
  %c = tfm.batch_matmul %a, %w {transpose_a = true} : (tensor<2x2x4x5xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x5x8xf32>
  %m = tfm.merge_heads %c : (tensor<2x2x5x8xf32>) -> tensor<2x5x16xf32>
  %wo = tfm.param "out.weight" : tensor<11x16xf32>
  %logits = tfm.matmul %m, %wo {transpose_b = true} : (tensor<2x5x16xf32>, tensor<11x16xf32>) -> tensor<2x5x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<2x5x11xf32>, tensor<2x5xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----
// A result more refined than its operand (static vs `?`) would give a pass-through gradient the
// wrong type: refused at the op whose gradient it is, not left as IR that fails to verify.
func.func @refined(%x: tensor<?x?x8xf32>, %targets: tensor<?x?xi32>) -> tensor<f32> attributes {tfm.differentiate} {
  %w1 = tfm.param "fc1.weight" : tensor<8x8xf32>
  %h = tfm.matmul %x, %w1 {transpose_b = true} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %b = tfm.param "fc1.bias" : tensor<8xf32>
  %y = tfm.bias_add %h, %b : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %w = tfm.param "out.weight" : tensor<11x8xf32>
  // expected-error @+1 {{tfm-autodiff: gradient type 'tensor<2x5x8xf32>' differs from its value's type 'tensor<?x?x8xf32>'}}
  %logits = tfm.matmul %y, %w {transpose_b = true} : (tensor<2x5x8xf32>, tensor<11x8xf32>) -> tensor<2x5x11xf32>
  %loss = tfm.label_smoothed_xent %logits, %targets {smoothing = 0.1 : f64, pad_id = 0} : (tensor<2x5x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
