// The CPU passes act on the kernels the graph pipeline makes: a softmax's rows are
// prefetched after the max pass and its exp-and-sum loop keeps one accumulator; a heavy
// elementwise loop (sigmoid) is interleaved four ways. Behaviour of our passes, checked on
// our own output rather than on what LLVM's vectoriser later makes of it.
// RUN: xdsl-opt %s -p graph-fuse,convert-graph-to-loop,convert-loop-to-upstream,scf-prefetch-rows --split-input-file | filecheck %s --check-prefix=PREFETCH
// RUN: xdsl-opt %s -p 'graph-fuse,convert-graph-to-loop,convert-loop-to-upstream{parallel=true},scf-prefetch-rows' --split-input-file | filecheck %s --check-prefix=PREFETCH
// RUN: xdsl-opt %s -p graph-fuse,convert-graph-to-loop,convert-loop-to-upstream,math-approximate,scf-interleave-loops --split-input-file | filecheck %s --check-prefix=INTERLEAVE

// Row i + 1 (clamped to the last row, 512) is fetched, one line of 16 floats at a time,
// between the max pass and the exp pass.
// PREFETCH-LABEL: func.func @fused_reduce_max_sub_exp_reduce_sum_div(
// PREFETCH:       arith.maximumf
// PREFETCH:       %[[LAST:.*]] = arith.constant 512 : index
// PREFETCH:       %[[ROW:.*]] = arith.minui %{{.*}}, %[[LAST]] : index
// PREFETCH:       %[[LINE:.*]] = arith.constant 16 : index
// PREFETCH-NEXT:  scf.for %[[COL:.*]] = %{{.*}} to %{{.*}} step %[[LINE]] {
// PREFETCH-NEXT:    "memref.prefetch"(%{{.*}}, %[[ROW]], %[[COL]])
// PREFETCH-NOT:   memref.prefetch
// PREFETCH:       math.exp
// PREFETCH-NOT:   memref.prefetch
// The exp-and-sum loop carries a sum: interleaving it would only add accumulators.
// INTERLEAVE-LABEL: func.func @fused_reduce_max_sub_exp_reduce_sum_div(
// INTERLEAVE:       arith.maximumf
// INTERLEAVE:       arith.addf
// INTERLEAVE:       } {loop_annotation = #llvm.loop_annotation<interleave = #llvm.loop_interleave<count = 1 : i32>>}
func.func @softmax_rows(%x: tensor<513x1024xf32>) -> tensor<513x1024xf32> {
  %y = graph.softmax %x axis = -1 : tensor<513x1024xf32>
  func.return %y : tensor<513x1024xf32>
}

// -----

// A single pass over each row: nothing to prefetch. Sigmoid's body is heavy: its loop is
// interleaved four ways.
// PREFETCH-LABEL: func.func @fused_sigmoid(
// PREFETCH-NOT:   memref.prefetch
// INTERLEAVE-LABEL: func.func @fused_sigmoid(
// INTERLEAVE:       } {loop_annotation = #llvm.loop_annotation<interleave = #llvm.loop_interleave<count = 4 : i32>>}
func.func @sigmoid_rows(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %y = graph.sigmoid %x : tensor<64x1024xf32>
  func.return %y : tensor<64x1024xf32>
}
