// RUN: tfm-opt %s -split-input-file -pass-pipeline="builtin.module(func.func(tfm-fuse-epilogues{report=true}))" 2>/dev/null | FileCheck %s
// RUN: tfm-opt %s -split-input-file -pass-pipeline="builtin.module(func.func(tfm-fuse-epilogues{report=true}))" 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT

// Post-norm FFN: bias + ReLU into fc1, bias into fc2, residual + LayerNorm into one op.
// CHECK-LABEL: func.func @post_norm_ffn
// CHECK: %[[H:.*]] = tfm.linear %arg0, %{{.*}}, %{{.*}} {activation = "relu"} : (tensor<?x?x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
// CHECK: %[[F:.*]] = tfm.linear %[[H]], %{{.*}}, %{{.*}} : (tensor<?x?x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[N:.*]] = tfm.add_layer_norm %arg0, %[[F]], %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64}
// CHECK-NOT: tfm.bias_add
// CHECK-NOT: tfm.relu
// CHECK: return %[[N]]
// REPORT: remark: fuse-epilogues: l.ffn: bias + relu folded into the GEMM
// REPORT: remark: fuse-epilogues: l.ffn: bias folded into the GEMM
// REPORT: remark: fuse-epilogues: l: residual add + LayerNorm fused into one pass (post-norm)
func.func @post_norm_ffn(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %w1 = tfm.param "l.ffn.fc1.weight" : tensor<16x8xf32> loc(#ffn)
  %b1 = tfm.param "l.ffn.fc1.bias" : tensor<16xf32> loc(#ffn)
  %w2 = tfm.param "l.ffn.fc2.weight" : tensor<8x16xf32> loc(#ffn)
  %b2 = tfm.param "l.ffn.fc2.bias" : tensor<8xf32> loc(#ffn)
  %g = tfm.param "l.ffn_norm.weight" : tensor<8xf32> loc(#layer)
  %b = tfm.param "l.ffn_norm.bias" : tensor<8xf32> loc(#layer)
  %h0 = tfm.matmul %x, %w1 {transpose_b = true} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32> loc(#ffn)
  %h1 = tfm.bias_add %h0, %b1 : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32> loc(#ffn)
  %h = tfm.relu %h1 : tensor<?x?x16xf32> loc(#ffn)
  %f0 = tfm.matmul %h, %w2 {transpose_b = true} : (tensor<?x?x16xf32>, tensor<8x16xf32>) -> tensor<?x?x8xf32> loc(#ffn)
  %f = tfm.bias_add %f0, %b2 : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32> loc(#ffn)
  %r = tfm.add %x, %f : tensor<?x?x8xf32> loc(#layer)
  %n = tfm.layer_norm %r, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32> loc(#layer)
  return %n : tensor<?x?x8xf32>
}
#ffn = loc("l.ffn"("spec.yaml":5:3))
#layer = loc("l"("spec.yaml":6:3))

// -----
// Pre-norm: the residual sum is read twice (next LayerNorm, next residual), so the add folds into
// the GEMM as a post-op; GELU is kept as the activation.
// CHECK-LABEL: func.func @pre_norm_residual
// CHECK: %[[H:.*]] = tfm.linear %arg1, %{{.*}}, %{{.*}} {activation = "gelu"}
// CHECK: %[[Y:.*]] = tfm.linear %[[H]], %{{.*}}, %{{.*}}, %arg0 : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-NOT: tfm.add
// CHECK: return %[[Y]], %[[Y]]
// REPORT: remark: fuse-epilogues: m.ffn: bias + gelu folded into the GEMM
// REPORT: remark: fuse-epilogues: m.ffn: residual add folded into the GEMM as a post-op (pre-norm)
func.func @pre_norm_residual(%x: tensor<?x8xf32>, %normed: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %w = tfm.param "m.ffn.fc1.weight" : tensor<8x8xf32> loc(#m)
  %b = tfm.param "m.ffn.fc1.bias" : tensor<8xf32> loc(#m)
  %w2 = tfm.param "m.ffn.fc2.weight" : tensor<8x8xf32> loc(#m)
  %b2 = tfm.param "m.ffn.fc2.bias" : tensor<8xf32> loc(#m)
  %h0 = tfm.matmul %normed, %w {transpose_b = true} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> loc(#m)
  %h1 = tfm.bias_add %h0, %b : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc(#m)
  %h = tfm.gelu %h1 : tensor<?x8xf32> loc(#m)
  %f0 = tfm.matmul %h, %w2 {transpose_b = true} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> loc(#m)
  %f = tfm.bias_add %f0, %b2 : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> loc(#m)
  %y = tfm.add %x, %f : tensor<?x8xf32> loc(#m)
  return %y, %y : tensor<?x8xf32>, tensor<?x8xf32>
}
#m = loc("m.ffn"("spec.yaml":5:3))

// -----
// Negative: no bias (the tied output projection) keeps the plain matmul; an add of two non-GEMM
// values with several users stays an add.
// CHECK-LABEL: func.func @nothing_to_fuse
// CHECK: tfm.matmul
// CHECK: tfm.add
// REPORT: remark: fuse-epilogues: out: matmul kept: no bias add follows
// REPORT: remark: fuse-epilogues: out: add kept: neither operand is a GEMM result used only here
func.func @nothing_to_fuse(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> (tensor<?x11xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %e = tfm.param "shared_embedding.weight" : tensor<11x8xf32> loc(#out)
  %l = tfm.matmul %x, %e {transpose_b = true} : (tensor<?x8xf32>, tensor<11x8xf32>) -> tensor<?x11xf32> loc(#out)
  %s = tfm.add %x, %y : tensor<?x8xf32> loc(#out)
  return %l, %s, %s : tensor<?x11xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}
#out = loc("out"("spec.yaml":9:3))

// -----
// decode_step's end: the tied output projection's only user is log_softmax, which becomes the
// matmul's epilogue. A matmul whose result is also returned raw keeps its log_softmax.
// CHECK-LABEL: func.func @log_softmax_epilogue
// CHECK: %[[P:.*]] = tfm.matmul %arg0, %{{.*}} {log_softmax = true, transpose_b = true} : (tensor<?x1x8xf32>, tensor<11x8xf32>) -> tensor<?x1x11xf32>
// CHECK-NOT: tfm.log_softmax
// CHECK: return %[[P]]
// CHECK-LABEL: func.func @log_softmax_kept
// CHECK: %[[L:.*]] = tfm.matmul %arg0, %{{.*}} {transpose_b = true}
// CHECK: %[[N:.*]] = tfm.log_softmax %[[L]]
// CHECK: return %[[N]], %[[L]]
// REPORT: remark: fuse-epilogues: proj: log_softmax folded into the GEMM (rows normalised in place after the product)
// REPORT: remark: fuse-epilogues: proj: matmul kept: no bias add follows
func.func @log_softmax_epilogue(%x: tensor<?x1x8xf32>) -> tensor<?x1x11xf32> {
  %e = tfm.param "shared_embedding.weight" : tensor<11x8xf32> loc(#proj)
  %l = tfm.matmul %x, %e {transpose_b = true} : (tensor<?x1x8xf32>, tensor<11x8xf32>) -> tensor<?x1x11xf32> loc(#proj)
  %p = tfm.log_softmax %l : tensor<?x1x11xf32> loc(#proj)
  return %p : tensor<?x1x11xf32>
}
func.func @log_softmax_kept(%x: tensor<?x1x8xf32>) -> (tensor<?x1x11xf32>, tensor<?x1x11xf32>) {
  %e = tfm.param "shared_embedding.weight" : tensor<11x8xf32> loc(#proj)
  %l = tfm.matmul %x, %e {transpose_b = true} : (tensor<?x1x8xf32>, tensor<11x8xf32>) -> tensor<?x1x11xf32> loc(#proj)
  %p = tfm.log_softmax %l : tensor<?x1x11xf32> loc(#proj)
  return %p, %l : tensor<?x1x11xf32>, tensor<?x1x11xf32>
}
#proj = loc("proj"("spec.yaml":12:3))

// -----
// A matmul that already ends in log_softmax is not a linear's product: a bias add after it stays.
// CHECK-LABEL: func.func @normalised_matmul_kept
// CHECK: tfm.matmul %arg0, %{{.*}} {log_softmax = true, transpose_b = true}
// CHECK: tfm.bias_add
// REPORT: remark: fuse-epilogues: norm: matmul kept: it ends in log_softmax
func.func @normalised_matmul_kept(%x: tensor<?x8xf32>) -> tensor<?x11xf32> {
  %e = tfm.param "shared_embedding.weight" : tensor<11x8xf32> loc(#norm)
  %b = tfm.param "b" : tensor<11xf32> loc(#norm)
  %l = tfm.matmul %x, %e {log_softmax = true, transpose_b = true} : (tensor<?x8xf32>, tensor<11x8xf32>) -> tensor<?x11xf32> loc(#norm)
  %y = tfm.bias_add %l, %b : (tensor<?x11xf32>, tensor<11xf32>) -> tensor<?x11xf32> loc(#norm)
  return %y : tensor<?x11xf32>
}
#norm = loc("norm"("spec.yaml":14:3))
