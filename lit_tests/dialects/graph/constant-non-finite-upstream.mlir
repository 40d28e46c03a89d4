// REQUIRES: mlir-opt
// RUN: %mlir-opt %s --allow-unregistered-dialect | filecheck %s
// RUN: xdsl-opt %s --print-op-generic | %mlir-opt --allow-unregistered-dialect | filecheck %s

// The hex blob graphfuse prints for a value with -inf, +inf or NaN is MLIR's own form, which
// upstream mlir-opt reads as bytes; and the hex elements xDSL's printer writes (as in the
// memref.global a lowered constant becomes) are the floats' bits to mlir-opt. Generic form:
// graph ops are unregistered in mlir-opt.

// CHECK-LABEL: func.func @non_finite
// CHECK-NEXT:    "graph.constant"() <{value = dense<[0xFF800000, 0x7F800000, 0x7FC00000]> : tensor<3xf32>}>
// CHECK-NEXT:    "graph.constant"() <{value = dense<0xFF800000> : tensor<2x2xf32>}>
// CHECK-NEXT:    "graph.constant"() <{value = dense<[0xFC00, 0x7C00, 0x7E00]> : tensor<3xf16>}>
func.func @non_finite() -> (tensor<3xf32>, tensor<2x2xf32>, tensor<3xf16>) {
  %c = "graph.constant"() <{value = dense<"0x000080FF0000807F0000C07F"> : tensor<3xf32>}> : () -> tensor<3xf32>
  %s = "graph.constant"() <{value = dense<"0x000080FF"> : tensor<2x2xf32>}> : () -> tensor<2x2xf32>
  %h = "graph.constant"() <{value = dense<"0x00FC007C007E"> : tensor<3xf16>}> : () -> tensor<3xf16>
  func.return %c, %s, %h : tensor<3xf32>, tensor<2x2xf32>, tensor<3xf16>
}
