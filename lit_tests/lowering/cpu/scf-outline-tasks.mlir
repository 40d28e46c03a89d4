// RUN: xdsl-opt %s -p scf-outline-tasks | filecheck %s

"memref.global"() <{sym_name = "bias", sym_visibility = "private", type = memref<28xf32>, initial_value = dense<1.0> : tensor<28xf32>, constant}> : () -> ()

// The parallel loop's body becomes @rows__task0: the loop's index, then what the body reads
// from outside, each once, in the order it reads them: buffers and scalars. Constants, the
// global and the reshape of %y are cloned into the task, so %y itself is passed. The task has
// internal linkage, for LLVM to inline.
// CHECK-LABEL: func.func @rows(
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^{{.*}}(%[[I:.*]]: index):
// CHECK-NEXT:      func.call @rows__task0(%[[I]], %x, %scale, %y) : (index, memref<4x28xf32>, f32, memref<4x30xf32>) -> ()
// CHECK-NEXT:      scf.reduce
// CHECK:       func.func private @rows__task0(%{{.*}}: index, %[[X:.*]]: memref<4x28xf32>, %{{.*}}: f32, %[[Y:.*]]: memref<4x30xf32>) attributes {llvm.linkage = #llvm.linkage<"internal">} {
// CHECK-DAG:     arith.constant 28 : index
// CHECK-DAG:     memref.collapse_shape %[[Y]]
// CHECK-DAG:     memref.get_global @bias
// CHECK:         scf.for
// CHECK:         memref.load %[[X]]
// CHECK:         func.return
func.func @rows(%x: memref<4x28xf32>, %y: memref<4x30xf32>, %scale: f32) {
  %bias = memref.get_global @bias : memref<28xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c28 = arith.constant 28 : index
  %c30 = arith.constant 30 : index
  %flat = memref.collapse_shape %y [[0, 1]] : memref<4x30xf32> into memref<120xf32>
  "scf.parallel"(%c0, %c4, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    scf.for %j = %c0 to %c28 step %c1 {
      %v = memref.load %x[%i, %j] : memref<4x28xf32>
      %m = arith.mulf %v, %scale : f32
      %b = memref.load %bias[%j] : memref<28xf32>
      %s = arith.addf %m, %b : f32
      %row = arith.muli %i, %c30 : index
      %at = arith.addi %row, %j : index
      %shifted = arith.addi %at, %c1 : index
      memref.store %s, %flat[%shifted] : memref<120xf32>
    }
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}

// A kernel without a parallel loop is one task, passed the kernel's arguments.
// CHECK-LABEL: func.func @serial(
// CHECK-NEXT:    func.call @serial__task0(%a, %b) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT:    func.return
// CHECK:       func.func private @serial__task0(
func.func @serial(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %a[%i] : memref<8xf32>
    memref.store %v, %b[%i] : memref<8xf32>
  }
  func.return
}

// Called with one buffer twice (through a view): its body is left as it is.
// CHECK-LABEL: func.func @in_place(
// CHECK-NEXT:    arith.constant
// CHECK-NOT:     func.call
// CHECK-NOT:   @in_place__task
func.func @in_place(%a: memref<8xf32>, %b: memref<2x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %flat = memref.collapse_shape %b [[0, 1]] : memref<2x4xf32> into memref<8xf32>
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %a[%i] : memref<8xf32>
    memref.store %v, %flat[%i] : memref<8xf32>
  }
  func.return
}

// CHECK-LABEL: func.func @main(
func.func @main(%x: memref<4x28xf32>, %y: memref<4x30xf32>, %a: memref<8xf32>, %b: memref<8xf32>, %s: f32) attributes {graphfuse.outputs = 2 : i64} {
  func.call @rows(%x, %y, %s) : (memref<4x28xf32>, memref<4x30xf32>, f32) -> ()
  func.call @serial(%a, %b) : (memref<8xf32>, memref<8xf32>) -> ()
  %view = memref.expand_shape %a [[0, 1]] output_shape [2, 4] : memref<8xf32> into memref<2x4xf32>
  func.call @in_place(%a, %view) : (memref<8xf32>, memref<2x4xf32>) -> ()
  func.return
}
