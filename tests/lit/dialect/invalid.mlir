// RUN: tfm-opt %s -split-input-file -verify-diagnostics
// Every verifier error of the tfm dialect.

func.func @param_empty_name() {
  // expected-error @+1 {{parameter name must not be empty}}
  %0 = tfm.param "" : tensor<2x2xf32>
  return
}

// -----
func.func @param_dynamic() {
  // expected-error @+1 {{parameter shape must be static}}
  %0 = tfm.param "w" : tensor<?x2xf32>
  return
}

// -----
func.func @position_table_nonpositive() {
  // expected-error @+1 {{max_len and dim must be positive}}
  %0 = tfm.position_table {max_len = 0, dim = 8} : tensor<0x8xf32>
  return
}

// -----
func.func @position_table_odd() {
  // expected-error @+1 {{sinusoidal tables need an even dim, got 7}}
  %0 = tfm.position_table {max_len = 4, dim = 7} : tensor<4x7xf32>
  return
}

// -----
func.func @position_table_shape() {
  // expected-error @+1 {{result must be [4, 8], got 'tensor<5x8xf32>'}}
  %0 = tfm.position_table {max_len = 4, dim = 8} : tensor<5x8xf32>
  return
}

// -----
func.func @embedding_table_rank(%t: tensor<8xf32>, %ids: tensor<?x?xi32>) {
  // expected-error @+1 {{operand #0 must be rank 2 tensor of 32-bit float values, but got 'tensor<8xf32>'}}
  %0 = tfm.embedding %t, %ids : (tensor<8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @embedding_ids_type(%t: tensor<4x8xf32>, %ids: tensor<?x?xf32>) {
  // expected-error @+1 {{operand #1 must be rank 2 tensor of 32-bit signless integer values, but got 'tensor<?x?xf32>'}}
  %0 = tfm.embedding %t, %ids : (tensor<4x8xf32>, tensor<?x?xf32>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @embedding_result(%t: tensor<4x8xf32>, %ids: tensor<?x?xi32>) {
  // expected-error @+1 {{result shape [?, ?, 7] does not match the inferred [?, ?, 8]}}
  %0 = tfm.embedding %t, %ids : (tensor<4x8xf32>, tensor<?x?xi32>) -> tensor<?x?x7xf32>
  return
}

// -----
func.func @add_positions_width(%x: tensor<?x?x8xf32>, %t: tensor<16x6xf32>) {
  // expected-error @+1 {{model dim of x and of the position table differ: [?, ?, 8] vs [16, 6]}}
  %0 = tfm.add_positions %x, %t : (tensor<?x?x8xf32>, tensor<16x6xf32>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @add_positions_too_long(%x: tensor<2x20x8xf32>, %t: tensor<16x8xf32>) {
  // expected-error @+1 {{sequence length 20 exceeds the 16 rows of the position table}}
  %0 = tfm.add_positions %x, %t : (tensor<2x20x8xf32>, tensor<16x8xf32>) -> tensor<2x20x8xf32>
  return
}

// -----
func.func @dropout_rate(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{attribute 'rate' failed to satisfy constraint: 64-bit float attribute in [0, 1)}}
  %0 = tfm.dropout %x {rate = 1.0 : f64} : tensor<?x8xf32>
  return
}

// -----
func.func @bias_rank(%x: tensor<?x8xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+1 {{operand #1 must be rank 1 tensor of 32-bit float values, but got 'tensor<1x8xf32>'}}
  %0 = tfm.bias_add %x, %b : (tensor<?x8xf32>, tensor<1x8xf32>) -> tensor<?x8xf32>
  return
}

// -----
func.func @bias_length(%x: tensor<?x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{bias must match the last dim of x: [?, 8] vs [4]}}
  %0 = tfm.bias_add %x, %b : (tensor<?x8xf32>, tensor<4xf32>) -> tensor<?x8xf32>
  return
}

// -----
func.func @bias_scalar_input(%x: tensor<f32>, %b: tensor<1xf32>) {
  // expected-error @+1 {{operand #0 must be rank 1..8 tensor of 32-bit float values, but got 'tensor<f32>'}}
  %0 = tfm.bias_add %x, %b : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  return
}

// -----
func.func @layer_norm_gamma(%x: tensor<?x8xf32>, %g: tensor<6xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{gamma must match the last dim of x: [?, 8] vs [6]}}
  %0 = tfm.layer_norm %x, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<?x8xf32>, tensor<6xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return
}

// -----
func.func @layer_norm_beta_rank(%x: tensor<?x8xf32>, %g: tensor<8xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{operand #2 must be rank 1 tensor of 32-bit float values, but got 'tensor<2x4xf32>'}}
  %0 = tfm.layer_norm %x, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<?x8xf32>, tensor<8xf32>, tensor<2x4xf32>) -> tensor<?x8xf32>
  return
}

// -----
func.func @layer_norm_epsilon(%x: tensor<?x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute in (0, inf)}}
  %0 = tfm.layer_norm %x, %g, %b {epsilon = 0.0 : f64} : (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return
}

// -----
func.func @matmul_lhs_rank(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{operand #0 must be rank 2..8 tensor of 32-bit float or bfloat16 type values, but got 'tensor<8xf32>'}}
  %0 = tfm.matmul %a, %b : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  return
}

// -----
func.func @matmul_rhs_rank(%a: tensor<?x8xf32>, %b: tensor<1x8x4xf32>) {
  // expected-error @+1 {{operand #1 must be rank 2 tensor of 32-bit float or bfloat16 type values, but got 'tensor<1x8x4xf32>'}}
  %0 = tfm.matmul %a, %b : (tensor<?x8xf32>, tensor<1x8x4xf32>) -> tensor<?x4xf32>
  return
}

// -----
func.func @matmul_contraction(%a: tensor<?x8xf32>, %w: tensor<4x6xf32>) {
  // expected-error @+1 {{contraction dims differ (a[..., M, K] vs b[N, K]): [?, 8] vs [4, 6]}}
  %0 = tfm.matmul %a, %w {transpose_b = true} : (tensor<?x8xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  return
}

// -----
func.func @matmul_result(%a: tensor<?x?x8xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{result shape [?, ?, 8] does not match the inferred [?, ?, 4]}}
  %0 = tfm.matmul %a, %w : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @batch_matmul_rank(%a: tensor<?x?x8xf32>, %b: tensor<?x2x?x4xf32>) {
  // expected-error @+1 {{operand #0 must be rank 4 tensor of 32-bit float or bfloat16 type values, but got 'tensor<?x?x8xf32>'}}
  %0 = tfm.batch_matmul %a, %b : (tensor<?x?x8xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  return
}

// -----
func.func @batch_matmul_heads(%a: tensor<?x2x?x4xf32>, %b: tensor<?x3x?x4xf32>) {
  // expected-error @+1 {{batch dims differ: [?, 2, ?, 4] vs [?, 3, ?, 4]}}
  %0 = tfm.batch_matmul %a, %b {transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x3x?x4xf32>) -> tensor<?x2x?x?xf32>
  return
}

// -----
func.func @batch_matmul_batch(%a: tensor<3x2x?x4xf32>, %b: tensor<5x2x?x4xf32>) {
  // expected-error @+1 {{batch dims differ: [3, 2, ?, 4] vs [5, 2, ?, 4]}}
  %0 = tfm.batch_matmul %a, %b {transpose_b = true} : (tensor<3x2x?x4xf32>, tensor<5x2x?x4xf32>) -> tensor<3x2x?x?xf32>
  return
}

// -----
func.func @batch_matmul_contraction(%a: tensor<?x2x?x4xf32>, %b: tensor<?x2x?x5xf32>) {
  // expected-error @+1 {{contraction dims differ: [?, 2, ?, 4] vs [?, 2, ?, 5]}}
  %0 = tfm.batch_matmul %a, %b {transpose_b = true} : (tensor<?x2x?x4xf32>, tensor<?x2x?x5xf32>) -> tensor<?x2x?x?xf32>
  return
}

// -----
func.func @split_heads_divide(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{model dim 8 of [?, ?, 8] is not divisible by heads = 3}}
  %0 = tfm.split_heads %x {heads = 3} : (tensor<?x?x8xf32>) -> tensor<?x3x?x2xf32>
  return
}

// -----
func.func @split_heads_nonpositive(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{attribute 'heads' failed to satisfy constraint: 64-bit signless integer attribute in [1, 1048576]}}
  %0 = tfm.split_heads %x {heads = 0} : (tensor<?x?x8xf32>) -> tensor<?x1x?x8xf32>
  return
}

// -----
func.func @split_heads_result(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{result shape [?, 2, ?, 2] does not match the inferred [?, 2, ?, 4]}}
  %0 = tfm.split_heads %x {heads = 2} : (tensor<?x?x8xf32>) -> tensor<?x2x?x2xf32>
  return
}

// -----
func.func @merge_heads_rank(%x: tensor<?x?x4xf32>) {
  // expected-error @+1 {{operand #0 must be rank 4 tensor of 32-bit float values, but got 'tensor<?x?x4xf32>'}}
  %0 = tfm.merge_heads %x : (tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  return
}

// -----
func.func @padding_mask_result(%ids: tensor<2x5xi32>) {
  // expected-error @+1 {{result shape [2, 4] does not match the inferred [2, 5]}}
  %0 = tfm.padding_mask %ids {pad_id = 0} : (tensor<2x5xi32>) -> tensor<2x4xi1>
  return
}

// -----
func.func @mask_length(%s: tensor<?x2x?x7xf32>, %keep: tensor<?x6xi1>) {
  // expected-error @+1 {{key_keep must be [B, Kv] for scores [B, H, Q, Kv]: [?, 2, ?, 7] vs [?, 6]}}
  %0 = tfm.mask %s, %keep : (tensor<?x2x?x7xf32>, tensor<?x6xi1>) -> tensor<?x2x?x7xf32>
  return
}

// -----
func.func @mask_batch(%s: tensor<4x2x?x?xf32>, %keep: tensor<3x?xi1>) {
  // expected-error @+1 {{key_keep must be [B, Kv] for scores [B, H, Q, Kv]: [4, 2, ?, ?] vs [3, ?]}}
  %0 = tfm.mask %s, %keep {causal = true} : (tensor<4x2x?x?xf32>, tensor<3x?xi1>) -> tensor<4x2x?x?xf32>
  return
}

// -----
func.func @mask_rank(%s: tensor<?x?x?xf32>, %keep: tensor<?x?xi1>) {
  // expected-error @+1 {{operand #0 must be rank 4 tensor of 32-bit float values, but got 'tensor<?x?x?xf32>'}}
  %0 = tfm.mask %s, %keep : (tensor<?x?x?xf32>, tensor<?x?xi1>) -> tensor<?x?x?xf32>
  return
}

// -----
func.func @xent_smoothing(%l: tensor<?x?x9xf32>, %t: tensor<?x?xi32>) {
  // expected-error @+1 {{attribute 'smoothing' failed to satisfy constraint: 64-bit float attribute in [0, 1)}}
  %0 = tfm.label_smoothed_xent %l, %t {smoothing = -0.1 : f64, pad_id = 0} : (tensor<?x?x9xf32>, tensor<?x?xi32>) -> tensor<f32>
  return
}

// -----
func.func @xent_targets(%l: tensor<2x5x9xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{logits must be targets' shape plus a vocabulary dim: [2, 5, 9] vs [2, 4]}}
  %0 = tfm.label_smoothed_xent %l, %t {smoothing = 0.1 : f64, pad_id = 0} : (tensor<2x5x9xf32>, tensor<2x4xi32>) -> tensor<f32>
  return
}

// -----
func.func @xent_result(%l: tensor<?x?x9xf32>, %t: tensor<?x?xi32>) {
  // expected-error @+1 {{result shape [1] does not match the inferred []}}
  %0 = tfm.label_smoothed_xent %l, %t {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x9xf32>, tensor<?x?xi32>) -> tensor<1xf32>
  return
}

// -----
func.func @slice_negative_offset(%x: tensor<?x16xf32>) {
  // expected-error @+1 {{attribute 'offset' failed to satisfy constraint: 64-bit signless integer attribute in [0, 1099511627776]}}
  %0 = tfm.slice_last %x {offset = -4, size = 8} : (tensor<?x16xf32>) -> tensor<?x8xf32>
  return
}

// -----
func.func @slice_past_end(%x: tensor<?x16xf32>) {
  // expected-error @+1 {{columns [12, 20) exceed the last dim of [?, 16]}}
  %0 = tfm.slice_last %x {offset = 12, size = 8} : (tensor<?x16xf32>) -> tensor<?x8xf32>
  return
}

// -----
func.func @linear_activation(%x: tensor<?x8xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'activation' failed to satisfy constraint: string attribute one of none,relu,gelu}}
  %0 = tfm.linear %x, %w, %b {activation = "tanh"} : (tensor<?x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  return
}

// -----
func.func @linear_layout(%x: tensor<?x8xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'weight_layout' failed to satisfy constraint: string attribute one of plain,packed}}
  %0 = tfm.linear %x, %w, %b {weight_layout = "blocked"} : (tensor<?x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  return
}

// -----
func.func @linear_residual(%x: tensor<?x8xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>, %r: tensor<?x5xf32>) {
  // expected-error @+1 {{residual must have the result's shape: [?, 4] vs [?, 5]}}
  %0 = tfm.linear %x, %w, %b, %r : (tensor<?x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<?x5xf32>) -> tensor<?x4xf32>
  return
}

// -----
func.func @attention_columns(%qkv: tensor<?x?x24xf32>, %keep: tensor<?x?xi1>) {
  // expected-error @+1 {{v columns [20, 28) exceed its width 24}}
  %0 = tfm.fused_attention %qkv, %qkv, %qkv, %keep {heads = 2, head_dim = 4, q_offset = 0, k_offset = 8, v_offset = 20, scale = 0.5 : f64} : (tensor<?x?x24xf32>, tensor<?x?x24xf32>, tensor<?x?x24xf32>, tensor<?x?xi1>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @attention_keep_length(%q: tensor<?x?x8xf32>, %kv: tensor<2x7x16xf32>, %keep: tensor<2x6xi1>) {
  // expected-error @+1 {{key lengths of k, v, key_keep differ: [2, 7, 16], [2, 7, 16], [2, 6]}}
  %0 = tfm.fused_attention %q, %kv, %kv, %keep {heads = 2, head_dim = 4, q_offset = 0, k_offset = 0, v_offset = 8, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<2x7x16xf32>, tensor<2x7x16xf32>, tensor<2x6xi1>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @add_layer_norm_types(%a: tensor<?x8xf32>, %b: tensor<?x4xf32>, %g: tensor<8xf32>, %beta: tensor<8xf32>) {
  // expected-error @+1 {{operands must have the same shape: [?, 8] vs [?, 4]}}
  %0 = tfm.add_layer_norm %a, %b, %g, %beta {epsilon = 1.0e-5 : f64} : (tensor<?x8xf32>, tensor<?x4xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return
}

// -----
func.func @concat_trailing(%a: tensor<4x8xf32>, %b: tensor<4x6xf32>) {
  // expected-error @+1 {{operand #1 [4, 6] differs from operand #0 [4, 8] in dim 1 (only dim 0 may differ)}}
  %0 = tfm.concat %a, %b : (tensor<4x8xf32>, tensor<4x6xf32>) -> tensor<8x8xf32>
  return
}

// -----
// Gradient ops (tfm-autodiff) and batch_matmul's transpose_a.
func.func @weight_grad_leading(%dy: tensor<2x5x16xf32>, %x: tensor<3x5x8xf32>) {
  // expected-error @+1 {{dy and x must have the same leading dims: [2, 5, 16] vs [3, 5, 8]}}
  %0 = tfm.weight_grad %dy, %x : (tensor<2x5x16xf32>, tensor<3x5x8xf32>) -> tensor<16x8xf32>
  return
}

// -----
func.func @weight_grad_rank(%dy: tensor<?x?x16xf32>, %x: tensor<?x8xf32>) {
  // expected-error @+1 {{dy and x must have the same rank: [?, ?, 16] vs [?, 8]}}
  %0 = tfm.weight_grad %dy, %x : (tensor<?x?x16xf32>, tensor<?x8xf32>) -> tensor<16x8xf32>
  return
}

// -----
func.func @weight_grad_dy_rank(%dy: tensor<16xf32>, %x: tensor<8xf32>) {
  // expected-error @+1 {{operand #0 must be rank 2..8 tensor of 32-bit float values, but got 'tensor<16xf32>'}}
  %0 = tfm.weight_grad %dy, %x : (tensor<16xf32>, tensor<8xf32>) -> tensor<16x8xf32>
  return
}

// -----
func.func @weight_grad_result(%dy: tensor<?x?x16xf32>, %x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{result shape [8, 16] does not match the inferred [16, 8]}}
  %0 = tfm.weight_grad %dy, %x : (tensor<?x?x16xf32>, tensor<?x?x8xf32>) -> tensor<8x16xf32>
  return
}

// -----
func.func @bias_grad_result(%dy: tensor<?x?x16xf32>) {
  // expected-error @+1 {{result shape [8] does not match the inferred [16]}}
  %0 = tfm.bias_grad %dy : (tensor<?x?x16xf32>) -> tensor<8xf32>
  return
}

// -----
func.func @bias_grad_scalar(%dy: tensor<f32>) {
  // expected-error @+1 {{operand #0 must be rank 1..8 tensor of 32-bit float values, but got 'tensor<f32>'}}
  %0 = tfm.bias_grad %dy : (tensor<f32>) -> tensor<1xf32>
  return
}

// -----
func.func @relu_grad_types(%x: tensor<?x8xf32>, %dy: tensor<?x4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "tfm.relu_grad"(%x, %dy) : (tensor<?x8xf32>, tensor<?x4xf32>) -> tensor<?x8xf32>
  return
}

// -----
func.func @softmax_grad_types(%y: tensor<?x2x?x?xf32>, %dy: tensor<?x4x?x?xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "tfm.softmax_grad"(%y, %dy) : (tensor<?x2x?x?xf32>, tensor<?x4x?x?xf32>) -> tensor<?x2x?x?xf32>
  return
}

// -----
func.func @layer_norm_grad_gamma(%x: tensor<?x8xf32>, %g: tensor<6xf32>, %dy: tensor<?x8xf32>) {
  // expected-error @+1 {{gamma must match the last dim of x: [?, 8] vs [6]}}
  %0 = tfm.layer_norm_grad %x, %g, %dy {epsilon = 1.0e-5 : f64} : (tensor<?x8xf32>, tensor<6xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return
}

// -----
func.func @layer_norm_grad_dy(%x: tensor<?x8xf32>, %g: tensor<8xf32>, %dy: tensor<?x4xf32>) {
  // expected-error @+1 {{dy must have the input's shape: [?, 4] vs [?, 8]}}
  %0 = tfm.layer_norm_grad %x, %g, %dy {epsilon = 1.0e-5 : f64} : (tensor<?x8xf32>, tensor<8xf32>, tensor<?x4xf32>) -> tensor<?x8xf32>
  return
}

// -----
func.func @layer_norm_grad_epsilon(%x: tensor<?x8xf32>, %g: tensor<8xf32>, %dy: tensor<?x8xf32>) {
  // expected-error @+1 {{attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute in (0, inf)}}
  %0 = tfm.layer_norm_grad %x, %g, %dy {epsilon = 0.0 : f64} : (tensor<?x8xf32>, tensor<8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return
}

// -----
func.func @layer_norm_gamma_grad_dy_rank(%x: tensor<?x8xf32>, %dy: tensor<?x?x8xf32>) {
  // expected-error @+1 {{dy must have the input's shape: [?, ?, 8] vs [?, 8]}}
  %0 = tfm.layer_norm_gamma_grad %x, %dy {epsilon = 1.0e-5 : f64} : (tensor<?x8xf32>, tensor<?x?x8xf32>) -> tensor<8xf32>
  return
}

// -----
func.func @layer_norm_gamma_grad_result(%x: tensor<?x8xf32>, %dy: tensor<?x8xf32>) {
  // expected-error @+1 {{result shape [1, 8] does not match the inferred [8]}}
  %0 = tfm.layer_norm_gamma_grad %x, %dy {epsilon = 1.0e-5 : f64} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<1x8xf32>
  return
}

// -----
func.func @embedding_grad_num_rows(%ids: tensor<?x?xi32>, %dy: tensor<?x?x8xf32>) {
  // expected-error @+1 {{result shape [10, 8] does not match the inferred [11, 8]}}
  %0 = tfm.embedding_grad %ids, %dy {num_rows = 11} : (tensor<?x?xi32>, tensor<?x?x8xf32>) -> tensor<10x8xf32>
  return
}

// -----
func.func @embedding_grad_nonpositive(%ids: tensor<?x?xi32>, %dy: tensor<?x?x8xf32>) {
  // expected-error @+1 {{attribute 'num_rows' failed to satisfy constraint: 64-bit signless integer attribute in [1, 1099511627776]}}
  %0 = tfm.embedding_grad %ids, %dy {num_rows = 0} : (tensor<?x?xi32>, tensor<?x?x8xf32>) -> tensor<0x8xf32>
  return
}

// -----
func.func @embedding_grad_length(%ids: tensor<2x5xi32>, %dy: tensor<2x4x8xf32>) {
  // expected-error @+1 {{dy must be [B, S, D] for ids [B, S]: [2, 4, 8] vs [2, 5]}}
  %0 = tfm.embedding_grad %ids, %dy {num_rows = 11} : (tensor<2x5xi32>, tensor<2x4x8xf32>) -> tensor<11x8xf32>
  return
}

// -----
func.func @embedding_grad_width(%ids: tensor<?x?xi32>, %dy: tensor<?x?x8xf32>) {
  // expected-error @+1 {{result shape [11, 6] does not match the inferred [11, 8]}}
  %0 = tfm.embedding_grad %ids, %dy {num_rows = 11} : (tensor<?x?xi32>, tensor<?x?x8xf32>) -> tensor<11x6xf32>
  return
}

// -----
func.func @positions_grad_too_long(%dy: tensor<2x20x8xf32>) {
  // expected-error @+1 {{sequence length 20 exceeds the 16 rows of the position table}}
  %0 = tfm.positions_grad %dy {num_rows = 16} : (tensor<2x20x8xf32>) -> tensor<16x8xf32>
  return
}

// -----
func.func @positions_grad_result(%dy: tensor<?x?x8xf32>) {
  // expected-error @+1 {{result shape [12, 8] does not match the inferred [16, 8]}}
  %0 = tfm.positions_grad %dy {num_rows = 16} : (tensor<?x?x8xf32>) -> tensor<12x8xf32>
  return
}

// -----
func.func @positions_grad_rank(%dy: tensor<?x8xf32>) {
  // expected-error @+1 {{operand #0 must be rank 3 tensor of 32-bit float values, but got 'tensor<?x8xf32>'}}
  %0 = tfm.positions_grad %dy {num_rows = 16} : (tensor<?x8xf32>) -> tensor<16x8xf32>
  return
}

// -----
func.func @xent_grad_result_rank(%l: tensor<?x?x11xf32>, %t: tensor<?x?xi32>) {
  // expected-error @+1 {{result shape [] does not match the inferred [?, ?, 11]}}
  %0 = tfm.label_smoothed_xent_grad %l, %t {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<f32>
  return
}

// -----
func.func @xent_grad_result_vocab(%l: tensor<?x?x11xf32>, %t: tensor<?x?xi32>) {
  // expected-error @+1 {{result shape [?, ?, 10] does not match the inferred [?, ?, 11]}}
  %0 = tfm.label_smoothed_xent_grad %l, %t {smoothing = 0.1 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<?x?x10xf32>
  return
}

// -----
func.func @xent_grad_targets(%l: tensor<3x5x11xf32>, %t: tensor<2x5xi32>) {
  // expected-error @+1 {{logits must be targets' shape plus a vocabulary dim: [3, 5, 11] vs [2, 5]}}
  %0 = tfm.label_smoothed_xent_grad %l, %t {smoothing = 0.1 : f64, pad_id = 0} : (tensor<3x5x11xf32>, tensor<2x5xi32>) -> tensor<3x5x11xf32>
  return
}

// -----
func.func @xent_grad_smoothing(%l: tensor<?x?x11xf32>, %t: tensor<?x?xi32>) {
  // expected-error @+1 {{attribute 'smoothing' failed to satisfy constraint: 64-bit float attribute in [0, 1)}}
  %0 = tfm.label_smoothed_xent_grad %l, %t {smoothing = 1.0 : f64, pad_id = 0} : (tensor<?x?x11xf32>, tensor<?x?xi32>) -> tensor<?x?x11xf32>
  return
}

// -----
func.func @batch_matmul_transpose_a_contraction(%a: tensor<?x2x6x?xf32>, %b: tensor<?x2x5x4xf32>) {
  // expected-error @+1 {{contraction dims differ: [?, 2, 6, ?] vs [?, 2, 5, 4]}}
  %0 = tfm.batch_matmul %a, %b {transpose_a = true} : (tensor<?x2x6x?xf32>, tensor<?x2x5x4xf32>) -> tensor<?x2x?x4xf32>
  return
}

// -----
func.func @batch_matmul_transpose_a_result(%a: tensor<?x2x6x7xf32>, %b: tensor<?x2x6x4xf32>) {
  // expected-error @+1 {{result shape [?, 2, 6, 4] does not match the inferred [?, 2, 7, 4]}}
  %0 = tfm.batch_matmul %a, %b {transpose_a = true} : (tensor<?x2x6x7xf32>, tensor<?x2x6x4xf32>) -> tensor<?x2x6x4xf32>
  return
}

// -----
func.func @batch_matmul_transpose_ab_contraction(%a: tensor<?x2x6x7xf32>, %b: tensor<?x2x4x7xf32>) {
  // expected-error @+1 {{contraction dims differ: [?, 2, 6, 7] vs [?, 2, 4, 7]}}
  %0 = tfm.batch_matmul %a, %b {transpose_a = true, transpose_b = true} : (tensor<?x2x6x7xf32>, tensor<?x2x4x7xf32>) -> tensor<?x2x7x4xf32>
  return
}

// -----
func.func @adam_update_not_a_param(%x: tensor<4x3xf32>, %g: tensor<4x3xf32>, %lr: tensor<f32>, %step: tensor<i32>) {
  %m = tfm.state "adam.m/w" : tensor<4x3xf32>
  // expected-error @+1 {{param must be the result of tfm.param}}
  %0 = tfm.adam_update %x, %g, %lr, %step, %m, %m {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i32>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return
}

// -----
func.func @adam_update_grad_shape(%g: tensor<3x4xf32>, %lr: tensor<f32>, %step: tensor<i32>) {
  %w = tfm.param "w" : tensor<4x3xf32>
  %m = tfm.state "adam.m/w" : tensor<4x3xf32>
  // expected-error @+1 {{grad must have the parameter's shape: [3, 4] vs [4, 3]}}
  %0 = tfm.adam_update %w, %g, %lr, %step, %m, %m {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64} : (tensor<4x3xf32>, tensor<3x4xf32>, tensor<f32>, tensor<i32>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return
}

// -----
func.func @adam_update_beta(%g: tensor<4x3xf32>, %lr: tensor<f32>, %step: tensor<i32>) {
  %w = tfm.param "w" : tensor<4x3xf32>
  %m = tfm.state "adam.m/w" : tensor<4x3xf32>
  // expected-error @+1 {{attribute 'beta2' failed to satisfy constraint: 64-bit float attribute in [0, 1)}}
  %0 = tfm.adam_update %w, %g, %lr, %step, %m, %m {beta1 = 0.9 : f64, beta2 = 1.0 : f64, epsilon = 1.0e-9 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i32>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return
}

// -----
func.func @adam_update_moment_not_state(%g: tensor<4x3xf32>, %lr: tensor<f32>, %step: tensor<i32>, %m: tensor<4x3xf32>) {
  %w = tfm.param "w" : tensor<4x3xf32>
  // expected-error @+1 {{m must be a tfm.state (the optimizer state)}}
  %0 = tfm.adam_update %w, %g, %lr, %step, %m, %m {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i32>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return
}

// -----
func.func @adam_update_moment_shape(%g: tensor<4x3xf32>, %lr: tensor<f32>, %step: tensor<i32>) {
  %w = tfm.param "w" : tensor<4x3xf32>
  %m = tfm.state "adam.m/w" : tensor<4x3xf32>
  %v = tfm.state "adam.v/w" : tensor<3x4xf32>
  // expected-error @+1 {{the moments [4, 3], [3, 4] must have the parameter's shape [4, 3]}}
  %0 = tfm.adam_update %w, %g, %lr, %step, %m, %v {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i32>, tensor<4x3xf32>, tensor<3x4xf32>) -> tensor<f32>
  return
}

// -----
func.func @adam_update_scale_rank(%g: tensor<4x3xf32>, %lr: tensor<f32>, %step: tensor<i32>, %c: tensor<1xf32>) {
  %w = tfm.param "w" : tensor<4x3xf32>
  %m = tfm.state "adam.m/w" : tensor<4x3xf32>
  // expected-error @+1 {{operand #6 must be rank 0 tensor of 32-bit float values, but got 'tensor<1xf32>'}}
  %0 = tfm.adam_update %w, %g, %lr, %step, %m, %m scale %c {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<1xf32>) -> tensor<f32>
  return
}

// -----
func.func @adam_update_weight_decay(%g: tensor<4x3xf32>, %lr: tensor<f32>, %step: tensor<i32>) {
  %w = tfm.param "w" : tensor<4x3xf32>
  %m = tfm.state "adam.m/w" : tensor<4x3xf32>
  // expected-error @+1 {{attribute 'weight_decay' failed to satisfy constraint: 64-bit float attribute in [0, 1)}}
  %0 = tfm.adam_update %w, %g, %lr, %step, %m, %m {beta1 = 0.9 : f64, beta2 = 0.98 : f64, epsilon = 1.0e-9 : f64, weight_decay = 2.0 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i32>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return
}

// -----
func.func @clip_scale_max_norm(%n: tensor<f32>) {
  // expected-error @+1 {{attribute 'max_norm' failed to satisfy constraint: 64-bit float attribute in (0, inf)}}
  %0 = tfm.clip_scale %n {max_norm = 0.0 : f64} : (tensor<f32>) -> tensor<f32>
  return
}

// -----
func.func @sum_squares_not_f32(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be rank 0..8 tensor of 32-bit float values, but got 'tensor<4xi32>'}}
  %0 = tfm.sum_squares %x : (tensor<4xi32>) -> tensor<f32>
  return
}

// -----
func.func @lr_schedule_step_rank(%step: tensor<1xi32>) {
  // expected-error @+1 {{operand #0 must be rank 0 tensor of 32-bit signless integer values, but got 'tensor<1xi32>'}}
  %0 = tfm.lr_schedule %step {lr_scale = 1.0 : f64, d_model = 512, warmup_steps = 4000} : (tensor<1xi32>) -> tensor<f32>
  return
}

// -----
func.func @lr_schedule_warmup(%step: tensor<i32>) {
  // expected-error @+1 {{attribute 'warmup_steps' failed to satisfy constraint: 64-bit signless integer attribute in [1, 1099511627776]}}
  %0 = tfm.lr_schedule %step {lr_scale = 1.0 : f64, d_model = 512, warmup_steps = 0} : (tensor<i32>) -> tensor<f32>
  return
}

// -----
func.func @dropout_step_without_site(%x: tensor<?x8xf32>, %step: tensor<i32>) {
  // expected-error @+1 {{a training dropout (with a step) needs a site name}}
  %0 = tfm.dropout %x step(%step : tensor<i32>) {rate = 0.1 : f64} : tensor<?x8xf32>
  return
}

// -----
func.func @dropout_step_rank(%x: tensor<?x8xf32>, %step: tensor<1xi32>) {
  // expected-error @+1 {{operand #1 must be rank 0 tensor of 32-bit signless integer values, but got 'tensor<1xi32>'}}
  %0 = tfm.dropout %x step(%step : tensor<1xi32>) {rate = 0.1 : f64, site = "a"} : tensor<?x8xf32>
  return
}

// -----
func.func @last_position_result(%x: tensor<?x?x8xf32>) {
  // expected-error @+1 {{result shape [?, 2, 8] does not match the inferred [?, 1, 8]}}
  %0 = tfm.last_position %x : (tensor<?x?x8xf32>) -> tensor<?x2x8xf32>
  return
}

// -----
func.func @cache_not_state(%c: tensor<?x?x8xf32>, %p: tensor<?xi32>, %s: tensor<i32>) {
  // expected-error @+1 {{cache must be a tfm.state or the result of tfm.cache_reorder/tfm.cache_write}}
  %0 = tfm.cache_reorder %c, %p, %s : (tensor<?x?x8xf32>, tensor<?xi32>, tensor<i32>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @cache_step_rank(%p: tensor<?xi32>, %s: tensor<1x1xi32>) {
  %c = tfm.state "k" : tensor<?x?x8xf32>
  // expected-error @+1 {{operand #2 must be rank 0..1 tensor of 32-bit signless integer values, but got 'tensor<1x1xi32>'}}
  %0 = tfm.cache_reorder %c, %p, %s : (tensor<?x?x8xf32>, tensor<?xi32>, tensor<1x1xi32>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @cache_step_per_row(%p: tensor<2xi32>, %s: tensor<3xi32>) {
  %c = tfm.state "k" : tensor<?x?x8xf32>
  // expected-error @+1 {{step must be a scalar or have one position per row (2), got [3]}}
  %0 = tfm.cache_reorder %c, %p, %s : (tensor<?x?x8xf32>, tensor<2xi32>, tensor<3xi32>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @cache_write_step_per_row(%u: tensor<4x1x8xf32>, %s: tensor<5xi32>) {
  %c = tfm.state "k" : tensor<?x?x8xf32>
  // expected-error @+1 {{step must be a scalar or have one position per row (4), got [5]}}
  %0 = tfm.cache_write %c, %u, %s : (tensor<?x?x8xf32>, tensor<4x1x8xf32>, tensor<5xi32>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @cached_attention_step_per_row(%q: tensor<3x1x8xf32>, %s: tensor<2xi32>) {
  %c = tfm.state "k" : tensor<?x?x8xf32>
  // expected-error @+1 {{step must be a scalar or have one position per row (3), got [2]}}
  %0 = tfm.cached_attention %q, %c, %c, %s {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<3x1x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<2xi32>) -> tensor<3x1x8xf32>
  return
}

// -----
func.func @add_position_at_step_per_row(%x: tensor<3x1x8xf32>, %t: tensor<16x8xf32>, %s: tensor<4xi32>) {
  // expected-error @+1 {{step must be a scalar or have one position per row (3), got [4]}}
  %0 = tfm.add_position_at %x, %t, %s : (tensor<3x1x8xf32>, tensor<16x8xf32>, tensor<4xi32>) -> tensor<3x1x8xf32>
  return
}

// -----
func.func @cache_write_width(%u: tensor<?x1x4xf32>, %s: tensor<i32>) {
  %c = tfm.state "k" : tensor<?x?x8xf32>
  // expected-error @+1 {{update columns [0, 8) exceed its width 4: [?, 1, 4]}}
  %0 = tfm.cache_write %c, %u, %s : (tensor<?x?x8xf32>, tensor<?x1x4xf32>, tensor<i32>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @cache_write_offset(%u: tensor<?x1x16xf32>, %s: tensor<i32>) {
  %c = tfm.state "k" : tensor<?x?x8xf32>
  // expected-error @+1 {{update columns [12, 20) exceed its width 16: [?, 1, 16]}}
  %0 = tfm.cache_write %c, %u, %s {update_offset = 12} : (tensor<?x?x8xf32>, tensor<?x1x16xf32>, tensor<i32>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @cache_write_length(%u: tensor<?x2x8xf32>, %s: tensor<i32>) {
  %c = tfm.state "k" : tensor<?x?x8xf32>
  // expected-error @+1 {{update must be [R, 1, W] for a cache [Rc, Tc, D]: [?, 2, 8] vs [?, ?, 8]}}
  %0 = tfm.cache_write %c, %u, %s : (tensor<?x?x8xf32>, tensor<?x2x8xf32>, tensor<i32>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @state_dynamic_width() {
  // expected-error @+1 {{the last state dimension must be static}}
  %c = tfm.state "k" : tensor<?x?x?xf32>
  return
}

// -----
func.func @cached_attention_width(%q: tensor<?x1x8xf32>, %s: tensor<i32>) {
  %c = tfm.state "k" : tensor<?x?x6xf32>
  // expected-error @+1 {{k_cache and v_cache must both be [Rc, Tc, heads * head_dim]: [?, ?, 6] vs [?, ?, 6]}}
  %0 = tfm.cached_attention %q, %c, %c, %s {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x6xf32>, tensor<?x?x6xf32>, tensor<i32>) -> tensor<?x1x8xf32>
  return
}

// -----
func.func @gathered_attention_rows(%q: tensor<3x1x8xf32>, %kv: tensor<2x5x8xf32>, %keep: tensor<2x5xi1>, %rows: tensor<4xi32>) {
  // expected-error @+1 {{rows must have one entry per query row: [4] vs [3, 1, 8]}}
  %0 = tfm.gathered_attention %q, %kv, %kv, %keep, %rows {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<3x1x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5xi1>, tensor<4xi32>) -> tensor<3x1x8xf32>
  return
}

// -----
func.func @attention_weights_rows(%q: tensor<3x1x8xf32>, %k: tensor<2x5x8xf32>, %keep: tensor<2x5xi1>, %rows: tensor<4xi32>) {
  // expected-error @+1 {{rows must have one entry per query row: [4] vs [3, 1, 8]}}
  %0 = tfm.attention_weights %q, %k, %keep, %rows {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<3x1x8xf32>, tensor<2x5x8xf32>, tensor<2x5xi1>, tensor<4xi32>) -> tensor<3x1x5xf32>
  return
}

// -----
func.func @attention_weights_k_offset(%q: tensor<?x1x8xf32>, %k: tensor<2x5x8xf32>, %keep: tensor<2x5xi1>, %rows: tensor<?xi32>) {
  // expected-error @+1 {{k columns [1, 9) exceed its width 8: [2, 5, 8]}}
  %0 = tfm.attention_weights %q, %k, %keep, %rows {heads = 2, head_dim = 4, k_offset = 1, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<2x5x8xf32>, tensor<2x5xi1>, tensor<?xi32>) -> tensor<?x1x5xf32>
  return
}

// -----
func.func @attention_weights_result(%q: tensor<?x1x8xf32>, %k: tensor<2x5x8xf32>, %keep: tensor<2x5xi1>, %rows: tensor<?xi32>) {
  // expected-error @+1 {{result shape [?, 1, 6] does not match the inferred [?, 1, 5]}}
  %0 = tfm.attention_weights %q, %k, %keep, %rows {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<2x5x8xf32>, tensor<2x5xi1>, tensor<?xi32>) -> tensor<?x1x6xf32>
  return
}

// -----
func.func @gathered_attention_keep(%q: tensor<?x1x8xf32>, %kv: tensor<2x5x8xf32>, %keep: tensor<2x4xi1>, %rows: tensor<?xi32>) {
  // expected-error @+1 {{key_keep must be [N, S] of k: [2, 4] vs [2, 5, 8]}}
  %0 = tfm.gathered_attention %q, %kv, %kv, %keep, %rows {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x4xi1>, tensor<?xi32>) -> tensor<?x1x8xf32>
  return
}

// -----
func.func @add_position_at_length(%x: tensor<?x3x8xf32>, %s: tensor<i32>) {
  %pos = tfm.position_table {max_len = 16, dim = 8} : tensor<16x8xf32>
  // expected-error @+1 {{x must be [B, 1, D] for a table [L, D]: [?, 3, 8] vs [16, 8]}}
  %0 = tfm.add_position_at %x, %pos, %s : (tensor<?x3x8xf32>, tensor<16x8xf32>, tensor<i32>) -> tensor<?x3x8xf32>
  return
}

// -----
func.func @matmul_mixed_element_types(%a: tensor<2x4xf32>, %b: tensor<3x4xbf16>) {
  // expected-error @+1 {{all of {lhs, rhs} have same element type}}
  %0 = tfm.matmul %a, %b {transpose_b = true} : (tensor<2x4xf32>, tensor<3x4xbf16>) -> tensor<2x3xf32>
  return
}

// -----
func.func @accumulate_not_state(%acc: tensor<4x8xf32>, %g: tensor<4x8xf32>, %w: tensor<f32>, %reset: tensor<i32>) {
  // expected-error @+1 {{'tfm.grad_accumulate' op accumulator must be a tfm.state}}
  %0 = tfm.grad_accumulate %acc, %g, %w, %reset : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<i32>) -> tensor<4x8xf32>
  return
}

// -----
func.func @accumulate_wrong_shape(%g: tensor<4x9xf32>, %w: tensor<f32>, %reset: tensor<i32>) {
  %acc = tfm.state "grad_accum/p" : tensor<4x8xf32>
  // expected-error @+1 {{grad must have the accumulator's shape}}
  %0 = tfm.grad_accumulate %acc, %g, %w, %reset : (tensor<4x8xf32>, tensor<4x9xf32>, tensor<f32>, tensor<i32>) -> tensor<4x8xf32>
  return
}

// -----
func.func @gathered_kv_mixed(%q: tensor<?x1x8xf32>, %k: tensor<?x?x8xbf16>, %v: tensor<?x?x8xf32>, %keep: tensor<?x?xi1>, %rows: tensor<?xi32>) {
  // expected-error @+1 {{all of {k, v} have same element type}}
  %0 = tfm.gathered_attention %q, %k, %v, %keep, %rows {heads = 2, head_dim = 4, scale = 0.5 : f64} : (tensor<?x1x8xf32>, tensor<?x?x8xbf16>, tensor<?x?x8xf32>, tensor<?x?xi1>, tensor<?xi32>) -> tensor<?x1x8xf32>
  return
}

// -----
func.func @cache_write_result_type(%u: tensor<?x1x8xf32>, %s: tensor<i32>) {
  %c = tfm.state "k" : tensor<?x?x8xbf16>
  // expected-error @+1 {{all of {cache, result} have same type}}
  %0 = tfm.cache_write %c, %u, %s : (tensor<?x?x8xbf16>, tensor<?x1x8xf32>, tensor<i32>) -> tensor<?x?x8xf32>
  return
}

// -----
func.func @cache_write_bf16_update(%u: tensor<?x1x8xbf16>, %s: tensor<i32>) {
  %c = tfm.state "k" : tensor<?x?x8xbf16>
  // expected-error @+1 {{operand #1 must be rank 3 tensor of 32-bit float values}}
  %0 = tfm.cache_write %c, %u, %s : (tensor<?x?x8xbf16>, tensor<?x1x8xbf16>, tensor<i32>) -> tensor<?x?x8xbf16>
  return
}

// -----
func.func @to_bf16_from_bf16(%x: tensor<4xbf16>) {
  // expected-error @+1 {{operand #0 must be rank 0..8 tensor of 32-bit float values}}
  %0 = tfm.to_bf16 %x : (tensor<4xbf16>) -> tensor<4xbf16>
  return
}

// -----
// bf16 keys and values are for the decoding ops only: the flash attention reads f32.
func.func @fused_attention_bf16_kv(%q: tensor<2x3x8xf32>, %k: tensor<2x3x8xbf16>, %keep: tensor<2x3xi1>) {
  // expected-error @+1 {{operand #1 must be rank 3 tensor of 32-bit float values}}
  %0 = tfm.fused_attention %q, %k, %k, %keep {heads = 2, head_dim = 4, q_offset = 0, k_offset = 0, v_offset = 0, scale = 0.5 : f64} : (tensor<2x3x8xf32>, tensor<2x3x8xbf16>, tensor<2x3x8xbf16>, tensor<2x3xi1>) -> tensor<2x3x8xf32>
  return
}

// -----
func.func @param_bf16() {
  // expected-error @+1 {{result #0 must be rank 0..8 tensor of 32-bit float values}}
  %0 = tfm.param "w" : tensor<4x4xbf16>
  return
}
