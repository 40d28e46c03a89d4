// RUN: xdsl-opt %s -p scf-predicate-short-loops --split-input-file | filecheck %s

// A depthwise 3x3 row of 14 output columns (the taps are loops LLVM unrolls): 8-lane
// vectors with the tail masked. More than 8 columns, so unrolling stays allowed.
// CHECK-LABEL: func.func @row_of_14(
// CHECK:       arith.maximumf
// CHECK-NEXT:  memref.store
// CHECK-NEXT:  } {loop_annotation = #llvm.loop_annotation<vectorize = #llvm.loop_vectorize<disable = false, predicateEnable = true, width = 8 : i32>>}
func.func @row_of_14(%x: memref<4x16x16xf32>, %w: memref<4x3x3xf32>, %y: memref<4x14x14xf32>, %c: index, %r: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c14 = arith.constant 14 : index
  %zero = arith.constant 0.000000e+00 : f32
  scf.for %j = %c0 to %c14 step %c1 {
    %s = scf.for %kh = %c0 to %c3 step %c1 iter_args(%a = %zero) -> (f32) {
      %t = scf.for %kw = %c0 to %c3 step %c1 iter_args(%b = %a) -> (f32) {
        %row = arith.addi %r, %kh : index
        %col = arith.addi %j, %kw : index
        %v = memref.load %x[%c, %row, %col] : memref<4x16x16xf32>
        %k = memref.load %w[%c, %kh, %kw] : memref<4x3x3xf32>
        %p = arith.mulf %v, %k : f32
        %q = arith.addf %b, %p : f32
        scf.yield %q : f32
      }
      scf.yield %t : f32
    }
    %relu = arith.maximumf %s, %zero : f32
    memref.store %relu, %y[%c, %r, %j] : memref<4x14x14xf32>
  }
  func.return
}

// -----

// 7 columns: one masked vector, and no unrolling, which would otherwise take the loop
// apart before the vectoriser sees it.
// CHECK-LABEL: func.func @row_of_7(
// CHECK:       } {loop_annotation = #llvm.loop_annotation<vectorize = #llvm.loop_vectorize<disable = false, predicateEnable = true, width = 8 : i32>, unroll = #llvm.loop_unroll<disable = true>>}
func.func @row_of_7(%x: memref<9xf32>, %y: memref<7xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c7 = arith.constant 7 : index
  scf.for %j = %c0 to %c7 step %c1 {
    %j2 = arith.addi %c2, %j : index
    %a = memref.load %x[%j] : memref<9xf32>
    %b = memref.load %x[%j2] : memref<9xf32>
    %s = arith.addf %a, %b : f32
    memref.store %s, %y[%j] : memref<7xf32>
  }
  func.return
}

// -----

// A padded copy's interior row of 14: stored one column along (past the left padding),
// still one unit-stride run: a masked vector too.
// CHECK-LABEL: func.func @padded_row_copy(
// CHECK:       memref.store
// CHECK-NEXT:  } {loop_annotation = #llvm.loop_annotation<vectorize = #llvm.loop_vectorize<disable = false, predicateEnable = true, width = 8 : i32>>}
func.func @padded_row_copy(%x: memref<14xf32>, %p: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c14 = arith.constant 14 : index
  scf.for %j = %c0 to %c14 step %c1 {
    %v = memref.load %x[%j] : memref<14xf32>
    %j1 = arith.addi %j, %c1 : index
    memref.store %v, %p[%j1] : memref<16xf32>
  }
  func.return
}

// -----

// Left alone: a stride-2 read (masked interleaved loads were slower), a clamped read (the
// padding copy's), a store across rows, whole vectors (16), a long row (40), a short one (4).
// CHECK-LABEL: func.func @not_annotated(
// CHECK-NOT:   loop_annotation
// CHECK:       func.return
func.func @not_annotated(%x: memref<64x64xf32>, %y: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c7 = arith.constant 7 : index
  %c14 = arith.constant 14 : index
  %c16 = arith.constant 16 : index
  %c40 = arith.constant 40 : index
  scf.for %j = %c0 to %c7 step %c1 {
    %j2 = arith.muli %j, %c2 : index
    %v = memref.load %x[%c0, %j2] : memref<64x64xf32>
    memref.store %v, %y[%c0, %j] : memref<64x64xf32>
  }
  scf.for %j = %c0 to %c14 step %c1 {
    %m = arith.minsi %j, %c7 : index
    %v = memref.load %x[%c0, %m] : memref<64x64xf32>
    memref.store %v, %y[%c0, %j] : memref<64x64xf32>
  }
  scf.for %j = %c0 to %c14 step %c1 {
    %v = memref.load %x[%c0, %j] : memref<64x64xf32>
    memref.store %v, %y[%j, %c0] : memref<64x64xf32>
  }
  scf.for %j = %c0 to %c16 step %c1 {
    %v = memref.load %x[%c0, %j] : memref<64x64xf32>
    memref.store %v, %y[%c0, %j] : memref<64x64xf32>
  }
  scf.for %j = %c0 to %c40 step %c1 {
    %v = memref.load %x[%c0, %j] : memref<64x64xf32>
    memref.store %v, %y[%c0, %j] : memref<64x64xf32>
  }
  scf.for %j = %c0 to %c4 step %c1 {
    %v = memref.load %x[%c0, %j] : memref<64x64xf32>
    memref.store %v, %y[%c0, %j] : memref<64x64xf32>
  }
  func.return
}
