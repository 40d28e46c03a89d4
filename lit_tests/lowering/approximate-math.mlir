// RUN: xdsl-opt %s -p graphfuse-approximate-math --split-input-file | filecheck %s
// RUN: xdsl-opt %s -p graphfuse-approximate-math --split-input-file | filecheck %s --check-prefix=GONE

// No math.tanh or math.erf is left before the last case (the one that keeps them).
// GONE-NOT: math.tanh
// GONE-NOT: math.erf
// GONE:     func.func @left_alone

// tanh: 1 - 2 / (exp(2|x|) + 1) beyond |x| = 0.625, an odd polynomial in |x| below, picked
// by a select (no branch, so the loop around it vectorises), then given the sign of x (so
// tanh(-0.0) is -0.0).
// CHECK-LABEL: func.func @tanh(
// CHECK-SAME:  %[[X:.*]]: f32) -> f32 {
// CHECK-DAG:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK:       %[[ABS:.*]] = math.absf %[[X]] : f32
// CHECK-NEXT:  %[[TWICE:.*]] = arith.mulf %[[TWO]], %[[ABS]] : f32
// CHECK-NEXT:  %[[EXP:.*]] = math.exp %[[TWICE]] : f32
// CHECK-NEXT:  %[[DEN:.*]] = arith.addf %[[EXP]], %[[ONE]] : f32
// CHECK-NEXT:  %[[FRAC:.*]] = arith.divf %[[TWO]], %[[DEN]] : f32
// CHECK-NEXT:  %[[LARGE:.*]] = arith.subf %[[ONE]], %[[FRAC]] : f32
// CHECK:       %[[SMALL:.*]] = arith.addf %{{.*}}, %[[ABS]] : f32
// CHECK-NEXT:  %[[CUT:.*]] = arith.constant 6.250000e-01 : f32
// CHECK-NEXT:  %[[IS_LARGE:.*]] = arith.cmpf ogt, %[[ABS]], %[[CUT]] : f32
// CHECK-NEXT:  %[[MAG:.*]] = arith.select %[[IS_LARGE]], %[[LARGE]], %[[SMALL]] : f32
// CHECK-NEXT:  %[[R:.*]] = math.copysign %[[MAG]], %[[X]] : f32
// CHECK-NEXT:  func.return %[[R]] : f32
func.func @tanh(%x: f32) -> f32 {
  %0 = math.tanh %x : f32
  func.return %0 : f32
}

// -----

// erf: x clamped to [-4, 4], then x * P(x^2) / Q(x^2).
// CHECK-LABEL: func.func @erf(
// CHECK-SAME:  %[[X:.*]]: f32) -> f32 {
// CHECK:       %[[LOW:.*]] = arith.constant -4.000000e+00 : f32
// CHECK-NEXT:  %[[A:.*]] = arith.maximumf %[[X]], %[[LOW]] : f32
// CHECK-NEXT:  %[[HIGH:.*]] = arith.constant 4.000000e+00 : f32
// CHECK-NEXT:  %[[C:.*]] = arith.minimumf %[[A]], %[[HIGH]] : f32
// CHECK-NEXT:  %[[Z:.*]] = arith.mulf %[[C]], %[[C]] : f32
// CHECK:       %[[P:.*]] = arith.mulf %{{.*}}, %[[C]] : f32
// CHECK:       %[[R:.*]] = arith.divf %[[P]], %{{.*}} : f32
// CHECK-NEXT:  func.return %[[R]] : f32
func.func @erf(%x: f32) -> f32 {
  %0 = math.erf %x : f32
  func.return %0 : f32
}

// -----

// Inside loops too (the walk reaches nested regions).
// CHECK-LABEL: func.func @in_loop(
// CHECK:       scf.for
// CHECK:       math.exp
// CHECK:       arith.select
// CHECK:       memref.store
func.func @in_loop(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %x[%i] : memref<8xf32>
    %t = math.tanh %v : f32
    memref.store %t, %x[%i] : memref<8xf32>
  }
  func.return
}

// -----

// Only scalar f32 is rewritten: f16 and vectors keep their math ops.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NEXT:  math.tanh %{{.*}} : f16
// CHECK-NEXT:  math.erf %{{.*}} : f16
// CHECK-NEXT:  math.tanh %{{.*}} : vector<4xf32>
// CHECK-NEXT:  func.return
func.func @left_alone(%h: f16, %v: vector<4xf32>) -> (f16, f16, vector<4xf32>) {
  %0 = math.tanh %h : f16
  %1 = math.erf %h : f16
  %2 = math.tanh %v : vector<4xf32>
  func.return %0, %1, %2 : f16, f16, vector<4xf32>
}
