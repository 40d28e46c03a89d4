// RUN: xdsl-opt %s -p math-approximate,scf-interleave-loops --split-input-file | filecheck %s

// A row loop of 1024 with tanh's expansion (26 computing ops): interleaved four ways. The
// row loop around it is not innermost and is left alone.
// CHECK-LABEL: func.func @tanh_rows(
// CHECK:       scf.for
// CHECK:       scf.for
// CHECK:       arith.divf
// CHECK:       memref.store
// CHECK-NEXT:  } {loop_annotation = #llvm.loop_annotation<interleave = #llvm.loop_interleave<count = 4 : i32>>}
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return
func.func @tanh_rows(%x: memref<16x1024xf32>, %y: memref<16x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = arith.constant 16 : index
  %cols = arith.constant 1024 : index
  scf.for %i = %c0 to %rows step %c1 {
    scf.for %j = %c0 to %cols step %c1 {
      %v = memref.load %x[%i, %j] : memref<16x1024xf32>
      %t = math.tanh %v : f32
      memref.store %t, %y[%i, %j] : memref<16x1024xf32>
    }
  }
  func.return
}

// -----

// A light body (LLVM interleaves small loops by itself): no annotation.
// CHECK-LABEL: func.func @light(
// CHECK-NOT:   loop_annotation
// CHECK:       func.return
func.func @light(%x: memref<1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 1024 : index
  %two = arith.constant 2.000000e+00 : f32
  scf.for %j = %c0 to %n step %c1 {
    %v = memref.load %x[%j] : memref<1024xf32>
    %w = arith.mulf %v, %two : f32
    %u = arith.addf %w, %two : f32
    memref.store %u, %x[%j] : memref<1024xf32>
  }
  func.return
}

// -----

// 32 iterations, fewer than 2 * 4 * 8: four interleaved 8-lane iterations would leave the
// vector loop to run at most once, so no annotation.
// CHECK-LABEL: func.func @short(
// CHECK-NOT:   loop_annotation
// CHECK:       func.return
func.func @short(%x: memref<32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 32 : index
  scf.for %j = %c0 to %n step %c1 {
    %v = memref.load %x[%j] : memref<32xf32>
    %t = math.tanh %v : f32
    memref.store %t, %x[%j] : memref<32xf32>
  }
  func.return
}

// -----

// A heavy loop that carries a sum (softmax's exp-and-sum loop): count 1. Interleaved, its
// accumulators and exp's constants would outnumber AVX2's 16 vector registers.
// CHECK-LABEL: func.func @exp_sum(
// CHECK:       arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : f32
// CHECK-NEXT:  scf.yield
// CHECK-NEXT:  } {loop_annotation = #llvm.loop_annotation<interleave = #llvm.loop_interleave<count = 1 : i32>>}
func.func @exp_sum(%x: memref<1024xf32>, %y: memref<1024xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 1024 : index
  %zero = arith.constant 0.000000e+00 : f32
  %s = scf.for %j = %c0 to %n step %c1 iter_args(%a = %zero) -> (f32) {
    %v = memref.load %x[%j] : memref<1024xf32>
    %e = math.exp %v : f32
    memref.store %e, %y[%j] : memref<1024xf32>
    %b = arith.addf %a, %e fastmath<reassoc,contract> : f32
    scf.yield %b : f32
  }
  func.return %s : f32
}

// -----

// A trip count unknown at compile time: annotated.
// CHECK-LABEL: func.func @dynamic(
// CHECK:       } {loop_annotation = #llvm.loop_annotation<interleave = #llvm.loop_interleave<count = 4 : i32>>}
func.func @dynamic(%x: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  scf.for %j = %c0 to %n step %c1 {
    %v = memref.load %x[%j] : memref<?xf32>
    %t = math.tanh %v : f32
    memref.store %t, %x[%j] : memref<?xf32>
  }
  func.return
}

// -----

// A body that carries a vector (as the matmul tiles' loops do) is not one LLVM vectorises:
// no annotation, however heavy.
// CHECK-LABEL: func.func @vector_carried(
// CHECK-NOT:   loop_annotation
// CHECK:       func.return
func.func @vector_carried(%x: memref<1024xf32>, %acc: vector<8xf32>) -> vector<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 1024 : index
  %r = scf.for %j = %c0 to %n step %c1 iter_args(%a = %acc) -> (vector<8xf32>) {
    %v = memref.load %x[%j] : memref<1024xf32>
    %t = math.tanh %v : f32
    memref.store %t, %x[%j] : memref<1024xf32>
    %b = arith.addf %a, %a : vector<8xf32>
    scf.yield %b : vector<8xf32>
  }
  func.return %r : vector<8xf32>
}
