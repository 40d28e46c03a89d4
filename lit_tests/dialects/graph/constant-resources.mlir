// RUN: xdsl-opt %s | filecheck %s
// RUN: xdsl-opt %s | xdsl-opt | filecheck %s
// RUN: xdsl-opt %s --print-op-generic | xdsl-opt | filecheck %s
// RUN: xdsl-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// graph.constant holds a dense_resource handle as well as its bytes; the bytes ride in
// MLIR's dialect_resources section, printed again after the module. One module, no
// splits: xDSL's parser renames a handle an earlier split of the same run declared.

// CHECK-LABEL: func.func @weight_handle
// CHECK-NEXT:    %w = graph.constant dense_resource<rt_w> : tensor<2x2xf32>
// CHECK-NEXT:    func.return %w : tensor<2x2xf32>
// GENERIC:       "graph.constant"() <{value = dense_resource<rt_w> : tensor<2x2xf32>}> : () -> tensor<2x2xf32>
func.func @weight_handle() -> tensor<2x2xf32> {
  %w = graph.constant dense_resource<rt_w> : tensor<2x2xf32>
  func.return %w : tensor<2x2xf32>
}

// CHECK:       {-#
// CHECK-NEXT:    dialect_resources: {
// CHECK-NEXT:      builtin: {
// CHECK-NEXT:        rt_w: "0x040000000000803F000000400000404000008040"
{-#
  dialect_resources: {
    builtin: {
      rt_w: "0x040000000000803F000000400000404000008040"
    }
  }
#-}
