// The passes renamed to the one naming rule still run under their old names
// (graphfuse.universe.RENAMED_PASSES) and do what the new names do.
// RUN: xdsl-opt %s -p 'graph-fuse,graph-fusion-report,convert-graph-to-loop,convert-loop-to-upstream,graphfuse-prefetch-rows,graphfuse-invariant-reciprocals,graphfuse-approximate-math,graphfuse-interleave-loops,graphfuse-predicate-short-loops' > %t.old
// RUN: xdsl-opt %s -p 'graph-fuse,graph-report-fusion,convert-graph-to-loop,convert-loop-to-upstream,scf-prefetch-rows,scf-hoist-reciprocals,math-approximate,scf-interleave-loops,scf-predicate-short-loops' > %t.new
// RUN: diff %t.old %t.new
// RUN: filecheck %s < %t.old

// The report (graph-fusion-report), the row prefetch (graphfuse-prefetch-rows) and the
// approximated exp (graphfuse-approximate-math: no math.exp left) of a softmax's kernel.
// CHECK:       // kernel fused_reduce_max_sub_exp_reduce_sum_div
// CHECK-LABEL: func.func @fused_reduce_max_sub_exp_reduce_sum_div(
// CHECK:       "memref.prefetch"
// CHECK-NOT:   math.exp
// CHECK-LABEL: func.func @softmax_rows(
func.func @softmax_rows(%x: tensor<513x1024xf32>) -> tensor<513x1024xf32> {
  %y = graph.softmax %x axis = -1 : tensor<513x1024xf32>
  func.return %y : tensor<513x1024xf32>
}
