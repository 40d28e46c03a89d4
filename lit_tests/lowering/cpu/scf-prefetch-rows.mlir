// RUN: xdsl-opt %s -p scf-prefetch-rows --split-input-file | filecheck %s
// Renamed passes keep their old names as aliases (graphfuse.universe.RENAMED_PASSES):
// RUN: xdsl-opt %s -p graphfuse-prefetch-rows --split-input-file | filecheck %s

// Two passes over each 4 KiB row of a 2 MiB buffer: after the first (the sum), row i + 1
// (at most the last row, 511) is prefetched, one line of 16 floats at a time, before the
// second pass (the divide) computes on row i from cache.
// CHECK-LABEL: func.func @two_passes(
// CHECK-SAME:  %[[X:[^:]*]]: memref<512x1024xf32>
// CHECK:       scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:    %[[SUM:.*]] = scf.for
// CHECK:           scf.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[LAST:.*]] = arith.constant 511 : index
// CHECK-NEXT:    %[[NEXT:.*]] = arith.addi %[[I]], %[[ONE]] : index
// CHECK-NEXT:    %[[ROW:.*]] = arith.minui %[[NEXT]], %[[LAST]] : index
// CHECK-NEXT:    %[[FROM:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[TO:.*]] = arith.constant 1024 : index
// CHECK-NEXT:    %[[LINE:.*]] = arith.constant 16 : index
// CHECK-NEXT:    scf.for %[[J:.*]] = %[[FROM]] to %[[TO]] step %[[LINE]] {
// CHECK-NEXT:      "memref.prefetch"(%[[X]], %[[ROW]], %[[J]]) <{isWrite = false, localityHint = 3 : i32, isDataCache = true}> : (memref<512x1024xf32>, index, index) -> ()
// CHECK-NEXT:    }
// CHECK-NEXT:    scf.for
// CHECK-NOT:     memref.prefetch
func.func @two_passes(%x: memref<512x1024xf32>, %y: memref<512x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = arith.constant 512 : index
  %cols = arith.constant 1024 : index
  %zero = arith.constant 0.000000e+00 : f32
  scf.for %i = %c0 to %rows step %c1 {
    %s = scf.for %j = %c0 to %cols step %c1 iter_args(%acc = %zero) -> (f32) {
      %v = memref.load %x[%i, %j] : memref<512x1024xf32>
      %a = arith.addf %acc, %v : f32
      scf.yield %a : f32
    }
    scf.for %j = %c0 to %cols step %c1 {
      %v = memref.load %x[%i, %j] : memref<512x1024xf32>
      %d = arith.divf %v, %s : f32
      memref.store %d, %y[%i, %j] : memref<512x1024xf32>
    }
  }
  func.return
}

// -----

// One pass per row: nothing is read twice, nothing prefetched.
// CHECK-LABEL: func.func @one_pass(
// CHECK-NOT:   memref.prefetch
func.func @one_pass(%x: memref<512x1024xf32>, %y: memref<512x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = arith.constant 512 : index
  %cols = arith.constant 1024 : index
  scf.for %i = %c0 to %rows step %c1 {
    scf.for %j = %c0 to %cols step %c1 {
      %v = memref.load %x[%i, %j] : memref<512x1024xf32>
      memref.store %v, %y[%i, %j] : memref<512x1024xf32>
    }
  }
  func.return
}
