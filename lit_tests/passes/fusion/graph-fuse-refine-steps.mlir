// RUN: xdsl-opt %s -p 'graph-fuse{explain=true}' --split-input-file | filecheck %s
// RUN: xdsl-opt %s -p 'graph-fuse{max-inputs=2 explain=true}' --split-input-file | filecheck %s --check-prefix=LIMIT
// RUN: xdsl-opt %s -p 'graph-fuse{priority=false multi-output=false horizontal=false explain=true}' --split-input-file | filecheck %s --check-prefix=MERGER
// Refinement steps one at a time, with the explain lines that say why (graph-fuse-refine.mlir
// has the fusion shapes). Rollback has no case here: every earlier step commits only
// changes that save bytes, and TVM's groups are connected, so through the pass it finds
// nothing to split; tests/passes/fusion/test_fusion_refine.py exercises it on a hand-made plan.

// Limits: the TVM rules fuse the chain into one kernel of four inputs; with max-inputs=2
// it splits into its ops, and priority fusion refuses every merge over the limit.
// CHECK-NOT:   [limits]
// CHECK-LABEL: func.func @four_inputs
// CHECK-NEXT:  graph.fused "fused_add_add_add"(%x, %y, %z, %w)
// LIMIT:       [limits] {graph.add %a +2}: split into its ops, 4 inputs and 1 results (max-inputs=2, max-results=8)
// LIMIT:       [priority] graph.add %a + graph.add %b: not fused, the kernel would take 3 inputs, over max-inputs=2
// Horizontal fusion leaves them too: each reads the one before, so they are not independent.
// LIMIT-NOT:   [horizontal]
// LIMIT-LABEL: func.func @four_inputs
// LIMIT-NEXT:  %[[A:.*]] = graph.fused "fused_add"(%x, %y)
// LIMIT:       %[[B:.*]] = graph.fused "fused_add"(%[[A]], %z)
// LIMIT:       graph.fused "fused_add"(%[[B]], %w)
func.func @four_inputs(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>, %z: tensor<64x32xf32>, %w: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %a = graph.add %x, %y : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %b = graph.add %a, %z : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %c = graph.add %b, %w : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  func.return %c : tensor<64x32xf32>
}

// -----

// Fusion merger alone (priority, multi-output and horizontal off): the opened softmax's
// kernels merge into their consumers while bytes do not grow, ending as one kernel.
// MERGER:       [merger] graph.reduce_max %y_max + {graph.sub %y_shifted +1}: fused, saves
// MERGER:       [merger] {graph.reduce_max %y_max +2} + graph.reduce_sum %y_sum + graph.div %y: fused, saves
// MERGER-LABEL: func.func @softmax_by_merger
// MERGER-NEXT:  graph.fused "fused_reduce_max_sub_exp_reduce_sum_div"(%x) kind = reduction
// MERGER-NOT:   graph.fused
// MERGER:       func.return
func.func @softmax_by_merger(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %y = graph.softmax %x axis = -1 : tensor<64x32xf32>
  func.return %y : tensor<64x32xf32>
}
