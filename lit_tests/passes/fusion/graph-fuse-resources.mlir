// RUN: xdsl-opt %s -p graph-fuse | filecheck %s
// RUN: xdsl-opt %s -p graph-fuse,convert-graph-to-loop | filecheck %s --check-prefix=LOOP

// Weights in MLIR's dialect_resources section, as upstream MLIR and torch-mlir print them.
// graph-fuse keeps the handles it need not read and prints their blobs again; folding
// reads the two it folds; the lowering reads each weight into its memref.global. One
// module, no splits: xDSL's parser renames a handle an earlier split of the run declared.

// CHECK-LABEL: func.func @conv_bias_relu
// CHECK-NEXT:    %[[Y:.*]] = graph.fused "fused_conv2d_add_relu"(%x)
// CHECK:           %[[W:.*]] = graph.constant dense_resource<conv_w> : tensor<4x2x1x1xf32>
// CHECK-NEXT:      %[[B:.*]] = graph.constant dense_resource<conv_b> : tensor<4x1x1xf32>
// CHECK-NEXT:      graph.conv2d %{{.*}}, %[[W]]
func.func @conv_bias_relu(%x: tensor<1x2x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %w = graph.constant dense_resource<conv_w> : tensor<4x2x1x1xf32>
  %b = graph.constant dense_resource<conv_b> : tensor<4x1x1xf32>
  %c = graph.conv2d %x, %w : (tensor<1x2x4x4xf32>, tensor<4x2x1x1xf32>) -> tensor<1x4x4x4xf32>
  %a = graph.add %c, %b : (tensor<1x4x4x4xf32>, tensor<4x1x1xf32>) -> tensor<1x4x4x4xf32>
  %y = graph.relu %a : tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}

// fold_a + fold_b = [1, 2] + [3, 4], read from the section and folded.
// CHECK-LABEL: func.func @folded
// CHECK-NOT:     dense_resource<fold_
// CHECK:         graph.constant dense<[4.000000e+00, 6.000000e+00]> : tensor<2xf32>
// CHECK-NOT:     dense_resource<fold_
func.func @folded(%x: tensor<2xf32>) -> tensor<2xf32> {
  %a = graph.constant dense_resource<fold_a> : tensor<2xf32>
  %b = graph.constant dense_resource<fold_b> : tensor<2xf32>
  %s = graph.add %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %y = graph.mul %x, %s : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}

// Only the handles still used are printed again.
// CHECK:       dialect_resources: {
// CHECK-NEXT:    builtin: {
// CHECK-NEXT:      conv_b: "0x040000000000003F000080BF0000803F000000BF",conv_w: "0x04000000000000000000803E
// CHECK-NOT:     fold_

// LOOP:     "memref.global"() <{sym_name = "__graphfuse_constant_0", type = memref<4x2x1x1xf32>, initial_value = dense<{{\[\[\[\[}}0.000000e+00]], {{\[\[}}2.500000e-01]]],
// LOOP:     "memref.global"() <{sym_name = "__graphfuse_constant_1", type = memref<4x1x1xf32>, initial_value = dense<{{\[\[\[}}5.000000e-01]], {{\[\[}}-1.000000e+00]],
// LOOP-NOT: dense_resource
{-#
  dialect_resources: {
    builtin: {
      conv_w: "0x04000000000000000000803E0000003F0000403F0000803F0000A03F0000C03F0000E03F",
      conv_b: "0x040000000000003F000080BF0000803F000000BF",
      fold_a: "0x040000000000803F00000040",
      fold_b: "0x040000000000404000008040"
    }
  }
#-}
