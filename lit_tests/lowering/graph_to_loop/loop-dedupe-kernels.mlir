// RUN: xdsl-opt %s -p loop-dedupe-kernels --split-input-file | filecheck %s

// Two kernels with the same body: the second goes, its call runs the first with its own
// buffers.
// CHECK-LABEL: loop.kernel @scale {
// CHECK-NOT:   loop.kernel @scale_1
// CHECK:       func.func @twice(%[[A:.*]]: memref<8xf32>, %[[B:.*]]: memref<8xf32>, %[[C:.*]]: memref<8xf32>, %[[D:.*]]: memref<8xf32>) {
// CHECK-NEXT:    loop.call @scale(%[[A]], %[[C]])
// CHECK-NEXT:    loop.call @scale(%[[B]], %[[D]])
builtin.module {
  loop.kernel @scale {
  ^bb0(%x: memref<8xf32>, %y: memref<8xf32>):
    loop.parallel [8] {
    ^bb1(%i: index):
      %v = memref.load %x[%i] : memref<8xf32>
      %two = arith.constant 2.000000e+00 : f32
      %r = arith.mulf %v, %two : f32
      memref.store %r, %y[%i] : memref<8xf32>
      loop.yield
    }
    loop.yield
  }
  loop.kernel @scale_1 {
  ^bb0(%x: memref<8xf32>, %y: memref<8xf32>):
    loop.parallel [8] {
    ^bb1(%i: index):
      %v = memref.load %x[%i] : memref<8xf32>
      %two = arith.constant 2.000000e+00 : f32
      %r = arith.mulf %v, %two : f32
      memref.store %r, %y[%i] : memref<8xf32>
      loop.yield
    }
    loop.yield
  }
  func.func @twice(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<8xf32>, %d: memref<8xf32>) {
    loop.call @scale(%a, %c) : memref<8xf32>, memref<8xf32>
    loop.call @scale_1(%b, %d) : memref<8xf32>, memref<8xf32>
    func.return
  }
}

// -----

// Same ops, another constant (or another shape): both kernels stay.
// CHECK-LABEL: loop.kernel @double {
// CHECK:       loop.kernel @triple {
// CHECK:       loop.call @double(
// CHECK-NEXT:  loop.call @triple(
builtin.module {
  loop.kernel @double {
  ^bb0(%x: memref<8xf32>, %y: memref<8xf32>):
    loop.parallel [8] {
    ^bb1(%i: index):
      %v = memref.load %x[%i] : memref<8xf32>
      %k = arith.constant 2.000000e+00 : f32
      %r = arith.mulf %v, %k : f32
      memref.store %r, %y[%i] : memref<8xf32>
      loop.yield
    }
    loop.yield
  }
  loop.kernel @triple {
  ^bb0(%x: memref<8xf32>, %y: memref<8xf32>):
    loop.parallel [8] {
    ^bb1(%i: index):
      %v = memref.load %x[%i] : memref<8xf32>
      %k = arith.constant 3.000000e+00 : f32
      %r = arith.mulf %v, %k : f32
      memref.store %r, %y[%i] : memref<8xf32>
      loop.yield
    }
    loop.yield
  }
  func.func @both(%a: memref<8xf32>, %b: memref<8xf32>) {
    loop.call @double(%a, %b) : memref<8xf32>, memref<8xf32>
    loop.call @triple(%a, %b) : memref<8xf32>, memref<8xf32>
    func.return
  }
}
