// RUN: xdsl-opt %s -p graph-fuse --split-input-file | filecheck %s
// RUN: xdsl-opt %s -p 'graph-fuse{max-depth=2}' --split-input-file | filecheck %s --check-prefix=DEPTH2
// RUN: xdsl-opt %s -p 'graph-fuse{stitch=false horizontal=false multi-output=false}' --split-input-file | filecheck %s --check-prefix=OFF
// RUN: xdsl-opt %s -p 'graph-fuse{refine=false}' --split-input-file | filecheck %s --check-prefix=TVM
// The cost-model refinement of graph-fuse, one behaviour per case; OFF and TVM show what
// the same graph gives with steps switched off.

// A broadcast with two consumers merges with both (multi-output). When max-depth=2
// forbids the 3-op kernel, it is recomputed in each consumer and no kernel writes it.
// CHECK-LABEL: func.func @recomputed_broadcast
// CHECK-NEXT:  %{{.*}}, %{{.*}} = graph.fused "fused_broadcast_to_exp_neg"(%v)
// CHECK-NOT:   graph.fused
// DEPTH2-LABEL: func.func @recomputed_broadcast
// DEPTH2-NOT:   graph.fused "fused_broadcast_to"(
// DEPTH2-DAG:   graph.fused "fused_broadcast_to_neg"(%v)
// DEPTH2-DAG:   graph.fused "fused_broadcast_to_exp"(%v)
// DEPTH2-NOT:   graph.fused "fused_broadcast_to"(
// TVM-LABEL: func.func @recomputed_broadcast
// TVM:       graph.fused "fused_broadcast_to"(%v)
func.func @recomputed_broadcast(%v: tensor<8xf32>) -> (tensor<64x8xf32>, tensor<64x8xf32>) {
  %p = graph.broadcast_to %v : tensor<8xf32> -> tensor<64x8xf32>
  %a = graph.exp %p : tensor<64x8xf32>
  %b = graph.neg %p : tensor<64x8xf32>
  func.return %a, %b : tensor<64x8xf32>, tensor<64x8xf32>
}

// -----

// Two reductions of one input over the same rows: one kernel, two results, x read once.
// CHECK-LABEL: func.func @mean_and_square_mean
// CHECK-NEXT:  %[[S:.*]], %[[T:.*]] = graph.fused "fused_reduce_sum_mul_reduce_sum"(%x)
// CHECK-NOT:   graph.fused
// CHECK:       func.return %[[S]], %[[T]]
// OFF-LABEL: func.func @mean_and_square_mean
// OFF:       graph.fused "fused_reduce_sum"(%x)
// OFF:       graph.fused "fused_mul_reduce_sum"(%x)
func.func @mean_and_square_mean(%x: tensor<16x32xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %s = graph.reduce_sum %x axes = [1] : tensor<16x32xf32> -> tensor<16xf32>
  %q = graph.mul %x, %x : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  %t = graph.reduce_sum %q axes = [1] : tensor<16x32xf32> -> tensor<16xf32>
  func.return %s, %t : tensor<16xf32>, tensor<16xf32>
}

// -----

// Independent small kernels of one shape (Q, K and V bias adds) launch as one.
// CHECK-LABEL: func.func @qkv_bias_adds
// CHECK-NEXT:  graph.fused "fused_add_add_add"(%q, %bq, %k, %bk, %v, %bv)
// CHECK-NOT:   graph.fused
// OFF-LABEL: func.func @qkv_bias_adds
// OFF-COUNT-3: graph.fused "fused_add"
func.func @qkv_bias_adds(%q: tensor<4x64xf32>, %k: tensor<4x64xf32>, %v: tensor<4x64xf32>, %bq: tensor<64xf32>, %bk: tensor<64xf32>, %bv: tensor<64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>) {
  %a = graph.add %q, %bq : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  %b = graph.add %k, %bk : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  %c = graph.add %v, %bv : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  func.return %a, %b, %c : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

// A reduction to one element broadcast into a 64x larger add stays apart: fused, each of
// the add's rows would recompute it.
// CHECK-LABEL: func.func @small_reduction_into_large_consumer
// CHECK:       %[[S:.*]] = graph.fused "fused_reduce_sum"(%x)
// CHECK:       graph.fused "fused_add"(%big, %[[S]])
func.func @small_reduction_into_large_consumer(%x: tensor<4x8xf32>, %big: tensor<64x4x8xf32>) -> tensor<64x4x8xf32> {
  %s = graph.reduce_sum %x axes = [0, 1] keepdims : tensor<4x8xf32> -> tensor<1x1xf32>
  %y = graph.add %big, %s : (tensor<64x4x8xf32>, tensor<1x1xf32>) -> tensor<64x4x8xf32>
  func.return %y : tensor<64x4x8xf32>
}

// -----

// RMS-norm (reduce -> elementwise over the same rows) is one kernel; the TVM rules give
// two, and with stitching off the reduction stays a kernel of its own.
// CHECK-LABEL: func.func @rms_norm
// CHECK-NEXT:  graph.fused "fused_mul_reduce_sum_mul_add_rsqrt_mul_mul"(%x, %g) kind = reduction
// CHECK-NOT:   graph.fused
// OFF-LABEL: func.func @rms_norm
// OFF:       graph.fused "fused_mul_reduce_sum"(%x)
// OFF:       graph.fused "fused_mul_add_rsqrt_mul_mul"
// TVM-LABEL: func.func @rms_norm
// TVM-COUNT-2: graph.fused
func.func @rms_norm(%x: tensor<16x64xf32>, %g: tensor<64xf32>) -> tensor<16x64xf32> {
  %sq = graph.mul %x, %x : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %m = graph.reduce_mean %sq axes = [1] keepdims : tensor<16x64xf32> -> tensor<16x1xf32>
  %eps = graph.constant dense<1.0e-06> : tensor<f32>
  %me = graph.add %m, %eps : (tensor<16x1xf32>, tensor<f32>) -> tensor<16x1xf32>
  %r = graph.rsqrt %me : tensor<16x1xf32>
  %n = graph.mul %x, %r : (tensor<16x64xf32>, tensor<16x1xf32>) -> tensor<16x64xf32>
  %y = graph.mul %n, %g : (tensor<16x64xf32>, tensor<64xf32>) -> tensor<16x64xf32>
  func.return %y : tensor<16x64xf32>
}

// -----

// Three projections of one input (attention's Q, K, V) stay three kernels: two matmuls
// in one kernel would each still re-read the input along their own reduction, so
// multi-output fusion of anchors saves nothing (as in XLA, whose GEMMs are library calls).
// CHECK-LABEL: func.func @qkv_projections
// CHECK: %[[Q:.*]] = graph.fused "fused_matmul_add"(%x, %wq, %bq)
// CHECK: %[[K:.*]] = graph.fused "fused_matmul_add"(%x, %wk, %bk)
// CHECK: func.return %[[Q]], %[[K]]
func.func @qkv_projections(%x: tensor<16x32xf32>, %wq: tensor<32x32xf32>, %bq: tensor<32xf32>, %wk: tensor<32x32xf32>, %bk: tensor<32xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32>) {
  %q0 = graph.matmul %x, %wq : (tensor<16x32xf32>, tensor<32x32xf32>) -> tensor<16x32xf32>
  %q1 = graph.add %q0, %bq : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %k0 = graph.matmul %x, %wk : (tensor<16x32xf32>, tensor<32x32xf32>) -> tensor<16x32xf32>
  %k1 = graph.add %k0, %bk : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  func.return %q1, %k1 : tensor<16x32xf32>, tensor<16x32xf32>
}

// -----

// SwiGLU: the gate and up projections read one input and meet in one multiply. They stay
// two kernels, each a matmul with its epilogue (the up kernel reads the gate's result):
// loop-tile-matmul tiles a kernel with one contraction, so a kernel holding both would
// compute them as untiled dot products.
// CHECK-LABEL: func.func @swiglu_two_matmuls
// CHECK:       %[[G:.*]] = graph.fused "fused_matmul_sigmoid_mul"(%x, %wg)
// CHECK:       graph.fused "fused_matmul_mul"(%x, %wu, %[[G]])
// CHECK-NOT:   graph.fused "fused_matmul_matmul
func.func @swiglu_two_matmuls(%x: tensor<64x256xf32>, %wg: tensor<256x512xf32>, %wu: tensor<256x512xf32>) -> tensor<64x512xf32> {
  %g = graph.matmul %x, %wg : (tensor<64x256xf32>, tensor<256x512xf32>) -> tensor<64x512xf32>
  %u = graph.matmul %x, %wu : (tensor<64x256xf32>, tensor<256x512xf32>) -> tensor<64x512xf32>
  %s = graph.sigmoid %g : tensor<64x512xf32>
  %a = graph.mul %g, %s : (tensor<64x512xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
  %h = graph.mul %a, %u : (tensor<64x512xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
  func.return %h : tensor<64x512xf32>
}

// -----

// A one-flop elementwise producer joins a pooling whose windows overlap little (3x3,
// stride 2: each input read about 2.25 times): ReLU is recomputed per window read rather
// than stored and loaded back.
// CHECK-LABEL: func.func @relu_into_max_pool
// CHECK-NEXT:  graph.fused "fused_relu_max_pool2d"(%x)
func.func @relu_into_max_pool(%x: tensor<1x8x32x32xf32>) -> tensor<1x8x16x16xf32> {
  %r = graph.relu %x : tensor<1x8x32x32xf32>
  %p = graph.max_pool2d %r kernel = [3, 3] strides = [2, 2] padding = [1, 1, 1, 1] : tensor<1x8x32x32xf32> -> tensor<1x8x16x16xf32>
  func.return %p : tensor<1x8x16x16xf32>
}

// -----

// Into a stride-1 3x3 window (9 reads of each input) it stays out.
// CHECK-LABEL: func.func @relu_before_overlapping_pool
// CHECK-NEXT:  %[[R:.*]] = graph.fused "fused_relu"(%x)
// CHECK:       graph.fused "fused_max_pool2d"(%[[R]])
func.func @relu_before_overlapping_pool(%x: tensor<1x8x32x32xf32>) -> tensor<1x8x32x32xf32> {
  %r = graph.relu %x : tensor<1x8x32x32xf32>
  %p = graph.max_pool2d %r kernel = [3, 3] strides = [1, 1] padding = [1, 1, 1, 1] : tensor<1x8x32x32xf32> -> tensor<1x8x32x32xf32>
  func.return %p : tensor<1x8x32x32xf32>
}
