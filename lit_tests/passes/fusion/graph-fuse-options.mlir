// RUN: xdsl-opt %s -p 'graph-fuse{max-depth=3 simplify=false}' | filecheck %s --check-prefix=DEPTH3
// RUN: xdsl-opt %s -p 'graph-fuse{max-depth=1 simplify=false}' | filecheck %s --check-prefix=DEPTH1
// RUN: xdsl-opt %s -p 'graph-fuse{max-depth=2 simplify=false}' | filecheck %s --check-prefix=DEPTH2
// RUN: xdsl-opt %s -p 'graph-fuse{explain=true simplify=false}' | filecheck %s --check-prefix=EXPLAIN

// A chain of five elementwise ops: max-depth=3 cuts it after three ops (TVM counts the
// ops the merged kernel would hold); max-depth=1 leaves every op alone.

// DEPTH3-LABEL: func.func @chain
// DEPTH3-NEXT: %[[A:.*]] = graph.fused "fused_exp_neg_tanh"(%x)
// DEPTH3: %[[B:.*]] = graph.fused "fused_abs_sigmoid"(%[[A]])
// DEPTH3: func.return %[[B]]

// DEPTH1-LABEL: func.func @chain
// DEPTH1-COUNT-5: graph.fused "fused_{{[a-z]+}}"(

// EXPLAIN: // graph-fuse: @chain: [phase 0] graph.exp #0 -> graph.neg #1: fused, by elemwise-into-consumer (phase 0, 1)
// EXPLAIN: // graph-fuse: @chain: [phase 0] graph.sigmoid #4 -> exit: not fused, no post-dominator
func.func @chain(%x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = graph.exp %x : tensor<16xf32>
  %1 = graph.neg %0 : tensor<16xf32>
  %2 = graph.tanh %1 : tensor<16xf32>
  %3 = graph.abs %2 : tensor<16xf32>
  %4 = graph.sigmoid %3 : tensor<16xf32>
  func.return %4 : tensor<16xf32>
}

// Explanations name the rule and what broke it.
// EXPLAIN: // graph-fuse: @reasons: [phase 0] graph.matmul %mm -> graph.add %b: not fused, anchor-epilogue: the edges to it are broadcast
// EXPLAIN: // graph-fuse: @reasons: [phase 0] graph.sort %s -> graph.neg %n: not fused, opaque ops never fuse
// EXPLAIN: // graph-fuse: @reasons: [phase 0] graph.exp %e -> exit: not fused, no post-dominator
// EXPLAIN: // graph-fuse: @reasons: [phase 1] graph.transpose %t -> graph.reduce_sum %r: not fused, injective-chain: post-dominator graph.reduce_sum %r is in a reduction group
func.func @reasons(%x: tensor<8x16xf32>, %w: tensor<16x1xf32>, %y: tensor<8x4xf32>, %z: tensor<4x6xf32>) -> (tensor<8x4xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<6xf32>) {
  %mm = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x1xf32>) -> tensor<8x1xf32>
  %b = graph.add %mm, %y : (tensor<8x1xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %s = graph.sort %x axis = 1 : tensor<8x16xf32>
  %n = graph.neg %s : tensor<8x16xf32>
  %e = graph.exp %x : tensor<8x16xf32>
  %t = graph.transpose %z perm = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %r = graph.reduce_sum %t axes = [1] : tensor<6x4xf32> -> tensor<6xf32>
  func.return %b, %n, %e, %r : tensor<8x4xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<6xf32>
}

// A kernel pre-formed by a fusion pattern (conv2d+add+relu) counts its three ops against
// max-depth: at 3 it does not grow by the mul; at 2 it is opened and its ops regrouped.

// DEPTH3-LABEL: func.func @preformed
// DEPTH3-NEXT: %[[K:.*]] = graph.fused "fused_conv2d_add_relu"(%x, %w, %b)
// DEPTH3: %[[T:.*]] = graph.fused "fused_mul_tanh"(%[[K]], %y)
// DEPTH3: func.return %[[T]]

// DEPTH2-LABEL: func.func @preformed
// DEPTH2-NEXT: %[[A:.*]] = graph.fused "fused_conv2d_add"(%x, %w, %b)
// DEPTH2: %[[S:.*]] = graph.fused "fused_relu_mul"(%[[A]], %y)
// DEPTH2: %[[T:.*]] = graph.fused "fused_tanh"(%[[S]])
// DEPTH2: func.return %[[T]]

// DEPTH1-LABEL: func.func @preformed
// DEPTH1-COUNT-5: graph.fused "fused_{{[a-z0-9]+}}"(
// DEPTH1-NOT: graph.fused
func.func @preformed(%x: tensor<1x2x4x4xf32>, %w: tensor<2x2x1x1xf32>, %b: tensor<1x2x1x1xf32>, %y: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %c = graph.conv2d %x, %w : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %a = graph.add %c, %b : (tensor<1x2x4x4xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %r = graph.relu %a : tensor<1x2x4x4xf32>
  %s = graph.mul %r, %y : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %t = graph.tanh %s : tensor<1x2x4x4xf32>
  func.return %t : tensor<1x2x4x4xf32>
}
