// RUN: xdsl-opt %s -p graph-fuse --split-input-file | filecheck %s
// RUN: xdsl-opt %s -p graph-fuse,graph-fuse --split-input-file | filecheck %s

// The default pipeline opens softmax; TVM's rules give max | sub+exp | sum | div, and
// priority fusion stitches the reductions into one kernel.
// CHECK-LABEL: func.func @softmax_opened_then_fused
// CHECK-NOT:  graph.softmax
// CHECK:      graph.fused "fused_reduce_max_sub_exp_reduce_sum_div"
// CHECK-NOT:  graph.fused
// CHECK:      func.return
func.func @softmax_opened_then_fused(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %y = graph.softmax %x axis = 1 : tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}

// -----

// A pattern pre-forms conv2d+add+relu; the partitioner keeps it whole and grows it by the
// following multiply (anchor-epilogue rule). The pattern mark is gone afterwards.
// CHECK-LABEL: func.func @preformed_kernel_grows
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_conv2d_add_relu_mul"(%x, %w, %b) kind = out_elemwise_fusable :
// CHECK-NOT:  pattern =
// CHECK:      func.return %[[K]]
func.func @preformed_kernel_grows(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %b: tensor<1x8x1x1xf32>) -> tensor<1x8x6x6xf32> {
  %s = graph.constant dense<3.0> : tensor<f32>
  %c = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  %a = graph.add %c, %b : (tensor<1x8x6x6xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x6x6xf32>
  %r = graph.relu %a : tensor<1x8x6x6xf32>
  %m = graph.mul %r, %s : (tensor<1x8x6x6xf32>, tensor<f32>) -> tensor<1x8x6x6xf32>
  func.return %m : tensor<1x8x6x6xf32>
}

// -----

// A pre-formed kernel whose result has two users: TVM's rules leave it sealed, priority
// fusion merges it with both users into one kernel of two results.
// CHECK-LABEL: func.func @preformed_kernel_alone
// CHECK-NEXT: %[[E:.*]], %[[N:.*]] = graph.fused "fused_matmul_add_relu_exp_neg"(%x, %w, %b) kind = out_elemwise_fusable :
// CHECK-NOT:  graph.fused
// CHECK:      func.return %[[E]], %[[N]]
func.func @preformed_kernel_alone(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %m = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %h = graph.add %m, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %r = graph.relu %h : tensor<8x32xf32>
  %e = graph.exp %r : tensor<8x32xf32>
  %n = graph.neg %r : tensor<8x32xf32>
  func.return %e, %n : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Simplification runs before partitioning: x * 1 disappears, then exp and tanh fuse.
// CHECK-LABEL: func.func @simplified_before_partition
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_exp_tanh"(%x) kind = elemwise
// CHECK-NOT:  graph.mul
// CHECK:      func.return %[[K]]
func.func @simplified_before_partition(%x: tensor<8xf32>) -> tensor<8xf32> {
  %one = graph.constant dense<1.0> : tensor<f32>
  %e = graph.exp %x : tensor<8xf32>
  %m = graph.mul %e, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %t = graph.tanh %m : tensor<8xf32>
  func.return %t : tensor<8xf32>
}
