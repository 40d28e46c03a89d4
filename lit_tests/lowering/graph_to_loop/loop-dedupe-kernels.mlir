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

// -----

// Same body up to the global read at one place (@w1 / @w2): one kernel, which takes that
// global as its last argument, each call passing its own. @shift, read by both, stays in.
// CHECK-LABEL: loop.kernel @scale_shift {
// CHECK-NEXT:  ^{{.*}}(%[[X:.*]]: memref<8xf32>, %[[Y:.*]]: memref<8xf32>, %[[W:.*]]: memref<8xf32>):
// CHECK-NEXT:    %[[S:.*]] = memref.get_global @shift : memref<8xf32>
// CHECK-NOT:     memref.get_global
// CHECK:         memref.load %[[W]]
// CHECK-NOT:   loop.kernel @scale_shift_1
// CHECK:       func.func @per_weight(%[[A:.*]]: memref<8xf32>, %[[B:.*]]: memref<8xf32>, %[[C:.*]]: memref<8xf32>) {
// CHECK-NEXT:    %[[W1:.*]] = memref.get_global @w1 : memref<8xf32>
// CHECK-NEXT:    loop.call @scale_shift(%[[A]], %[[B]], %[[W1]])
// CHECK-NEXT:    %[[W2:.*]] = memref.get_global @w2 : memref<8xf32>
// CHECK-NEXT:    loop.call @scale_shift(%[[A]], %[[C]], %[[W2]])
builtin.module {
  "memref.global"() <{sym_name = "w1", type = memref<8xf32>, initial_value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>, sym_visibility = "private", constant}> : () -> ()
  "memref.global"() <{sym_name = "w2", type = memref<8xf32>, initial_value = dense<[8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]> : tensor<8xf32>, sym_visibility = "private", constant}> : () -> ()
  "memref.global"() <{sym_name = "shift", type = memref<8xf32>, initial_value = dense<[0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]> : tensor<8xf32>, sym_visibility = "private", constant}> : () -> ()
  loop.kernel @scale_shift {
  ^bb0(%x: memref<8xf32>, %y: memref<8xf32>):
    %s = memref.get_global @shift : memref<8xf32>
    %w = memref.get_global @w1 : memref<8xf32>
    loop.parallel [8] {
    ^bb1(%i: index):
      %v = memref.load %x[%i] : memref<8xf32>
      %k = memref.load %w[%i] : memref<8xf32>
      %b = memref.load %s[%i] : memref<8xf32>
      %m = arith.mulf %v, %k : f32
      %r = arith.addf %m, %b : f32
      memref.store %r, %y[%i] : memref<8xf32>
      loop.yield
    }
    loop.yield
  }
  loop.kernel @scale_shift_1 {
  ^bb0(%x: memref<8xf32>, %y: memref<8xf32>):
    %s = memref.get_global @shift : memref<8xf32>
    %w = memref.get_global @w2 : memref<8xf32>
    loop.parallel [8] {
    ^bb1(%i: index):
      %v = memref.load %x[%i] : memref<8xf32>
      %k = memref.load %w[%i] : memref<8xf32>
      %b = memref.load %s[%i] : memref<8xf32>
      %m = arith.mulf %v, %k : f32
      %r = arith.addf %m, %b : f32
      memref.store %r, %y[%i] : memref<8xf32>
      loop.yield
    }
    loop.yield
  }
  func.func @per_weight(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<8xf32>) {
    loop.call @scale_shift(%a, %b) : memref<8xf32>, memref<8xf32>
    loop.call @scale_shift_1(%a, %c) : memref<8xf32>, memref<8xf32>
    func.return
  }
}

// -----

// The globals differ in type (8 vs 4 elements, read at the same places): both kernels stay,
// each reading its own global inside.
// CHECK-LABEL: loop.kernel @scale8 {
// CHECK:         memref.get_global @w8
// CHECK-LABEL: loop.kernel @scale4 {
// CHECK:         memref.get_global @w4
// CHECK:       loop.call @scale8(%{{[^,]*}}, %{{[^,]*}}) :
// CHECK-NEXT:  loop.call @scale4(%{{[^,]*}}, %{{[^,]*}}) :
builtin.module {
  "memref.global"() <{sym_name = "w8", type = memref<8xf32>, initial_value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>, sym_visibility = "private", constant}> : () -> ()
  "memref.global"() <{sym_name = "w4", type = memref<4xf32>, initial_value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>, sym_visibility = "private", constant}> : () -> ()
  loop.kernel @scale8 {
  ^bb0(%x: memref<8xf32>, %y: memref<8xf32>):
    %w = memref.get_global @w8 : memref<8xf32>
    loop.parallel [4] {
    ^bb1(%i: index):
      %v = memref.load %x[%i] : memref<8xf32>
      %k = memref.load %w[%i] : memref<8xf32>
      %m = arith.mulf %v, %k : f32
      memref.store %m, %y[%i] : memref<8xf32>
      loop.yield
    }
    loop.yield
  }
  loop.kernel @scale4 {
  ^bb0(%x: memref<8xf32>, %y: memref<8xf32>):
    %w = memref.get_global @w4 : memref<4xf32>
    loop.parallel [4] {
    ^bb1(%i: index):
      %v = memref.load %x[%i] : memref<8xf32>
      %k = memref.load %w[%i] : memref<4xf32>
      %m = arith.mulf %v, %k : f32
      memref.store %m, %y[%i] : memref<8xf32>
      loop.yield
    }
    loop.yield
  }
  func.func @by_type(%a: memref<8xf32>, %b: memref<8xf32>) {
    loop.call @scale8(%a, %b) : memref<8xf32>, memref<8xf32>
    loop.call @scale4(%a, %b) : memref<8xf32>, memref<8xf32>
    func.return
  }
}
