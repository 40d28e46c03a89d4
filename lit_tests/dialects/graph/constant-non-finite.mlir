// RUN: xdsl-opt %s --split-input-file | filecheck %s
// RUN: xdsl-opt %s --split-input-file | xdsl-opt --split-input-file | filecheck %s
// RUN: xdsl-opt %s --split-input-file -p graph-fuse | xdsl-opt --split-input-file | filecheck %s --check-prefix=FUSED

// Non-finite floats survive plain xdsl-opt: a hex element of a float literal is read as the
// float's bits (MLIR's meaning; xDSL's parser alone reads it as an integer value, so -inf
// would print again as 4.28657869e+09), and a value xDSL's printer would write with hex
// elements is printed as MLIR's hex blob, which xDSL's parser reads as bytes.

// CHECK-LABEL: func.func @negative_infinity_mask
// CHECK-NEXT:    %m = graph.constant dense<"0x00000000000080FF000080FF00000000"> : tensor<2x2xf32>
// FUSED-LABEL: func.func @negative_infinity_mask
// FUSED-NEXT:    graph.fused "fused_add_exp"
// FUSED-NEXT:    ^bb0
// FUSED-NEXT:      graph.constant dense<"0x00000000000080FF000080FF00000000"> : tensor<2x2xf32>
func.func @negative_infinity_mask(%s: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %m = graph.constant dense<[[0.0, 0xFF800000], [0xFF800000, 0.0]]> : tensor<2x2xf32>
  %a = graph.add %s, %m : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %e = graph.exp %a : tensor<2x2xf32>
  func.return %e : tensor<2x2xf32>
}

// -----

// CHECK-LABEL: func.func @infinity_and_nan
// CHECK-NEXT:    %c = graph.constant dense<"0x0000807F0000C07F0000803F"> : tensor<3xf32>
func.func @infinity_and_nan() -> tensor<3xf32> {
  %c = graph.constant dense<"0x0000807F0000C07F0000803F"> : tensor<3xf32>
  func.return %c : tensor<3xf32>
}

// -----

// A splat stays a splat: one element's bytes.
// CHECK-LABEL: func.func @negative_infinity_splat
// CHECK-NEXT:    %c = graph.constant dense<"0x000080FF"> : tensor<2x3xf32>
func.func @negative_infinity_splat() -> tensor<2x3xf32> {
  %c = graph.constant dense<0xFF800000> : tensor<2x3xf32>
  func.return %c : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @half_floats
// CHECK-NEXT:    %h = graph.constant dense<"0x00FC007C007E0080003C"> : tensor<5xf16>
// CHECK-NEXT:    %b = graph.constant dense<"0x80FF807FC07F"> : tensor<3xbf16>
// CHECK-NEXT:    %d = graph.constant dense<"0x000000000000F0FF000000000000F87F"> : tensor<2xf64>
func.func @half_floats() -> (tensor<5xf16>, tensor<3xbf16>, tensor<2xf64>) {
  %h = graph.constant dense<[0xFC00, 0x7C00, 0x7E00, -0.0, 1.0]> : tensor<5xf16>
  %b = graph.constant dense<[0xFF80, 0x7F80, 0x7FC0]> : tensor<3xbf16>
  %d = graph.constant dense<[0xFFF0000000000000, 0x7FF8000000000000]> : tensor<2xf64>
  func.return %h, %b, %d : tensor<5xf16>, tensor<3xbf16>, tensor<2xf64>
}

// -----

// xDSL's printer writes [0.0, -0.0] as the splat dense<0.0>: the blob keeps the sign.
// CHECK-LABEL: func.func @signed_zeros
// CHECK-NEXT:    %z = graph.constant dense<"0x0000000000000080"> : tensor<2xf32>
func.func @signed_zeros() -> tensor<2xf32> {
  %z = graph.constant dense<[0.0, -0.0]> : tensor<2xf32>
  func.return %z : tensor<2xf32>
}

// -----

// Finite values stay readable, element by element; integers are not floats' bits.
// CHECK-LABEL: func.func @finite_values_stay_readable
// CHECK-NEXT:    %f = graph.constant dense<[1.500000e+00, -0.000000e+00, -2.500000e+00]> : tensor<3xf32>
// CHECK-NEXT:    %i = graph.constant dense<[16, -1]> : tensor<2xi32>
func.func @finite_values_stay_readable() -> (tensor<3xf32>, tensor<2xi32>) {
  %f = graph.constant dense<[1.5, -0.0, -2.5]> : tensor<3xf32>
  %i = graph.constant dense<[0x10, -1]> : tensor<2xi32>
  func.return %f, %i : tensor<3xf32>, tensor<2xi32>
}
