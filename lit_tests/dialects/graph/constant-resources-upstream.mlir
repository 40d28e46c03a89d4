// REQUIRES: mlir-opt
// RUN: xdsl-opt %s --print-op-generic | %mlir-opt --allow-unregistered-dialect | filecheck %s

// What graphfuse writes with --inline-weights is MLIR's own form: upstream mlir-opt reads
// the handle and its blob (here from xdsl-opt's generic form, graph ops unregistered).

// CHECK-LABEL: func.func @weight_handle
// CHECK-NEXT:    %0 = "graph.constant"() <{value = dense_resource<up_w> : tensor<2xf32>}> : () -> tensor<2xf32>
// CHECK:       dialect_resources: {
// CHECK-NEXT:    builtin: {
// CHECK-NEXT:      up_w: "0x040000000000803F00000040"
func.func @weight_handle() -> tensor<2xf32> {
  %w = graph.constant dense_resource<up_w> : tensor<2xf32>
  func.return %w : tensor<2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      up_w: "0x040000000000803F00000040"
    }
  }
#-}
