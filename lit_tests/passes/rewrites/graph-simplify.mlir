// RUN: xdsl-opt %s -p graph-simplify --split-input-file | filecheck %s

// x + -0.0, -0.0 + x, x - 0.0, x * 1, 1 * x and x / 1 are x when x already has the
// result's type.
// CHECK-LABEL: func.func @identities
// CHECK-NEXT: %[[E:.*]] = graph.exp %x : tensor<4x8xf32>
// CHECK-NEXT: func.return %[[E]]
func.func @identities(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = graph.constant dense<0.0> : tensor<f32>
  %neg_zero = graph.constant dense<-0.0> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<8xf32>
  %0 = graph.add %x, %neg_zero : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = graph.add %neg_zero, %0 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = graph.sub %1, %zero : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = graph.mul %2, %one : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %4 = graph.mul %one, %3 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = graph.div %4, %one : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %6 = graph.exp %5 : tensor<4x8xf32>
  func.return %6 : tensor<4x8xf32>
}

// -----

// x + -0.0 that broadcasts x, x * 2 and -0.0 - x are not identities.
// CHECK-LABEL: func.func @not_identities
// CHECK-NEXT: %[[Z:.*]] = graph.constant dense<-0.000000e+00> : tensor<4x8xf32>
// CHECK-NEXT: %[[T:.*]] = graph.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[A:.*]] = graph.add %x, %[[Z]] : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[M:.*]] = graph.mul %[[A]], %[[T]]
// CHECK-NEXT: %[[S:.*]] = graph.sub %[[Z]], %[[M]]
// CHECK-NEXT: func.return %[[S]]
func.func @not_identities(%x: tensor<8xf32>) -> tensor<4x8xf32> {
  %zero = graph.constant dense<-0.0> : tensor<4x8xf32>
  %two = graph.constant dense<2.0> : tensor<f32>
  %0 = graph.add %x, %zero : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = graph.mul %0, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = graph.sub %zero, %1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %2 : tensor<4x8xf32>
}

// -----

// x + 0.0, 0.0 + x and x - (-0.0) are +0.0 for x = -0.0, not x: they stay.
// CHECK-LABEL: func.func @signed_zero_not_identities
// CHECK-NEXT: %[[Z:.*]] = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[N:.*]] = graph.constant dense<-0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[A:.*]] = graph.add %x, %[[Z]]
// CHECK-NEXT: %[[B:.*]] = graph.add %[[Z]], %[[A]]
// CHECK-NEXT: %[[S:.*]] = graph.sub %[[B]], %[[N]]
// CHECK-NEXT: func.return %[[S]]
func.func @signed_zero_not_identities(%x: tensor<8xf32>) -> tensor<8xf32> {
  %zero = graph.constant dense<0.0> : tensor<f32>
  %neg_zero = graph.constant dense<-0.0> : tensor<f32>
  %0 = graph.add %x, %zero : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %1 = graph.add %zero, %0 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = graph.sub %1, %neg_zero : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  func.return %2 : tensor<8xf32>
}

// -----

// Integers have one zero: x + 0, 0 + x and x - 0 are x.
// CHECK-LABEL: func.func @integer_zero_identities
// CHECK-NEXT: func.return %x
func.func @integer_zero_identities(%x: tensor<8xi32>) -> tensor<8xi32> {
  %zero = graph.constant dense<0> : tensor<i32>
  %0 = graph.add %x, %zero : (tensor<8xi32>, tensor<i32>) -> tensor<8xi32>
  %1 = graph.add %zero, %0 : (tensor<i32>, tensor<8xi32>) -> tensor<8xi32>
  %2 = graph.sub %1, %zero : (tensor<8xi32>, tensor<i32>) -> tensor<8xi32>
  func.return %2 : tensor<8xi32>
}

// -----

// CHECK-LABEL: func.func @neg_neg
// CHECK-NEXT: func.return %x
func.func @neg_neg(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = graph.neg %x : tensor<8xf32>
  %1 = graph.neg %0 : tensor<8xf32>
  func.return %1 : tensor<8xf32>
}

// -----

// reshape(reshape(x)) is one reshape; one back to x's own shape is x.
// CHECK-LABEL: func.func @reshapes
// CHECK-NEXT: %[[R:.*]] = graph.reshape %x : tensor<4x6xf32> -> tensor<3x8xf32>
// CHECK-NEXT: %[[E:.*]] = graph.exp %x : tensor<4x6xf32>
// CHECK-NEXT: func.return %[[R]], %[[E]]
func.func @reshapes(%x: tensor<4x6xf32>) -> (tensor<3x8xf32>, tensor<4x6xf32>) {
  %0 = graph.reshape %x : tensor<4x6xf32> -> tensor<24xf32>
  %1 = graph.reshape %0 : tensor<24xf32> -> tensor<3x8xf32>
  %2 = graph.reshape %0 : tensor<24xf32> -> tensor<4x6xf32>
  %3 = graph.exp %2 : tensor<4x6xf32>
  func.return %1, %3 : tensor<3x8xf32>, tensor<4x6xf32>
}

// -----

// transpose(transpose(x)) composes; when the composition is the identity it is x.
// CHECK-LABEL: func.func @transposes
// CHECK-NEXT: %[[T:.*]] = graph.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT: func.return %[[T]], %x
func.func @transposes(%x: tensor<2x3x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = graph.transpose %x perm = [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %1 = graph.transpose %0 perm = [2, 1, 0] : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  %2 = graph.transpose %0 perm = [1, 0, 2] : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
  func.return %1, %2 : tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// -----

// Identity broadcasts and casts disappear; a real one stays.
// CHECK-LABEL: func.func @identity_broadcast_and_cast
// CHECK-NEXT: %[[B:.*]] = graph.broadcast_to %x : tensor<8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: func.return %[[B]]
func.func @identity_broadcast_and_cast(%x: tensor<8xf32>) -> tensor<2x8xf32> {
  %0 = graph.broadcast_to %x : tensor<8xf32> -> tensor<8xf32>
  %1 = graph.cast %0 : tensor<8xf32> -> tensor<8xf32>
  %2 = graph.broadcast_to %1 : tensor<8xf32> -> tensor<2x8xf32>
  func.return %2 : tensor<2x8xf32>
}

// -----

// Graph ops on constants fold: rsqrt(4 + 0) * 3 = 1.5, computed by the reference.
// CHECK-LABEL: func.func @fold_constants
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<1.500000e+00> : tensor<3xf32>
// CHECK-NEXT: %[[Y:.*]] = graph.mul %x, %[[C]]
// CHECK-NEXT: func.return %[[Y]]
func.func @fold_constants(%x: tensor<3xf32>) -> tensor<3xf32> {
  %four = graph.constant dense<4.0> : tensor<3xf32>
  %three = graph.constant dense<3.0> : tensor<f32>
  %r = graph.rsqrt %four : tensor<3xf32>
  %k = graph.mul %r, %three : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %y = graph.mul %x, %k : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}

// -----

// A broadcast of a constant is not materialised: it would only grow the IR.
// CHECK-LABEL: func.func @no_fold_broadcast
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<2.000000e+00> : tensor<8xf32>
// CHECK-NEXT: %[[B:.*]] = graph.broadcast_to %[[C]] : tensor<8xf32> -> tensor<64x8xf32>
// CHECK-NEXT: func.return %[[B]]
func.func @no_fold_broadcast() -> tensor<64x8xf32> {
  %c = graph.constant dense<2.0> : tensor<8xf32>
  %b = graph.broadcast_to %c : tensor<8xf32> -> tensor<64x8xf32>
  func.return %b : tensor<64x8xf32>
}

// -----

// Common subexpressions merge (xDSL's CSE) and dead ops go (xDSL's DCE).
// CHECK-LABEL: func.func @cse_and_dce
// CHECK-NEXT: %[[E:.*]] = graph.exp %x : tensor<8xf32>
// CHECK-NEXT: %[[M:.*]] = graph.mul %[[E]], %[[E]]
// CHECK-NEXT: func.return %[[M]]
func.func @cse_and_dce(%x: tensor<8xf32>) -> tensor<8xf32> {
  %a = graph.exp %x : tensor<8xf32>
  %b = graph.exp %x : tensor<8xf32>
  %dead = graph.tanh %x : tensor<8xf32>
  %m = graph.mul %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return %m : tensor<8xf32>
}

// -----

// Opaque ops are neither folded nor removed when their result is used.
// CHECK-LABEL: func.func @external_kept
// CHECK-NEXT: %[[C:.*]] = graph.constant
// CHECK-NEXT: %[[K:.*]] = graph.external "kernel"(%[[C]])
// CHECK-NEXT: func.return %[[K]]
func.func @external_kept() -> tensor<4xf32> {
  %c = graph.constant dense<1.0> : tensor<4xf32>
  %k = graph.external "kernel"(%c) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %k : tensor<4xf32>
}
