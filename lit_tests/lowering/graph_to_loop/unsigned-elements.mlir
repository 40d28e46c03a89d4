// RUN: xdsl-opt %s -p graph-fuse,convert-graph-to-loop | filecheck %s
// RUN: xdsl-opt %s -p graph-fuse,convert-graph-to-loop,convert-loop-to-upstream | filecheck %s --check-prefix=UP

// Unsigned tensors keep ui8 buffers in the loop dialect (the caller passes uint8 arrays),
// compute on signless i8 scalars with the unsigned ops, and turn signless upstream.
// CHECK-LABEL: loop.kernel @fused_div_max
// CHECK:         %[[A:.*]] = loop.load %{{.*}}[%{{.*}}] : memref<4xui8> -> i8
// CHECK:         arith.divui
// CHECK:         arith.maxui
// CHECK:         loop.store %{{.*}}, %{{.*}}[%{{.*}}] : i8, memref<4xui8>
// CHECK-LABEL: func.func @unsigned(
// CHECK-SAME:    memref<4xui8>

// UP-LABEL: func.func @fused_div_max(
// UP-SAME:    memref<4xi8>
// UP-NOT:     ui8
// UP-LABEL: func.func @unsigned(
// UP-SAME:    memref<4xi8>
func.func @unsigned(%x: tensor<4xui8>, %y: tensor<4xui8>) -> tensor<4xui8> {
  %0 = graph.div %x, %y : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  %1 = graph.max %0, %y : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  func.return %1 : tensor<4xui8>
}
