// RUN: xdsl-opt %s --split-input-file | filecheck %s
// RUN: xdsl-opt %s --split-input-file | xdsl-opt --split-input-file | filecheck %s
// RUN: xdsl-opt %s --split-input-file --print-op-generic | xdsl-opt --split-input-file | filecheck %s

// CHECK-LABEL: loop.kernel @elementwise {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<4x8xf32>):
// CHECK-NEXT:   loop.parallel [4, 8] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT:     %[[V:.*]] = loop.load %[[X]][%[[I]], %[[J]]] : memref<4x8xf32> -> f32
// CHECK-NEXT:     %[[W:.*]] = loop.load %[[B]][%[[J]]] : memref<8xf32> -> f32
// CHECK-NEXT:     %[[S:.*]] = arith.addf %[[V]], %[[W]] : f32
// CHECK-NEXT:     loop.store %[[S]], %[[OUT]][%[[I]], %[[J]]] : f32, memref<4x8xf32>
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.yield
// CHECK-NEXT: }
loop.kernel @elementwise {
^bb0(%x: memref<4x8xf32>, %b: memref<8xf32>, %out: memref<4x8xf32>):
  loop.parallel [4, 8] {
  ^bb1(%i: index, %j: index):
    %v = loop.load %x[%i, %j] : memref<4x8xf32> -> f32
    %w = loop.load %b[%j] : memref<8xf32> -> f32
    %s = arith.addf %v, %w : f32
    loop.store %s, %out[%i, %j] : f32, memref<4x8xf32>
    loop.yield
  }
  loop.yield
}

// -----

// CHECK-LABEL: loop.kernel @row_sum {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4xf32>):
// CHECK-NEXT:   %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:   loop.parallel [4] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index):
// CHECK-NEXT:     %[[SUM:.*]] = loop.reduce add [8] init(%[[Z]] : f32) {
// CHECK-NEXT:     ^{{.*}}(%[[J:.*]]: index):
// CHECK-NEXT:       %[[V:.*]] = loop.load %[[X]][%[[I]], %[[J]]] : memref<4x8xf32> -> f32
// CHECK-NEXT:       loop.yield %[[V]] : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     loop.store %[[SUM]], %[[OUT]][%[[I]]] : f32, memref<4xf32>
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.yield
// CHECK-NEXT: }
loop.kernel @row_sum {
^bb0(%x: memref<4x8xf32>, %out: memref<4xf32>):
  %z = arith.constant 0.0 : f32
  loop.parallel [4] {
  ^bb1(%i: index):
    %sum = loop.reduce add [8] init(%z : f32) {
    ^bb2(%j: index):
      %v = loop.load %x[%i, %j] : memref<4x8xf32> -> f32
      loop.yield %v : f32
    }
    loop.store %sum, %out[%i] : f32, memref<4xf32>
    loop.yield
  }
  loop.yield
}

// -----

// Every combiner, a reduction over two dimensions, an integer accumulator.
// CHECK-LABEL: loop.kernel @reduce_kinds {
// CHECK:      loop.reduce mul [2, 3] init(%{{.*}} : f32) {
// CHECK-NEXT: ^{{.*}}(%{{.*}}: index, %{{.*}}: index):
// CHECK:      loop.reduce max [2, 3] init(%{{.*}} : f32) {
// CHECK:      loop.reduce min [6] init(%{{.*}} : i32) {
// CHECK:      loop.yield %{{.*}} : i32
loop.kernel @reduce_kinds {
^bb0(%x: memref<2x3xf32>, %y: memref<6xi32>, %out: memref<f32>, %iout: memref<i32>):
  %one = arith.constant 1.0 : f32
  %low = arith.constant 0xFF800000 : f32
  %high = arith.constant 2147483647 : i32
  %p = loop.reduce mul [2, 3] init(%one : f32) {
  ^bb1(%i: index, %j: index):
    %v = loop.load %x[%i, %j] : memref<2x3xf32> -> f32
    loop.yield %v : f32
  }
  %m = loop.reduce max [2, 3] init(%low : f32) {
  ^bb1(%i: index, %j: index):
    %v = loop.load %x[%i, %j] : memref<2x3xf32> -> f32
    loop.yield %v : f32
  }
  %n = loop.reduce min [6] init(%high : i32) {
  ^bb1(%i: index):
    %w = loop.load %y[%i] : memref<6xi32> -> i32
    loop.yield %w : i32
  }
  %s = arith.addf %p, %m : f32
  loop.store %s, %out[] : f32, memref<f32>
  loop.store %n, %iout[] : i32, memref<i32>
  loop.yield
}

// -----

// Rank-0 buffers take no indices; a box of no dimensions runs its body once.
// CHECK-LABEL: loop.kernel @scalar {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<f16>, %[[OUT:.*]]: memref<f16>):
// CHECK-NEXT:   loop.parallel [] {
// CHECK-NEXT:     %[[V:.*]] = loop.load %[[X]][] : memref<f16> -> f16
// CHECK-NEXT:     loop.store %[[V]], %[[OUT]][] : f16, memref<f16>
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
loop.kernel @scalar {
^bb0(%x: memref<f16>, %out: memref<f16>):
  loop.parallel [] {
    %v = loop.load %x[] : memref<f16> -> f16
    loop.store %v, %out[] : f16, memref<f16>
    loop.yield
  }
  loop.yield
}

// -----

// CHECK:      loop.kernel @copy attributes {graphfuse.note = "kept"} {
// CHECK-LABEL: func.func @caller
// CHECK-NEXT: loop.call @copy(%{{.*}}, %{{.*}}) : memref<8xf32>, memref<8xf32>
// CHECK-NEXT: loop.call @copy(%{{.*}}, %{{.*}}) {graphfuse.note = "again"} : memref<8xf32>, memref<8xf32>
// CHECK-NEXT: func.return
loop.kernel @copy attributes {graphfuse.note = "kept"} {
^bb0(%x: memref<8xf32>, %out: memref<8xf32>):
  loop.parallel [8] {
  ^bb1(%i: index):
    %v = loop.load %x[%i] : memref<8xf32> -> f32
    loop.store %v, %out[%i] : f32, memref<8xf32>
    loop.yield
  }
  loop.yield
}
func.func @caller(%x: memref<8xf32>, %t: memref<8xf32>, %out: memref<8xf32>) {
  loop.call @copy(%x, %t) : memref<8xf32>, memref<8xf32>
  loop.call @copy(%t, %out) {graphfuse.note = "again"} : memref<8xf32>, memref<8xf32>
  func.return
}
