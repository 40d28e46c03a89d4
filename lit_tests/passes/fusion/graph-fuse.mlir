// RUN: xdsl-opt %s -p 'graph-fuse{decompose=false simplify=false patterns=false refine=false}' --split-input-file | filecheck %s
// RUN: xdsl-opt %s -p 'graph-fuse{decompose=false simplify=false patterns=false refine=false},graph-fuse{decompose=false simplify=false patterns=false refine=false}' --split-input-file | filecheck %s
// The second RUN proves the pass idempotent: fusing again changes nothing.

// CHECK-LABEL: func.func @conv2d_bias_relu
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_conv2d_add_relu"(%x, %w, %b) kind = out_elemwise_fusable
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: tensor<1x4x8x8xf32>, %[[W:.*]]: tensor<8x4x3x3xf32>, %[[B:.*]]: tensor<1x8x1x1xf32>):
// CHECK-NEXT: %[[C:.*]] = graph.conv2d %[[X]], %[[W]]
// CHECK-NEXT: %[[A:.*]] = graph.add %[[C]], %[[B]]
// CHECK-NEXT: %[[R:.*]] = graph.relu %[[A]]
// CHECK-NEXT: graph.yield %[[R]] : tensor<1x8x6x6xf32>
// CHECK-NEXT: }
// CHECK-NEXT: func.return %[[K]]
func.func @conv2d_bias_relu(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %b: tensor<1x8x1x1xf32>) -> tensor<1x8x6x6xf32> {
  %c = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  %a = graph.add %c, %b : (tensor<1x8x6x6xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x6x6xf32>
  %r = graph.relu %a : tensor<1x8x6x6xf32>
  func.return %r : tensor<1x8x6x6xf32>
}

// -----

// CHECK-LABEL: func.func @conv2d_conv2d_stay_apart
// CHECK-NEXT: %[[C:.*]] = graph.fused "fused_conv2d"(%x, %w)
// CHECK: %[[D:.*]] = graph.fused "fused_conv2d"(%[[C]], %w)
// CHECK-NOT: graph.fused
// CHECK: func.return %[[D]]
func.func @conv2d_conv2d_stay_apart(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x1x1xf32>) -> tensor<1x4x8x8xf32> {
  %c = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x8x8xf32>
  %d = graph.conv2d %c, %w : (tensor<1x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x8x8xf32>
  func.return %d : tensor<1x4x8x8xf32>
}

// -----

// CHECK-LABEL: func.func @elementwise_diamond
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_exp_tanh_sigmoid_mul"(%x) kind = elemwise
// CHECK-NOT: graph.fused
// CHECK: func.return %[[K]]
func.func @elementwise_diamond(%x: tensor<16xf32>) -> tensor<16xf32> {
  %e = graph.exp %x : tensor<16xf32>
  %t = graph.tanh %e : tensor<16xf32>
  %s = graph.sigmoid %e : tensor<16xf32>
  %m = graph.mul %t, %s : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  func.return %m : tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func @multi_use_producer_stays_apart
// CHECK-NEXT: %[[E:.*]] = graph.fused "fused_exp"(%x)
// CHECK: %[[T:.*]] = graph.fused "fused_tanh"(%[[E]])
// CHECK: %[[S:.*]] = graph.fused "fused_sigmoid"(%[[E]])
// CHECK: func.return %[[T]], %[[S]]
func.func @multi_use_producer_stays_apart(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = graph.exp %x : tensor<16xf32>
  %t = graph.tanh %e : tensor<16xf32>
  %s = graph.sigmoid %e : tensor<16xf32>
  func.return %t, %s : tensor<16xf32>, tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func @prologue_into_reduction
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_exp_reduce_sum"(%x) kind = reduction
// CHECK-NOT: graph.fused
// CHECK: func.return %[[K]]
func.func @prologue_into_reduction(%x: tensor<4x16xf32>) -> tensor<4xf32> {
  %e = graph.exp %x : tensor<4x16xf32>
  %s = graph.reduce_sum %e axes = [1] : tensor<4x16xf32> -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @reduction_epilogue_stays_apart
// CHECK-NEXT: %[[S:.*]] = graph.fused "fused_reduce_sum"(%x) kind = reduction
// CHECK: %[[R:.*]] = graph.fused "fused_sqrt"(%[[S]]) kind = elemwise
// CHECK: func.return %[[R]]
func.func @reduction_epilogue_stays_apart(%x: tensor<4x16xf32>) -> tensor<4xf32> {
  %s = graph.reduce_sum %x axes = [1] : tensor<4x16xf32> -> tensor<4xf32>
  %r = graph.sqrt %s : tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @opaque_consumer
// CHECK-NEXT: %[[E:.*]] = graph.fused "fused_exp"(%x) kind = elemwise
// CHECK: %[[S:.*]] = graph.fused "fused_sort"(%[[E]]) kind = opaque
// CHECK: func.return %[[S]]
func.func @opaque_consumer(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %e = graph.exp %x : tensor<4x16xf32>
  %s = graph.sort %e axis = 1 : tensor<4x16xf32>
  func.return %s : tensor<4x16xf32>
}

// -----

// CHECK-LABEL: func.func @opaque_between_elementwise
// CHECK-NEXT: %[[E:.*]] = graph.fused "fused_exp"(%x)
// CHECK: %[[S:.*]] = graph.fused "fused_sort"(%[[E]]) kind = opaque
// CHECK: %[[N:.*]] = graph.fused "fused_neg"(%[[S]])
// CHECK: func.return %[[N]]
func.func @opaque_between_elementwise(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %e = graph.exp %x : tensor<4x16xf32>
  %s = graph.sort %e axis = 1 : tensor<4x16xf32>
  %n = graph.neg %s : tensor<4x16xf32>
  func.return %n : tensor<4x16xf32>
}

// -----

// CHECK-LABEL: func.func @injective_chain
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_transpose_reshape_add"(%x, %y) kind = injective
// CHECK-NOT: graph.fused
// CHECK: func.return %[[K]]
func.func @injective_chain(%x: tensor<4x6xf32>, %y: tensor<3x8xf32>) -> tensor<3x8xf32> {
  %t = graph.transpose %x perm = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %r = graph.reshape %t : tensor<6x4xf32> -> tensor<3x8xf32>
  %a = graph.add %r, %y : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  func.return %a : tensor<3x8xf32>
}

// -----

// CHECK-LABEL: func.func @injective_into_reduction_stays_apart
// CHECK-NEXT: %[[T:.*]] = graph.fused "fused_transpose"(%x) kind = injective
// CHECK: %[[S:.*]] = graph.fused "fused_reduce_sum"(%[[T]]) kind = reduction
// CHECK: func.return %[[S]]
func.func @injective_into_reduction_stays_apart(%x: tensor<4x6xf32>) -> tensor<6xf32> {
  %t = graph.transpose %x perm = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %s = graph.reduce_sum %t axes = [1] : tensor<6x4xf32> -> tensor<6xf32>
  func.return %s : tensor<6xf32>
}

// -----

// CHECK-LABEL: func.func @matmul_bias_gelu
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_matmul_add_mul_erf_add_mul_mul"(%x, %w, %b) kind = out_elemwise_fusable
// CHECK-NEXT: ^{{.*}}(%{{.*}}: tensor<8x16xf32>, %{{.*}}: tensor<16x32xf32>, %{{.*}}: tensor<32xf32>):
// CHECK-COUNT-3: graph.constant
// CHECK-NOT: graph.fused
// CHECK: func.return %[[K]]
func.func @matmul_bias_gelu(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %half = graph.constant dense<5.000000e-01> : tensor<f32>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %rsqrt2 = graph.constant dense<0.707106769> : tensor<f32>
  %mm = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %h = graph.add %mm, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %s = graph.mul %h, %rsqrt2 : (tensor<8x32xf32>, tensor<f32>) -> tensor<8x32xf32>
  %e = graph.erf %s : tensor<8x32xf32>
  %p = graph.add %e, %one : (tensor<8x32xf32>, tensor<f32>) -> tensor<8x32xf32>
  %q = graph.mul %p, %half : (tensor<8x32xf32>, tensor<f32>) -> tensor<8x32xf32>
  %g = graph.mul %h, %q : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  func.return %g : tensor<8x32xf32>
}

// -----

// CHECK-LABEL: func.func @compound_gelu_stays_apart
// CHECK-NEXT: %[[H:.*]] = graph.fused "fused_matmul_add"(%x, %w, %b) kind = out_elemwise_fusable
// CHECK: %[[G:.*]] = graph.fused "fused_gelu"(%[[H]]) kind = opaque
// CHECK: func.return %[[G]]
func.func @compound_gelu_stays_apart(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %mm = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %h = graph.add %mm, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %g = graph.gelu %h : tensor<8x32xf32>
  func.return %g : tensor<8x32xf32>
}

// -----

// CHECK-LABEL: func.func @matmuls_sharing_input
// CHECK-NEXT: %[[A:.*]] = graph.fused "fused_matmul"(%x, %w1)
// CHECK: %[[B:.*]] = graph.fused "fused_matmul"(%x, %w2)
// CHECK: func.return %[[A]], %[[B]]
func.func @matmuls_sharing_input(%x: tensor<8x16xf32>, %w1: tensor<16x4xf32>, %w2: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %a = graph.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %b = graph.matmul %x, %w2 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  func.return %a, %b : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// CHECK-LABEL: func.func @anchor_with_broadcast_edge_stays_apart
// CHECK-NEXT: %[[A:.*]] = graph.fused "fused_matmul"(%x, %w)
// CHECK: %[[B:.*]] = graph.fused "fused_add"(%[[A]], %y)
// CHECK: func.return %[[B]]
func.func @anchor_with_broadcast_edge_stays_apart(%x: tensor<8x16xf32>, %w: tensor<16x1xf32>, %y: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %a = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x1xf32>) -> tensor<8x1xf32>
  %b = graph.add %a, %y : (tensor<8x1xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  func.return %b : tensor<8x4xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast_into_consumer
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_exp_broadcast_to_mul"(%x, %y) kind = broadcast
// CHECK-NOT: graph.fused
// CHECK: func.return %[[K]]
func.func @broadcast_into_consumer(%x: tensor<16xf32>, %y: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %e = graph.exp %x : tensor<16xf32>
  %b = graph.broadcast_to %e : tensor<16xf32> -> tensor<4x16xf32>
  %m = graph.mul %b, %y : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return %m : tensor<4x16xf32>
}

// -----

// CHECK-LABEL: func.func @max_depth_cut
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_exp_neg_tanh_abs_sigmoid"(%x)
// CHECK-NOT: graph.fused
// CHECK: func.return %[[K]]
func.func @max_depth_cut(%x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = graph.exp %x : tensor<16xf32>
  %1 = graph.neg %0 : tensor<16xf32>
  %2 = graph.tanh %1 : tensor<16xf32>
  %3 = graph.abs %2 : tensor<16xf32>
  %4 = graph.sigmoid %3 : tensor<16xf32>
  func.return %4 : tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func @several_results
// CHECK-NEXT: %[[E:.*]] = graph.fused "fused_exp"(%x) kind = elemwise
// CHECK: %[[S:.*]] = graph.fused "fused_neg_reduce_max"(%[[E]]) kind = reduction
// CHECK: func.return %[[E]], %[[S]] : tensor<4x16xf32>, tensor<4xf32>
func.func @several_results(%x: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4xf32>) {
  %e = graph.exp %x : tensor<4x16xf32>
  %n = graph.neg %e : tensor<4x16xf32>
  %s = graph.reduce_max %n axes = [1] : tensor<4x16xf32> -> tensor<4xf32>
  func.return %e, %s : tensor<4x16xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @non_graph_op_is_opaque
// CHECK-NEXT: %[[E:.*]] = graph.fused "fused_exp"(%x)
// CHECK: %[[A:.*]] = arith.addf %[[E]], %[[E]] : tensor<16xf32>
// CHECK-NEXT: %[[N:.*]] = graph.fused "fused_neg"(%[[A]])
// CHECK: func.return %[[N]]
func.func @non_graph_op_is_opaque(%x: tensor<16xf32>) -> tensor<16xf32> {
  %e = graph.exp %x : tensor<16xf32>
  %a = arith.addf %e, %e : tensor<16xf32>
  %n = graph.neg %a : tensor<16xf32>
  func.return %n : tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func @pooling_relu
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_max_pool2d_relu"(%x) kind = out_elemwise_fusable
// CHECK-NOT: graph.fused
// CHECK: func.return %[[K]]
func.func @pooling_relu(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32> {
  %p = graph.max_pool2d %x kernel = [2, 2] strides = [2, 2] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  %r = graph.relu %p : tensor<1x4x4x4xf32>
  func.return %r : tensor<1x4x4x4xf32>
}

// -----

// CHECK-LABEL: func.func @concat_of_elementwise
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_exp_neg_concat"(%x, %y) kind = injective
// CHECK-NOT: graph.fused
// CHECK: func.return %[[K]]
func.func @concat_of_elementwise(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %a = graph.exp %x : tensor<4x8xf32>
  %b = graph.neg %y : tensor<4x8xf32>
  %c = graph.concat %a, %b axis = 1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  func.return %c : tensor<4x16xf32>
}

// -----

// An embedding lookup and its elementwise epilogue: one injective kernel.
// CHECK-LABEL: func.func @gather_add_relu
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_gather_add_relu"(%t, %ids, %b) kind = injective
// CHECK-NOT: graph.fused
// CHECK: func.return %[[K]]
func.func @gather_add_relu(%t: tensor<10x4xf32>, %ids: tensor<2x5xi64>, %b: tensor<4xf32>) -> tensor<2x5x4xf32> {
  %g = graph.gather %t, %ids axis = 0 : (tensor<10x4xf32>, tensor<2x5xi64>) -> tensor<2x5x4xf32>
  %a = graph.add %g, %b : (tensor<2x5x4xf32>, tensor<4xf32>) -> tensor<2x5x4xf32>
  %r = graph.relu %a : tensor<2x5x4xf32>
  func.return %r : tensor<2x5x4xf32>
}

// -----

// Elementwise producers of both operands (the data and the indices) fuse into the gather.
// CHECK-LABEL: func.func @gather_of_elementwise
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_exp_cast_gather"(%t, %f) kind = injective
// CHECK-NOT: graph.fused
// CHECK: func.return %[[K]]
func.func @gather_of_elementwise(%t: tensor<10x4xf32>, %f: tensor<6xf32>) -> tensor<6x4xf32> {
  %e = graph.exp %t : tensor<10x4xf32>
  %c = graph.cast %f : tensor<6xf32> -> tensor<6xi64>
  %g = graph.gather %e, %c axis = 0 : (tensor<10x4xf32>, tensor<6xi64>) -> tensor<6x4xf32>
  func.return %g : tensor<6x4xf32>
}

// -----

// CHECK-LABEL: func.func @gather_into_reduction_stays_apart
// CHECK-NEXT: %[[G:.*]] = graph.fused "fused_gather"(%t, %ids) kind = injective
// CHECK: %[[S:.*]] = graph.fused "fused_reduce_sum"(%[[G]]) kind = reduction
// CHECK: func.return %[[S]]
func.func @gather_into_reduction_stays_apart(%t: tensor<10x4xf32>, %ids: tensor<6xi32>) -> tensor<6xf32> {
  %g = graph.gather %t, %ids axis = 0 : (tensor<10x4xf32>, tensor<6xi32>) -> tensor<6x4xf32>
  %s = graph.reduce_sum %g axes = [1] : tensor<6x4xf32> -> tensor<6xf32>
  func.return %s : tensor<6xf32>
}

// -----

// CHECK-LABEL: func.func @already_fused_kernel_untouched
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_exp_neg"(%x) kind = elemwise
// CHECK-NEXT: ^{{.*}}(%[[A:.*]]: tensor<16xf32>):
// CHECK-NEXT: %[[E:.*]] = graph.exp %[[A]]
// CHECK-NEXT: %[[N:.*]] = graph.neg %[[E]]
// CHECK-NEXT: graph.yield %[[N]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[T:.*]] = graph.fused "fused_tanh"(%[[K]])
func.func @already_fused_kernel_untouched(%x: tensor<16xf32>) -> tensor<16xf32> {
  %k = graph.fused "fused_exp_neg" (%x) kind = elemwise : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%a: tensor<16xf32>):
    %e = graph.exp %a : tensor<16xf32>
    %n = graph.neg %e : tensor<16xf32>
    graph.yield %n : tensor<16xf32>
  }
  %t = graph.tanh %k : tensor<16xf32>
  func.return %t : tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func @big_constant_is_an_input
// CHECK-NEXT: %[[W:.*]] = graph.constant dense<2.000000e+00> : tensor<4x32xf32>
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_mul_relu"(%x, %[[W]]) kind = elemwise
// CHECK-NOT: graph.constant
// CHECK: func.return %[[K]]
func.func @big_constant_is_an_input(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %w = graph.constant dense<2.000000e+00> : tensor<4x32xf32>
  %m = graph.mul %x, %w : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %r = graph.relu %m : tensor<4x32xf32>
  func.return %r : tensor<4x32xf32>
}

// -----

// CHECK-LABEL: func.func @kernel_order_follows_dataflow
// CHECK-NEXT: %[[A:.*]] = graph.fused "fused_exp"(%x)
// CHECK: %[[S:.*]] = graph.fused "fused_sort"(%[[A]])
// CHECK: %[[C:.*]] = graph.fused "fused_neg_add"(%x, %[[S]])
// CHECK: func.return %[[C]]
func.func @kernel_order_follows_dataflow(%x: tensor<16xf32>) -> tensor<16xf32> {
  %a = graph.exp %x : tensor<16xf32>
  %s = graph.sort %a axis = 0 : tensor<16xf32>
  %b = graph.neg %x : tensor<16xf32>
  %c = graph.add %b, %s : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  func.return %c : tensor<16xf32>
}
