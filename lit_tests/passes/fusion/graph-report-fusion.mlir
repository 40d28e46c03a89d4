// RUN: xdsl-opt %s -p graph-report-fusion | filecheck %s --check-prefix=BEFORE
// RUN: xdsl-opt %s -p graph-fuse,graph-report-fusion | filecheck %s --check-prefix=AFTER

// 4x16 f32 tensors are 256 bytes. Unfused, each op is a kernel that reads and writes one.
// BEFORE: // kernel exp (elemwise): 1 op [exp], reads 256 B, writes 256 B
// BEFORE-NEXT: // kernel neg (elemwise): 1 op [neg], reads 256 B, writes 256 B
// BEFORE-NEXT: // kernel reduce_sum (reduction): 1 op [reduce_sum], reads 256 B, writes 16 B
// BEFORE-NEXT: // @main: 3 kernels, 3 ops; reads 768 B, writes 528 B; intermediates not stored: 0 B

// Fused, the exp and neg results (512 B) are never stored.
// AFTER: // kernel fused_exp_neg_reduce_sum (reduction): 3 ops [exp, neg, reduce_sum], reads 256 B, writes 16 B
// AFTER-NEXT: // @main: 1 kernel, 3 ops; reads 256 B, writes 16 B; intermediates not stored: 512 B
func.func @main(%x: tensor<4x16xf32>) -> tensor<4xf32> {
  %0 = graph.exp %x : tensor<4x16xf32>
  %1 = graph.neg %0 : tensor<4x16xf32>
  %2 = graph.reduce_sum %1 axes = [1] : tensor<4x16xf32> -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
