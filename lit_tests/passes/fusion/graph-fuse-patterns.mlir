// RUN: xdsl-opt %s -p graph-fuse-patterns --split-input-file | filecheck %s

// CHECK-LABEL: func.func @conv2d_bias_relu
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_conv2d_add_relu"(%x, %w, %b) kind = out_elemwise_fusable pattern = "conv2d_bias_relu"
// CHECK:      func.return %[[K]]
func.func @conv2d_bias_relu(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %b: tensor<1x8x1x1xf32>) -> tensor<1x8x6x6xf32> {
  %c = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  %a = graph.add %c, %b : (tensor<1x8x6x6xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x6x6xf32>
  %r = graph.relu %a : tensor<1x8x6x6xf32>
  func.return %r : tensor<1x8x6x6xf32>
}

// -----

// The biased value is also returned: outlining the chain would hide it, so no match.
// CHECK-LABEL: func.func @conv2d_bias_relu_intermediate_used
// CHECK-NOT:  graph.fused
// CHECK:      func.return
func.func @conv2d_bias_relu_intermediate_used(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %b: tensor<1x8x1x1xf32>) -> (tensor<1x8x6x6xf32>, tensor<1x8x6x6xf32>) {
  %c = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  %a = graph.add %c, %b : (tensor<1x8x6x6xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x6x6xf32>
  %r = graph.relu %a : tensor<1x8x6x6xf32>
  func.return %r, %a : tensor<1x8x6x6xf32>, tensor<1x8x6x6xf32>
}

// -----

// CHECK-LABEL: func.func @conv2d_bn_relu
// CHECK-NEXT: %[[K:.*]] = graph.fused "fused_conv2d_batch_norm_relu"(%x, %w, %c) kind = out_elemwise_fusable pattern = "conv2d_bn_relu"
func.func @conv2d_bn_relu(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %c: tensor<8xf32>) -> tensor<1x8x6x6xf32> {
  %y = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  %n = graph.batch_norm %y, %c, %c, %c, %c : (tensor<1x8x6x6xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x6x6xf32>
  %r = graph.relu %n : tensor<1x8x6x6xf32>
  func.return %r : tensor<1x8x6x6xf32>
}

// -----

// The opened form of batch-norm (sub, mul, add) matches too.
// CHECK-LABEL: func.func @conv2d_opened_bn_relu
// CHECK:      graph.fused "fused_conv2d_sub_mul_add_relu"(%x, %w, %m, %k, %b) kind = out_elemwise_fusable pattern = "conv2d_bn_relu"
func.func @conv2d_opened_bn_relu(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %m: tensor<8x1x1xf32>, %k: tensor<8x1x1xf32>, %b: tensor<8x1x1xf32>) -> tensor<1x8x6x6xf32> {
  %y = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  %0 = graph.sub %y, %m : (tensor<1x8x6x6xf32>, tensor<8x1x1xf32>) -> tensor<1x8x6x6xf32>
  %1 = graph.mul %0, %k : (tensor<1x8x6x6xf32>, tensor<8x1x1xf32>) -> tensor<1x8x6x6xf32>
  %2 = graph.add %1, %b : (tensor<1x8x6x6xf32>, tensor<8x1x1xf32>) -> tensor<1x8x6x6xf32>
  %r = graph.relu %2 : tensor<1x8x6x6xf32>
  func.return %r : tensor<1x8x6x6xf32>
}

// -----

// conv2d + add + sigmoid is none of the conv patterns.
// CHECK-LABEL: func.func @conv2d_bias_sigmoid_no_pattern
// CHECK-NOT:  graph.fused
// CHECK:      func.return
func.func @conv2d_bias_sigmoid_no_pattern(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>, %b: tensor<1x8x1x1xf32>) -> tensor<1x8x6x6xf32> {
  %c = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  %a = graph.add %c, %b : (tensor<1x8x6x6xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x6x6xf32>
  %r = graph.sigmoid %a : tensor<1x8x6x6xf32>
  func.return %r : tensor<1x8x6x6xf32>
}

// -----

// CHECK-LABEL: func.func @matmul_bias_relu
// CHECK-NEXT: graph.fused "fused_matmul_add_relu"(%x, %w, %b) kind = out_elemwise_fusable pattern = "matmul_bias_activation"
func.func @matmul_bias_relu(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %m = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %h = graph.add %m, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %r = graph.relu %h : tensor<8x32xf32>
  func.return %r : tensor<8x32xf32>
}

// -----

// GELU opened into primitives: h feeds both the erf branch and the final multiply, all
// inside the chain, so the whole epilogue joins the matmul.
// CHECK-LABEL: func.func @matmul_bias_gelu_opened
// CHECK-NEXT: graph.fused "fused_matmul_add_mul_erf_add_mul_mul"(%x, %w, %b) kind = out_elemwise_fusable pattern = "matmul_bias_gelu"
// CHECK-COUNT-3: graph.constant
func.func @matmul_bias_gelu_opened(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
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

// A matmul without a bias add matches no pattern.
// CHECK-LABEL: func.func @matmul_relu_no_pattern
// CHECK-NOT:  graph.fused
func.func @matmul_relu_no_pattern(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %m = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %r = graph.relu %m : tensor<8x32xf32>
  func.return %r : tensor<8x32xf32>
}
