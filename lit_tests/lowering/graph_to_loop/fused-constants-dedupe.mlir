// RUN: xdsl-opt %s -p convert-graph-to-loop,loop-dedupe-kernels --split-input-file | filecheck %s

// Two projections that differ only in the bias fused into them (BERT's Q and K): one
// kernel is left, which takes the bias as its last argument; each call passes its own global.
// CHECK:       "memref.global"() <{sym_name = "[[B1:__graphfuse_constant_[0-9]+]]", {{.*}}dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]>
// CHECK-NEXT:  "memref.global"() <{sym_name = "[[B2:__graphfuse_constant_[0-9]+]]", {{.*}}dense<[4.000000e+00, 5.000000e+00, 6.000000e+00]>
// CHECK-LABEL: loop.kernel @fused_matmul_add {
// CHECK-NEXT:  ^{{.*}}(%{{.*}}: memref<2x4xf32>, %{{.*}}: memref<4x3xf32>, %{{.*}}: memref<2x3xf32>, %{{.*}}: memref<3x4xf32>, %[[BIAS:.*]]: memref<3xf32>):
// CHECK-NOT:     memref.get_global
// CHECK:         loop.load %[[BIAS]]
// CHECK-NOT:   loop.kernel @fused_matmul_add_1
// CHECK-LABEL: func.func @projections(
// CHECK-SAME:  %[[X:[^:]*]]: memref<2x4xf32>, %[[WQ:[^:]*]]: memref<4x3xf32>, %[[WK:[^:]*]]: memref<4x3xf32>
// CHECK-NEXT:    %[[BQ:.*]] = memref.get_global @[[B1]] : memref<3xf32>
// CHECK-NEXT:    loop.call @fused_matmul_add(%[[X]], %[[WQ]], %{{.*}}, %{{.*}}, %[[BQ]])
// CHECK-NEXT:    %[[BK:.*]] = memref.get_global @[[B2]] : memref<3xf32>
// CHECK-NEXT:    loop.call @fused_matmul_add(%[[X]], %[[WK]], %{{.*}}, %{{.*}}, %[[BK]])
func.func @projections(%x: tensor<2x4xf32>, %wq: tensor<4x3xf32>, %wk: tensor<4x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %q = graph.fused "fused_matmul_add"(%x, %wq) kind = out_elemwise_fusable : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%xa: tensor<2x4xf32>, %wa: tensor<4x3xf32>):
    %b = graph.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
    %m = graph.matmul %xa, %wa : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %s = graph.add %m, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    graph.yield %s : tensor<2x3xf32>
  }
  %k = graph.fused "fused_matmul_add"(%x, %wk) kind = out_elemwise_fusable : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%xa: tensor<2x4xf32>, %wa: tensor<4x3xf32>):
    %b = graph.constant dense<[4.0, 5.0, 6.0]> : tensor<3xf32>
    %m = graph.matmul %xa, %wa : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %s = graph.add %m, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    graph.yield %s : tensor<2x3xf32>
  }
  func.return %q, %k : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Splat biases stay in the kernels as scalars: 1.0 is not 2.0, so both kernels stay.
// CHECK-LABEL: loop.kernel @fused_matmul_add {
// CHECK:         arith.constant 1.000000e+00 : f32
// CHECK-LABEL: loop.kernel @fused_matmul_add_1 {
// CHECK:         arith.constant 2.000000e+00 : f32
// CHECK-LABEL: func.func @splat_biases(
// CHECK:         loop.call @fused_matmul_add(
// CHECK-NEXT:    loop.call @fused_matmul_add_1(
func.func @splat_biases(%x: tensor<2x4xf32>, %wq: tensor<4x3xf32>, %wk: tensor<4x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %q = graph.fused "fused_matmul_add"(%x, %wq) kind = out_elemwise_fusable : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%xa: tensor<2x4xf32>, %wa: tensor<4x3xf32>):
    %b = graph.constant dense<1.0> : tensor<3xf32>
    %m = graph.matmul %xa, %wa : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %s = graph.add %m, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    graph.yield %s : tensor<2x3xf32>
  }
  %k = graph.fused "fused_matmul_add"(%x, %wk) kind = out_elemwise_fusable : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%xa: tensor<2x4xf32>, %wa: tensor<4x3xf32>):
    %b = graph.constant dense<2.0> : tensor<3xf32>
    %m = graph.matmul %xa, %wa : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %s = graph.add %m, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    graph.yield %s : tensor<2x3xf32>
  }
  func.return %q, %k : tensor<2x3xf32>, tensor<2x3xf32>
}
