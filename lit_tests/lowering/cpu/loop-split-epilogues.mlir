// RUN: xdsl-opt %s -p loop-split-epilogues --split-input-file | filecheck %s

// A reduction followed by a costly epilogue (tanh): per outer point, one loop stores the
// row's sums into a stack row inside an alloca scope (so parallel rows never share it),
// and a second loop, free of the reduction, runs the epilogue.
// CHECK-LABEL: loop.kernel @rows {
// CHECK:        loop.parallel [4] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index):
// CHECK-NEXT:     "memref.alloca_scope"() ({
// CHECK-NEXT:       %[[ROW:.*]] = memref.alloca() {alignment = 64 : i64} : memref<8xf32>
// CHECK-NEXT:       loop.parallel [8] {
// CHECK:              %[[S:.*]] = loop.reduce add [16]
// CHECK:              loop.store %[[S]], %[[ROW]]
// CHECK:            loop.parallel [8] {
// CHECK-NEXT:       ^{{.*}}(%[[J:.*]]: index):
// CHECK-NEXT:         %[[L:.*]] = loop.load %[[ROW]][%[[J]]]
// CHECK-NEXT:         %[[E:.*]] = math.tanh %[[L]] : f32
// CHECK-NEXT:         loop.store %[[E]], %{{.*}}[%[[I]], %[[J]]]
// CHECK:            "memref.alloca_scope.return"() : () -> ()
builtin.module {
  loop.kernel @rows {
  ^bb0(%x: memref<4x8x16xf32>, %out: memref<4x8xf32>):
    %zero = arith.constant 0.000000e+00 : f32
    loop.parallel [4, 8] {
    ^bb0(%i: index, %j: index):
      %s = loop.reduce add [16] init(%zero : f32) {
      ^bb0(%k: index):
        %v = loop.load %x[%i, %j, %k] : memref<4x8x16xf32> -> f32
        loop.yield %v : f32
      }
      %e = math.tanh %s : f32
      loop.store %e, %out[%i, %j] : f32, memref<4x8xf32>
      loop.yield
    }
    loop.yield
  }
}

// -----

// A 1-D nest has no outer loop: the row is allocated in the kernel's frame, with no
// alloca scope (one at the top of a function survives canonicalisation and is invalid
// once scf lowers to blocks).
// CHECK-LABEL: loop.kernel @one_row {
// CHECK-NOT:    alloca_scope
// CHECK:        %[[ROW:.*]] = memref.alloca() {alignment = 64 : i64} : memref<8xf32>
// CHECK-NEXT:   loop.parallel [8] {
// CHECK:          loop.store %{{.*}}, %[[ROW]]
// CHECK:        loop.parallel [8] {
// CHECK-NEXT:   ^{{.*}}(%[[J:.*]]: index):
// CHECK-NEXT:     %[[L:.*]] = loop.load %[[ROW]][%[[J]]]
// CHECK-NEXT:     %[[E:.*]] = math.tanh %[[L]] : f32
// CHECK-NOT:    alloca_scope
builtin.module {
  loop.kernel @one_row {
  ^bb0(%x: memref<4x8xf32>, %out: memref<8xf32>):
    %zero = arith.constant 0.000000e+00 : f32
    loop.parallel [8] {
    ^bb0(%j: index):
      %s = loop.reduce max [4] init(%zero : f32) {
      ^bb0(%k: index):
        %v = loop.load %x[%k, %j] : memref<4x8xf32> -> f32
        loop.yield %v : f32
      }
      %e = math.tanh %s : f32
      loop.store %e, %out[%j] : f32, memref<8xf32>
      loop.yield
    }
    loop.yield
  }
}

// -----

// A cheap epilogue (an add) is not worth a second pass over the row: untouched.
// CHECK-LABEL: loop.kernel @cheap {
// CHECK-NOT:    memref.alloca
// CHECK:        loop.parallel [4, 8] {
builtin.module {
  loop.kernel @cheap {
  ^bb0(%x: memref<4x8x16xf32>, %out: memref<4x8xf32>):
    %zero = arith.constant 0.000000e+00 : f32
    loop.parallel [4, 8] {
    ^bb0(%i: index, %j: index):
      %s = loop.reduce add [16] init(%zero : f32) {
      ^bb0(%k: index):
        %v = loop.load %x[%i, %j, %k] : memref<4x8x16xf32> -> f32
        loop.yield %v : f32
      }
      %e = arith.addf %s, %s : f32
      loop.store %e, %out[%i, %j] : f32, memref<4x8xf32>
      loop.yield
    }
    loop.yield
  }
}
