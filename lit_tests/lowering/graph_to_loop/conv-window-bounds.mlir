// RUN: xdsl-opt %s -p 'convert-graph-to-loop{operand-copies=false}' --split-input-file | filecheck %s
// RUN: xdsl-opt %s -p convert-graph-to-loop --split-input-file | filecheck %s --check-prefix=COPY

// A convolution's input read is bounds-checked (a clamped load and a select of 0) only in
// the dims padding lets it leave: channels and images never, rows and columns only with
// padding. A 1x1 unpadded window reads a plain load, which loop-tile-matmul packs as rows.
// CHECK-LABEL: loop.kernel @fused_conv2d
// CHECK:       loop.reduce add [8, 1, 1]
// CHECK-NEXT:  ^bb0(%[[C:.*]]: index, %{{.*}}: index, %{{.*}}: index):
// CHECK-NEXT:  loop.load %{{.*}}[%{{.*}}, %[[C]], %{{.*}}, %{{.*}}] : memref<1x8x6x6xf32> -> f32
// CHECK-NEXT:  loop.load
// CHECK-NEXT:  arith.mulf
// CHECK-NEXT:  loop.yield
// The NHWC copy made for it (with operand copies) checks nothing either.
// COPY-LABEL: loop.kernel @fused_conv2d
// COPY:       loop.parallel [1, 6, 6, 8] {
// COPY-NEXT:  ^bb0
// COPY-NEXT:  loop.load %{{.*}} : memref<1x8x6x6xf32> -> f32
// COPY-NEXT:  loop.store
func.func @conv_1x1(%x: tensor<1x8x6x6xf32>, %w: tensor<4x8x1x1xf32>) -> tensor<1x4x6x6xf32> {
  %0 = graph.fused "fused_conv2d"(%x, %w) kind = out_elemwise_fusable : (tensor<1x8x6x6xf32>, tensor<4x8x1x1xf32>) -> tensor<1x4x6x6xf32> {
  ^bb0(%a: tensor<1x8x6x6xf32>, %b: tensor<4x8x1x1xf32>):
    %c = graph.conv2d %a, %b strides = [1, 1] padding = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x8x6x6xf32>, tensor<4x8x1x1xf32>) -> tensor<1x4x6x6xf32>
    graph.yield %c : tensor<1x4x6x6xf32>
  }
  func.return %0 : tensor<1x4x6x6xf32>
}

// -----

// Padding only after the rows and columns (the last stride-2 window reaches row 6 of
// 0..5): rows and columns are checked, channels are not (2 compares per checked dim).
// CHECK-LABEL: loop.kernel @fused_conv2d
// CHECK:       loop.reduce add [8, 3, 3]
// CHECK-COUNT-4: arith.cmpi
// CHECK-NOT:   arith.cmpi
// CHECK:       arith.select
// CHECK:       loop.yield
// The NHWC copy's rows and columns, not its channels: 4 compares.
// COPY-LABEL: loop.kernel @fused_conv2d
// COPY:       loop.parallel [1, 7, 7, 8] {
// COPY-COUNT-4: arith.cmpi
// COPY-NOT:   arith.cmpi
// COPY:       loop.store
func.func @conv_bottom_pad(%x: tensor<1x8x6x6xf32>, %w: tensor<4x8x3x3xf32>) -> tensor<1x4x3x3xf32> {
  %0 = graph.fused "fused_conv2d"(%x, %w) kind = out_elemwise_fusable : (tensor<1x8x6x6xf32>, tensor<4x8x3x3xf32>) -> tensor<1x4x3x3xf32> {
  ^bb0(%a: tensor<1x8x6x6xf32>, %b: tensor<4x8x3x3xf32>):
    %c = graph.conv2d %a, %b strides = [2, 2] padding = [0, 0, 1, 1] dilations = [1, 1] groups = 1 : (tensor<1x8x6x6xf32>, tensor<4x8x3x3xf32>) -> tensor<1x4x3x3xf32>
    graph.yield %c : tensor<1x4x3x3xf32>
  }
  func.return %0 : tensor<1x4x3x3xf32>
}

// -----

// A padded depthwise convolution: with operand copies, its input is copied as it is with
// the padding written out (NCHW, 8x8 rows), and the sum over the 3x3 taps reads that copy
// unchecked, along its rows; without copies, the taps are checked.
// CHECK-LABEL: loop.kernel @fused_conv2d
// CHECK:       loop.reduce add [1, 3, 3]
// CHECK:       arith.select
// COPY-LABEL: loop.kernel @fused_conv2d
// COPY-NEXT:  ^bb0({{.*}}%[[COPY:[0-9]+]]: memref<1x4x8x8xf32>):
// COPY:       loop.parallel [1, 4, 8, 8] {
// COPY:       arith.select
// COPY:       loop.store %{{.*}}, %[[COPY]]
// COPY:       loop.reduce add [1, 3, 3]
// COPY-NOT:   arith.select
// COPY:       loop.load %[[COPY]]
// COPY-NOT:   arith.select
// COPY:       loop.store
func.func @depthwise(%x: tensor<1x4x6x6xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %0 = graph.fused "fused_conv2d"(%x, %w) kind = out_elemwise_fusable : (tensor<1x4x6x6xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32> {
  ^bb0(%a: tensor<1x4x6x6xf32>, %b: tensor<4x1x3x3xf32>):
    %c = graph.conv2d %a, %b strides = [1, 1] padding = [1, 1, 1, 1] dilations = [1, 1] groups = 4 : (tensor<1x4x6x6xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32>
    graph.yield %c : tensor<1x4x6x6xf32>
  }
  func.return %0 : tensor<1x4x6x6xf32>
}
