// RUN: xdsl-opt %s --allow-unregistered-dialect -p convert-tosa-to-graph --split-input-file | filecheck %s

// TOSA in MLIR's generic form (as `mlir-opt --mlir-print-op-generic` prints it); xDSL
// knows part of TOSA only, so the rest is read as unregistered ops.

// An NHWC convolution becomes an NCHW graph.conv2d between transposes, its OHWI weight
// transposed at import, its bias added in NCHW; ReLU (clamp to [0, FLT_MAX]) moves before
// the transpose back.
// CHECK-LABEL: func.func @conv_relu
// CHECK-NEXT:    %[[X:.*]] = graph.transpose %{{.*}} perm = [0, 3, 1, 2] : tensor<1x4x4x2xf32> -> tensor<1x2x4x4xf32>
// CHECK-NEXT:    %[[W:.*]] = graph.constant dense<1.000000e+00> : tensor<3x2x3x3xf32>
// CHECK-NEXT:    %[[C:.*]] = graph.conv2d %[[X]], %[[W]] padding = [1, 1, 1, 1] : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.constant dense<[[[[1.000000e+00]], [[2.000000e+00]], [[3.000000e+00]]]]> : tensor<1x3x1x1xf32>
// CHECK-NEXT:    %[[A:.*]] = graph.add %[[C]], %[[B]]
// CHECK-NEXT:    %[[R:.*]] = graph.relu %[[A]] : tensor<1x3x4x4xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.transpose %[[R]] perm = [0, 2, 3, 1]
// CHECK-NEXT:    func.return %[[Y]] : tensor<1x4x4x3xf32>
// CHECK-NOT:     tosa.
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<1x4x4x2xf32>) -> tensor<1x4x4x3xf32>, sym_name = "conv_relu"}> ({
  ^bb0(%arg0: tensor<1x4x4x2xf32>):
    %0 = "tosa.const"() <{values = dense<1.000000e+00> : tensor<3x3x3x2xf32>}> : () -> tensor<3x3x3x2xf32>
    %1 = "tosa.const"() <{values = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>}> : () -> tensor<3xf32>
    %2 = "tosa.const"() <{values = dense<0.000000e+00> : tensor<1xf32>}> : () -> tensor<1xf32>
    %3 = "tosa.conv2d"(%arg0, %0, %1, %2, %2) <{acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>}> : (tensor<1x4x4x2xf32>, tensor<3x3x3x2xf32>, tensor<3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x4x3xf32>
    %4 = "tosa.clamp"(%3) <{max_val = 3.40282347E+38 : f32, min_val = 0.000000e+00 : f32, nan_mode = #tosa.nan_mode<PROPAGATE>}> : (tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32>
    "func.return"(%4) : (tensor<1x4x4x3xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// tosa.reshape takes its shape from a tosa.const_shape, which leaves nothing behind;
// tosa.mul's shift operand (0) disappears; softmax's reductions keep their axis.
// CHECK-LABEL: func.func @softmax
// CHECK-NEXT:    %[[M:.*]] = graph.reduce_max %{{.*}} axes = [1] keepdims : tensor<2x8xf32> -> tensor<2x1xf32>
// CHECK-NEXT:    %[[D:.*]] = graph.sub %{{.*}}, %[[M]]
// CHECK-NEXT:    %[[E:.*]] = graph.exp %[[D]]
// CHECK-NEXT:    %[[S:.*]] = graph.reduce_sum %[[E]] axes = [1] keepdims
// CHECK-NEXT:    %[[ONE:.*]] = graph.constant dense<1.000000e+00> : tensor<1x1xf32>
// CHECK-NEXT:    %[[R:.*]] = graph.div %[[ONE]], %[[S]]
// CHECK-NEXT:    %[[P:.*]] = graph.mul %[[E]], %[[R]]
// CHECK-NEXT:    %[[Y:.*]] = graph.reshape %[[P]] : tensor<2x8xf32> -> tensor<16xf32>
// CHECK-NEXT:    func.return %[[Y]]
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<2x8xf32>) -> tensor<16xf32>, sym_name = "softmax"}> ({
  ^bb0(%arg0: tensor<2x8xf32>):
    %0 = "tosa.reduce_max"(%arg0) <{axis = 1 : i32, nan_mode = #tosa.nan_mode<PROPAGATE>}> : (tensor<2x8xf32>) -> tensor<2x1xf32>
    %1 = "tosa.sub"(%arg0, %0) : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %2 = "tosa.exp"(%1) : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %3 = "tosa.reduce_sum"(%2) <{axis = 1 : i32}> : (tensor<2x8xf32>) -> tensor<2x1xf32>
    %4 = "tosa.reciprocal"(%3) : (tensor<2x1xf32>) -> tensor<2x1xf32>
    %5 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
    %6 = "tosa.mul"(%2, %4, %5) : (tensor<2x8xf32>, tensor<2x1xf32>, tensor<1xi8>) -> tensor<2x8xf32>
    %7 = "tosa.const_shape"() <{values = dense<16> : tensor<1xindex>}> : () -> !tosa.shape<1>
    %8 = "tosa.reshape"(%6, %7) : (tensor<2x8xf32>, !tosa.shape<1>) -> tensor<16xf32>
    "func.return"(%8) : (tensor<16xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// A function without TOSA ops is left as it is.
// CHECK-LABEL: func.func @graph_only
// CHECK-NEXT:    graph.neg
func.func @graph_only(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.neg %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
