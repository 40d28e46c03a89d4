// RUN: xdsl-opt %s --allow-unregistered-dialect -p convert-tosa-to-graph --split-input-file --verify-diagnostics | filecheck %s

// CHECK: @unsupported op #0: 'tosa.clz' op is not supported by graphfuse's TOSA import
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<4xi32>) -> tensor<4xi32>, sym_name = "unsupported"}> ({
  ^bb0(%arg0: tensor<4xi32>):
    %0 = "tosa.clz"(%arg0) : (tensor<4xi32>) -> tensor<4xi32>
    "func.return"(%0) : (tensor<4xi32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// CHECK: @dynamic argument #0 has a dynamic dimension (tensor<?x4xf32>): graphfuse compiles static shapes only
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<?x4xf32>) -> tensor<?x4xf32>, sym_name = "dynamic"}> ({
  ^bb0(%arg0: tensor<?x4xf32>):
    %0 = "tosa.exp"(%arg0) : (tensor<?x4xf32>) -> tensor<?x4xf32>
    "func.return"(%0) : (tensor<?x4xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// CHECK: @shifted op #1: 'tosa.mul' op shift 3 is not supported (only 0: no fixed-point scaling)
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<4xi32>) -> tensor<4xi32>, sym_name = "shifted"}> ({
  ^bb0(%arg0: tensor<4xi32>):
    %0 = "tosa.const"() <{values = dense<3> : tensor<1xi8>}> : () -> tensor<1xi8>
    %1 = "tosa.mul"(%arg0, %arg0, %0) : (tensor<4xi32>, tensor<4xi32>, tensor<1xi8>) -> tensor<4xi32>
    "func.return"(%1) : (tensor<4xi32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----

// CHECK: @rescale op #0: 'tosa.rescale' op is quantised arithmetic, which graphfuse does not import (float TOSA only)
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<4xi32>, tensor<1xi32>, tensor<1xi8>, tensor<1xi32>, tensor<1xi8>) -> tensor<4xi8>, sym_name = "rescale"}> ({
  ^bb0(%arg0: tensor<4xi32>, %m: tensor<1xi32>, %s: tensor<1xi8>, %izp: tensor<1xi32>, %ozp: tensor<1xi8>):
    %0 = "tosa.rescale"(%arg0, %m, %s, %izp, %ozp) <{input_unsigned = false, output_unsigned = false, per_channel = false, rounding_mode = #tosa.rounding_mode<SINGLE_ROUND>, scale32 = true}> : (tensor<4xi32>, tensor<1xi32>, tensor<1xi8>, tensor<1xi32>, tensor<1xi8>) -> tensor<4xi8>
    "func.return"(%0) : (tensor<4xi8>) -> ()
  }) : () -> ()
}) : () -> ()
