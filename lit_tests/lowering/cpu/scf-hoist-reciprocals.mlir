// RUN: xdsl-opt %s -p scf-hoist-reciprocals --split-input-file | filecheck %s

// A row's divisor, computed outside the inner loop: one reciprocal before that loop, shared
// by both divides, and multiplies inside it.
// CHECK-LABEL: func.func @per_row(
// CHECK-SAME:  %[[X:.*]]: memref<4x8xf32>, %[[S:.*]]: memref<4xf32>) {
// CHECK:       "scf.parallel"
// CHECK-NEXT:  ^{{.*}}(%[[I:.*]]: index):
// CHECK-NEXT:    %[[D:.*]] = memref.load %[[S]][%[[I]]] : memref<4xf32>
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[INV:.*]] = arith.divf %[[ONE]], %[[D]] : f32
// CHECK-NEXT:    scf.for %[[J:.*]] =
// CHECK-NEXT:      %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]] : memref<4x8xf32>
// CHECK-NEXT:      %[[Q:.*]] = arith.mulf %[[V]], %[[INV]] fastmath<contract> : f32
// CHECK-NEXT:      %[[Q2:.*]] = arith.mulf %[[Q]], %[[INV]] : f32
// CHECK-NEXT:      memref.store %[[Q2]], %[[X]][%[[I]], %[[J]]] : memref<4x8xf32>
// CHECK-NOT:   arith.divf
// CHECK:       func.return
func.func @per_row(%x: memref<4x8xf32>, %s: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  "scf.parallel"(%c0, %c4, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    %d = memref.load %s[%i] : memref<4xf32>
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %x[%i, %j] : memref<4x8xf32>
      %q = arith.divf %v, %d fastmath<contract> : f32
      %q2 = arith.divf %q, %d : f32
      memref.store %q2, %x[%i, %j] : memref<4x8xf32>
    }
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}

// -----

// A divisor defined outside every loop: the reciprocal goes before the outermost loop.
// CHECK-LABEL: func.func @outermost(
// CHECK-SAME:  %[[X:.*]]: memref<4x8xf32>, %[[D:.*]]: f32) {
// CHECK:       %[[INV:.*]] = arith.divf %{{.*}}, %[[D]] : f32
// CHECK-NEXT:  scf.for
// CHECK-NEXT:    scf.for
// CHECK:           arith.mulf %{{.*}}, %[[INV]] : f32
func.func @outermost(%x: memref<4x8xf32>, %d: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %x[%i, %j] : memref<4x8xf32>
      %q = arith.divf %v, %d : f32
      memref.store %q, %x[%i, %j] : memref<4x8xf32>
    }
  }
  func.return
}

// -----

// Left alone: a divisor that varies in the innermost loop, a divide outside any loop, and
// a vector divide.
// CHECK-LABEL: func.func @left_alone(
// CHECK:       arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:       arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:       arith.divf %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK-NOT:   arith.mulf
func.func @left_alone(%x: memref<8xf32>, %a: f32, %b: f32, %v: vector<4xf32>) -> (f32, vector<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %j = %c0 to %c8 step %c1 {
    %e = memref.load %x[%j] : memref<8xf32>
    %q = arith.divf %a, %e : f32
    memref.store %q, %x[%j] : memref<8xf32>
  }
  %r = arith.divf %a, %b : f32
  %w = arith.divf %v, %v : vector<4xf32>
  func.return %r, %w : f32, vector<4xf32>
}
