// RUN: xdsl-opt %s -p graph-simplify --split-input-file | filecheck %s

// Scalar scales of both matmul operands (ONNX Attention's sqrt(scale) on Q and K) move
// behind the matmul and fold into one multiplication of the product.
// CHECK-LABEL: func.func @scaled_operands
// CHECK-NEXT: %[[P:.*]] = graph.matmul %q, %k
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<0.124999993> : tensor<f32>
// CHECK-NEXT: %[[M:.*]] = graph.mul %[[P]], %[[C]]
// CHECK-NEXT: func.return %[[M]]
func.func @scaled_operands(%q: tensor<2x4x8xf32>, %k: tensor<2x8x4xf32>) -> tensor<2x4x4xf32> {
  %s = graph.constant dense<0.353553385> : tensor<f32>
  %0 = graph.mul %q, %s : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %1 = graph.mul %s, %k : (tensor<f32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %2 = graph.matmul %0, %1 : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  func.return %2 : tensor<2x4x4xf32>
}

// -----

// A scale read elsewhere too, a scale that is not one value, and one that broadcasts its
// operand stay where they are.
// CHECK-LABEL: func.func @kept
// CHECK: %[[A:.*]] = graph.mul %q, %s
// CHECK: %[[B:.*]] = graph.mul %k, %v
// CHECK: %[[P:.*]] = graph.matmul %[[A]], %[[B]]
// CHECK: graph.matmul %[[W:.*]], %k
// CHECK: func.return
func.func @kept(%q: tensor<4x8xf32>, %k: tensor<8x4xf32>, %r: tensor<8xf32>) -> (tensor<4x4xf32>, tensor<4x8xf32>, tensor<4x4xf32>) {
  %s = graph.constant dense<0.5> : tensor<f32>
  %v = graph.constant dense<[[1.0, 2.0, 3.0, 4.0]]> : tensor<1x4xf32>
  %z = graph.constant dense<2.0> : tensor<4x8xf32>
  %0 = graph.mul %q, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = graph.mul %k, %v : (tensor<8x4xf32>, tensor<1x4xf32>) -> tensor<8x4xf32>
  %2 = graph.matmul %0, %1 : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %3 = graph.mul %r, %z : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = graph.matmul %3, %k : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  func.return %2, %0, %4 : tensor<4x4xf32>, tensor<4x8xf32>, tensor<4x4xf32>
}

// -----

// In f16 a product computed before its scale may overflow (40 * 40 * 64 > 65504), so f16
// scales stay; f32 scales whose product would underflow are not folded.
// CHECK-LABEL: func.func @kept_in_range
// CHECK: %[[A:.*]] = graph.mul %q, %h
// CHECK: graph.matmul %[[A]], %k
// CHECK: %[[X:.*]] = graph.mul %x, %t
// CHECK: graph.mul %[[X]], %t
func.func @kept_in_range(%q: tensor<4x64xf16>, %k: tensor<64x4xf16>, %x: tensor<4xf32>) -> (tensor<4x4xf16>, tensor<4xf32>) {
  %h = graph.constant dense<0.125> : tensor<f16>
  %t = graph.constant dense<1.0e-30> : tensor<f32>
  %0 = graph.mul %q, %h : (tensor<4x64xf16>, tensor<f16>) -> tensor<4x64xf16>
  %1 = graph.matmul %0, %k : (tensor<4x64xf16>, tensor<64x4xf16>) -> tensor<4x4xf16>
  %2 = graph.mul %x, %t : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %3 = graph.mul %2, %t : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %1, %3 : tensor<4x4xf16>, tensor<4xf32>
}

// -----

// Zeros of both signs ([0.0, -0.0] as bytes) are two values, not one scale: moved behind
// the matmul as the first, they would give every product's zero that sign.
// CHECK-LABEL: func.func @kept_signed_zeros
// CHECK: %[[Z:.*]] = graph.constant dense<"0x0000000000000080"> : tensor<1x2xf32>
// CHECK-NEXT: %[[A:.*]] = graph.mul %q, %[[Z]]
// CHECK-NEXT: graph.matmul %[[A]], %k
func.func @kept_signed_zeros(%q: tensor<1x2xf32>, %k: tensor<2x4xf32>) -> tensor<1x4xf32> {
  %z = graph.constant dense<"0x0000000000000080"> : tensor<1x2xf32>
  %0 = graph.mul %q, %z : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x2xf32>
  %1 = graph.matmul %0, %k : (tensor<1x2xf32>, tensor<2x4xf32>) -> tensor<1x4xf32>
  func.return %1 : tensor<1x4xf32>
}
