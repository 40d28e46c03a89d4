// RUN: xdsl-opt %s -p graph-simplify --split-input-file | filecheck %s

// Swin's patch merging: the flattening after the concat keeps its axis (the channels), so
// it moves onto the operands and the concat comes last, along the new axis 2.
// CHECK-LABEL: func.func @flattened
// CHECK-NEXT: %[[A:.*]] = graph.reshape %a : tensor<1x4x4x8xf32> -> tensor<1x16x8xf32>
// CHECK-NEXT: %[[B:.*]] = graph.reshape %b : tensor<1x4x4x8xf32> -> tensor<1x16x8xf32>
// CHECK-NEXT: %[[C:.*]] = graph.concat %[[A]], %[[B]] axis = 2 : (tensor<1x16x8xf32>, tensor<1x16x8xf32>) -> tensor<1x16x16xf32>
// CHECK-NEXT: func.return %[[C]]
func.func @flattened(%a: tensor<1x4x4x8xf32>, %b: tensor<1x4x4x8xf32>) -> tensor<1x16x16xf32> {
  %c = graph.concat %a, %b axis = 3 : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x16xf32>
  %r = graph.reshape %c : tensor<1x4x4x16xf32> -> tensor<1x16x16xf32>
  func.return %r : tensor<1x16x16xf32>
}

// -----

// A reshape that regroups the concat's axis with the dims after it, and a concat read
// twice, stay as they are.
// CHECK-LABEL: func.func @kept
// CHECK: %[[C:.*]] = graph.concat %a, %b axis = 2
// CHECK-NEXT: graph.reshape %[[C]] : tensor<1x4x8x8xf32> -> tensor<1x4x64xf32>
// CHECK: %[[D:.*]] = graph.concat %a, %b axis = 3
// CHECK-NEXT: graph.reshape %[[D]] : tensor<1x4x4x16xf32> -> tensor<1x16x16xf32>
// CHECK: func.return
func.func @kept(%a: tensor<1x4x4x8xf32>, %b: tensor<1x4x4x8xf32>) -> (tensor<1x4x64xf32>, tensor<1x16x16xf32>, tensor<1x4x4x16xf32>) {
  %c = graph.concat %a, %b axis = 2 : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x8x8xf32>
  %r = graph.reshape %c : tensor<1x4x8x8xf32> -> tensor<1x4x64xf32>
  %d = graph.concat %a, %b axis = 3 : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x16xf32>
  %s = graph.reshape %d : tensor<1x4x4x16xf32> -> tensor<1x16x16xf32>
  func.return %r, %s, %d : tensor<1x4x64xf32>, tensor<1x16x16xf32>, tensor<1x4x4x16xf32>
}
