// RUN: xdsl-opt %s -p graph-fuse --verify-diagnostics | filecheck %s

// A blob whose size does not fit its handle's type is one line naming the handle, when a
// pass reads it (folding reads both operands of the add).

func.func @short_blob(%x: tensor<2xf32>) -> tensor<2xf32> {
  %a = graph.constant dense_resource<short_a> : tensor<2xf32>
  // CHECK: dense_resource<short_a> holds 4 bytes in dialect_resources, tensor<2xf32> needs 8
  %b = graph.constant dense_resource<short_b> : tensor<2xf32>
  %s = graph.add %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %y = graph.mul %x, %s : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      short_a: "0x040000000000803F",
      short_b: "0x040000000000404000008040"
    }
  }
#-}
