// RUN: xdsl-opt %s -p graph-simplify --split-input-file | filecheck %s

// PyTorch's addmm linear (GPT-2's Conv1D): view to 2-D, Gemm, bias, view back. The
// reshape after the product moves into the left operand, where it cancels the first
// view; the bias and the activation now follow the matmul directly.
// CHECK-LABEL: func.func @addmm_linear
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<5.000000e-01>
// CHECK-NEXT: %[[Y:.*]] = graph.matmul %x, %w : (tensor<4x16x32xf32>, tensor<32x48xf32>) -> tensor<4x16x48xf32>
// CHECK-NEXT: %[[B:.*]] = graph.add %[[Y]], %b : (tensor<4x16x48xf32>, tensor<48xf32>) -> tensor<4x16x48xf32>
// CHECK-NEXT: %[[T:.*]] = graph.tanh %[[B]] : tensor<4x16x48xf32>
// CHECK-NEXT: %[[H:.*]] = graph.mul %[[T]], %[[C]]
// CHECK-NEXT: func.return %[[H]]
func.func @addmm_linear(%x: tensor<4x16x32xf32>, %w: tensor<32x48xf32>, %b: tensor<48xf32>) -> tensor<4x16x48xf32> {
  %half = graph.constant dense<0.5> : tensor<f32>
  %v = graph.reshape %x : tensor<4x16x32xf32> -> tensor<64x32xf32>
  %y = graph.matmul %v, %w : (tensor<64x32xf32>, tensor<32x48xf32>) -> tensor<64x48xf32>
  %yb = graph.add %y, %b : (tensor<64x48xf32>, tensor<48xf32>) -> tensor<64x48xf32>
  %r = graph.reshape %yb : tensor<64x48xf32> -> tensor<4x16x48xf32>
  %t = graph.tanh %r : tensor<4x16x48xf32>
  %h = graph.mul %t, %half : (tensor<4x16x48xf32>, tensor<f32>) -> tensor<4x16x48xf32>
  func.return %h : tensor<4x16x48xf32>
}

// -----

// A product read elsewhere too stays: its other readers need it at its own shape, and a
// reshape back would be moved into the matmul again.
// CHECK-LABEL: func.func @product_read_twice
// CHECK-NEXT: %[[Y:.*]] = graph.matmul %x, %w : (tensor<64x32xf32>, tensor<32x48xf32>) -> tensor<64x48xf32>
// CHECK-NEXT: %[[R:.*]] = graph.reshape %[[Y]] : tensor<64x48xf32> -> tensor<4x16x48xf32>
// CHECK-NEXT: func.return %[[R]], %[[Y]]
func.func @product_read_twice(%x: tensor<64x32xf32>, %w: tensor<32x48xf32>) -> (tensor<4x16x48xf32>, tensor<64x48xf32>) {
  %y = graph.matmul %x, %w : (tensor<64x32xf32>, tensor<32x48xf32>) -> tensor<64x48xf32>
  %r = graph.reshape %y : tensor<64x48xf32> -> tensor<4x16x48xf32>
  func.return %r, %y : tensor<4x16x48xf32>, tensor<64x48xf32>
}

// -----

// Reshapes stay where moving them would be wrong or would copy work: one that changes the
// last dimension, a batched right operand, a bias per row (not along N), and an
// elementwise op whose result something else reads.
// CHECK-LABEL: func.func @kept
// CHECK: graph.matmul %x, %w : (tensor<64x32xf32>, tensor<32x48xf32>) -> tensor<64x48xf32>
// CHECK-NEXT: graph.reshape %{{.*}} : tensor<64x48xf32> -> tensor<4x16x6x8xf32>
// CHECK: graph.matmul %a, %bw : (tensor<4x16x32xf32>, tensor<4x32x48xf32>) -> tensor<4x16x48xf32>
// CHECK-NEXT: graph.reshape %{{.*}} : tensor<4x16x48xf32> -> tensor<64x48xf32>
// CHECK: %[[R:.*]] = graph.add %{{.*}}, %rows : (tensor<64x48xf32>, tensor<64x1xf32>) -> tensor<64x48xf32>
// CHECK-NEXT: graph.reshape %[[R]] : tensor<64x48xf32> -> tensor<4x16x48xf32>
// CHECK: %[[S:.*]] = graph.tanh %{{.*}} : tensor<64x48xf32>
// CHECK-NEXT: graph.reshape %[[S]] : tensor<64x48xf32> -> tensor<4x16x48xf32>
// CHECK: func.return
func.func @kept(%x: tensor<64x32xf32>, %w: tensor<32x48xf32>, %a: tensor<4x16x32xf32>, %bw: tensor<4x32x48xf32>, %rows: tensor<64x1xf32>) -> (tensor<4x16x6x8xf32>, tensor<64x48xf32>, tensor<4x16x48xf32>, tensor<4x16x48xf32>, tensor<64x48xf32>) {
  %y = graph.matmul %x, %w : (tensor<64x32xf32>, tensor<32x48xf32>) -> tensor<64x48xf32>
  %heads = graph.reshape %y : tensor<64x48xf32> -> tensor<4x16x6x8xf32>
  %z = graph.matmul %a, %bw : (tensor<4x16x32xf32>, tensor<4x32x48xf32>) -> tensor<4x16x48xf32>
  %zf = graph.reshape %z : tensor<4x16x48xf32> -> tensor<64x48xf32>
  %y2 = graph.matmul %x, %w : (tensor<64x32xf32>, tensor<32x48xf32>) -> tensor<64x48xf32>
  %per_row = graph.add %y2, %rows : (tensor<64x48xf32>, tensor<64x1xf32>) -> tensor<64x48xf32>
  %pr = graph.reshape %per_row : tensor<64x48xf32> -> tensor<4x16x48xf32>
  %y3 = graph.matmul %x, %w : (tensor<64x32xf32>, tensor<32x48xf32>) -> tensor<64x48xf32>
  %s = graph.tanh %y3 : tensor<64x48xf32>
  %sr = graph.reshape %s : tensor<64x48xf32> -> tensor<4x16x48xf32>
  func.return %heads, %zf, %pr, %sr, %s : tensor<4x16x6x8xf32>, tensor<64x48xf32>, tensor<4x16x48xf32>, tensor<4x16x48xf32>, tensor<64x48xf32>
}
