// REQUIRES: mlir-opt
// RUN: %mlir-opt --mlir-print-op-generic %s | xdsl-opt --allow-unregistered-dialect -p convert-tosa-to-graph,graph-fuse | filecheck %s

// TOSA in the pretty form torch-mlir and TFLite print, read by mlir-opt and handed on in
// the generic form: a convolution, its bias and ReLU6 become one kernel; the max pool
// another. The transposes between them compose away.
// CHECK-LABEL: func.func @main
// CHECK:         graph.fused "fused_transpose_conv2d_add_min_max"
// CHECK:         graph.fused "fused_max_pool2d"
// CHECK:         graph.fused "fused_transpose"
// CHECK-NOT:     graph.fused
// CHECK-NOT:     tosa.
func.func @main(%arg0: tensor<1x8x8x3xf32>) -> tensor<1x4x4x4xf32> {
  %w = "tosa.const"() <{values = dense<0.5> : tensor<4x3x3x3xf32>}> : () -> tensor<4x3x3x3xf32>
  %b = "tosa.const"() <{values = dense<0.1> : tensor<4xf32>}> : () -> tensor<4xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %0 = tosa.conv2d %arg0, %w, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x8x4xf32>
  %1 = tosa.clamp %0 {max_val = 6.0 : f32, min_val = 0.0 : f32} : (tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %2 = tosa.max_pool2d %1 {kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>} : (tensor<1x8x8x4xf32>) -> tensor<1x4x4x4xf32>
  return %2 : tensor<1x4x4x4xf32>
}
