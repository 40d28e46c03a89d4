// RUN: xdsl-opt %s -p graph-split-grouped-conv --split-input-file | filecheck %s

// Two groups of 16 input channels and 24 filters: each group's channels and filters are
// sliced out, convolved as an ordinary convolution (the strides, padding and dilations
// kept), and the two results concatenated along channels.
// CHECK-LABEL: func.func @two_groups(
// CHECK-SAME:  %[[X:.*]]: tensor<2x32x20x20xf32>, %[[W:.*]]: tensor<48x16x3x3xf32>)
// CHECK-NEXT:  %[[X0:.*]] = graph.slice %[[X]] starts = [0, 0, 0, 0] strides = [1, 1, 1, 1] : tensor<2x32x20x20xf32> -> tensor<2x16x20x20xf32>
// CHECK-NEXT:  %[[W0:.*]] = graph.slice %[[W]] starts = [0, 0, 0, 0] strides = [1, 1, 1, 1] : tensor<48x16x3x3xf32> -> tensor<24x16x3x3xf32>
// CHECK-NEXT:  %[[Y0:.*]] = graph.conv2d %[[X0]], %[[W0]] strides = [2, 2] padding = [1, 0, 1, 2] dilations = [1, 2] : (tensor<2x16x20x20xf32>, tensor<24x16x3x3xf32>) -> tensor<2x24x10x9xf32>
// CHECK-NEXT:  %[[X1:.*]] = graph.slice %[[X]] starts = [0, 16, 0, 0] strides = [1, 1, 1, 1] : tensor<2x32x20x20xf32> -> tensor<2x16x20x20xf32>
// CHECK-NEXT:  %[[W1:.*]] = graph.slice %[[W]] starts = [24, 0, 0, 0] strides = [1, 1, 1, 1] : tensor<48x16x3x3xf32> -> tensor<24x16x3x3xf32>
// CHECK-NEXT:  %[[Y1:.*]] = graph.conv2d %[[X1]], %[[W1]] strides = [2, 2] padding = [1, 0, 1, 2] dilations = [1, 2] : (tensor<2x16x20x20xf32>, tensor<24x16x3x3xf32>) -> tensor<2x24x10x9xf32>
// CHECK-NEXT:  %[[Y:.*]] = graph.concat %[[Y0]], %[[Y1]] axis = 1 : (tensor<2x24x10x9xf32>, tensor<2x24x10x9xf32>) -> tensor<2x48x10x9xf32>
// CHECK-NEXT:  func.return %[[Y]]
func.func @two_groups(%x: tensor<2x32x20x20xf32>, %w: tensor<48x16x3x3xf32>) -> tensor<2x48x10x9xf32> {
  %0 = graph.conv2d %x, %w strides = [2, 2] padding = [1, 0, 1, 2] dilations = [1, 2] groups = 2 : (tensor<2x32x20x20xf32>, tensor<48x16x3x3xf32>) -> tensor<2x48x10x9xf32>
  func.return %0 : tensor<2x48x10x9xf32>
}

// -----

// Depthwise: one input channel per group, left whole (its direct form vectorises).
// CHECK-LABEL: func.func @depthwise(
// CHECK-NEXT:  graph.conv2d %{{.*}}, %{{.*}} padding = [1, 1, 1, 1] groups = 64
// CHECK-NOT:   graph.concat
func.func @depthwise(%x: tensor<1x64x20x20xf32>, %w: tensor<64x1x3x3xf32>) -> tensor<1x64x20x20xf32> {
  %0 = graph.conv2d %x, %w padding = [1, 1, 1, 1] groups = 64 : (tensor<1x64x20x20xf32>, tensor<64x1x3x3xf32>) -> tensor<1x64x20x20xf32>
  func.return %0 : tensor<1x64x20x20xf32>
}
