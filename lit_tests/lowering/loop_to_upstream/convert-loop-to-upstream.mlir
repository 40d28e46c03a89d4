// RUN: xdsl-opt %s -p convert-loop-to-upstream --split-input-file | filecheck %s
// RUN: xdsl-opt %s -p 'convert-loop-to-upstream{parallel=true min_work=1}' --split-input-file | filecheck %s --check-prefix=PAR
// RUN: xdsl-opt %s -p 'convert-loop-to-upstream{parallel=true}' --split-input-file | filecheck %s --check-prefix=SMALL
// upstream-verifies.mlir feeds this pass's output on the bundled examples to mlir-opt.

// A kernel becomes a func.func on its buffers (no C interface: only entry functions get
// one); a box becomes one scf.for per dimension, loads and stores memref ones.
// CHECK-LABEL: func.func @elementwise(
// CHECK-SAME:  %[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4x8xf32>) {
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:   %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:   %[[FOUR:.*]] = arith.constant 4 : index
// CHECK-NEXT:   scf.for %[[I:.*]] = %[[ZERO]] to %[[FOUR]] step %[[ONE]] {
// CHECK-NEXT:     %[[EIGHT:.*]] = arith.constant 8 : index
// CHECK-NEXT:     scf.for %[[J:.*]] = %[[ZERO]] to %[[EIGHT]] step %[[ONE]] {
// CHECK-NEXT:       %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]] : memref<4x8xf32>
// CHECK-NEXT:       %[[E:.*]] = math.exp %[[V]] : f32
// CHECK-NEXT:       memref.store %[[E]], %[[OUT]][%[[I]], %[[J]]] : memref<4x8xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   func.return

// Every nest here is smaller than the default min_work (32768 iterations): with threads
// on they still stay serial, as handing them to workers would cost more than they do.
// SMALL-LABEL: func.func @elementwise(
// SMALL-NOT:   scf.parallel

// With threads (and min_work=1) the leading dims of a kernel's top-level box become one scf.parallel; the
// innermost stays an scf.for for the vectoriser.
// PAR-LABEL: func.func @elementwise(
// PAR:         %[[ZERO:.*]] = arith.constant 0 : index
// PAR-NEXT:    %[[ONE:.*]] = arith.constant 1 : index
// PAR-NEXT:    %[[FOUR:.*]] = arith.constant 4 : index
// PAR-NEXT:    "scf.parallel"(%[[ZERO]], %[[FOUR]], %[[ONE]])
// PAR-NEXT:    ^{{.*}}(%[[I:.*]]: index):
// PAR-NEXT:      %[[EIGHT:.*]] = arith.constant 8 : index
// PAR-NEXT:      scf.for %[[J:.*]] = %[[ZERO]] to %[[EIGHT]] step %[[ONE]] {
// PAR-NEXT:        memref.load %{{.*}}[%[[I]], %[[J]]]
// PAR:           }
// PAR-NEXT:      scf.reduce
loop.kernel @elementwise {
^bb0(%x: memref<4x8xf32>, %out: memref<4x8xf32>):
  loop.parallel [4, 8] {
  ^bb1(%i: index, %j: index):
    %v = loop.load %x[%i, %j] : memref<4x8xf32> -> f32
    %e = math.exp %v : f32
    loop.store %e, %out[%i, %j] : f32, memref<4x8xf32>
    loop.yield
  }
  loop.yield
}

// -----

// A float sum is an scf.for carrying the accumulator, combined with a reassociable addf
// (so LLVM may vectorise it); the loop's result is what the reduce gave.
// CHECK-LABEL: func.func @row_sum(
// CHECK-SAME:  %[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4xf32>) {
// CHECK-NEXT:   %[[INIT:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:        scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:          %[[SUM:.*]] = scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32) {
// CHECK-NEXT:       %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]] : memref<4x8xf32>
// CHECK-NEXT:       %[[NEXT:.*]] = arith.addf %[[ACC]], %[[V]] fastmath<reassoc,contract> : f32
// CHECK-NEXT:       scf.yield %[[NEXT]] : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     memref.store %[[SUM]], %[[OUT]][%[[I]]] : memref<4xf32>
// CHECK-NEXT:   }

// Only the top-level box runs in parallel; the reduction inside stays sequential.
// PAR-LABEL: func.func @row_sum(
// PAR:         "scf.parallel"
// PAR:           scf.for {{.*}} iter_args
// PAR:           scf.reduce
loop.kernel @row_sum {
^bb0(%x: memref<4x8xf32>, %out: memref<4xf32>):
  %z = arith.constant 0.0 : f32
  loop.parallel [4] {
  ^bb1(%i: index):
    %s = loop.reduce add [8] init(%z : f32) {
    ^bb2(%j: index):
      %v = loop.load %x[%i, %j] : memref<4x8xf32> -> f32
      loop.yield %v : f32
    }
    loop.store %s, %out[%i] : f32, memref<4xf32>
    loop.yield
  }
  loop.yield
}

// -----

// A max over two dimensions: the accumulator threads through both loops; floats combine
// with arith.maximumf. A box of no dimensions is its body, inlined.
// CHECK-LABEL: func.func @max_all(
// CHECK-SAME:  %[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<f32>) {
// CHECK-NEXT:   %[[LOWEST:.*]] = arith.constant 0xff800000 : f32
// CHECK-NOT:    scf.parallel
// CHECK:        %[[MAX:.*]] = scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[OUTER:.*]] = %[[LOWEST]]) -> (f32) {
// CHECK-NEXT:     %{{.*}} = arith.constant 8 : index
// CHECK-NEXT:     %[[ROW:.*]] = scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[INNER:.*]] = %[[OUTER]]) -> (f32) {
// CHECK-NEXT:       %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]]
// CHECK-NEXT:       %[[M:.*]] = arith.maximumf %[[INNER]], %[[V]] fastmath<nsz> : f32
// CHECK-NEXT:       scf.yield %[[M]] : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     scf.yield %[[ROW]] : f32
// CHECK-NEXT:   }
// CHECK-NEXT:   memref.store %[[MAX]], %[[OUT]][] : memref<f32>
// CHECK-NEXT:   func.return
loop.kernel @max_all {
^bb0(%x: memref<4x8xf32>, %out: memref<f32>):
  %low = arith.constant 0xFF800000 : f32
  loop.parallel [] {
    %m = loop.reduce max [4, 8] init(%low : f32) {
    ^bb1(%i: index, %j: index):
      %v = loop.load %x[%i, %j] : memref<4x8xf32> -> f32
      loop.yield %v : f32
    }
    loop.store %m, %out[] : f32, memref<f32>
    loop.yield
  }
  loop.yield
}

// -----

// The other combiners: float products reassociate too; float min, integer sum/max/min.
// CHECK-LABEL: func.func @combiners(
// CHECK:        arith.mulf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : f32
// CHECK:        arith.minimumf %{{.*}}, %{{.*}} : f32
// CHECK:        arith.addi %{{.*}}, %{{.*}} : i32
// CHECK:        arith.maxsi %{{.*}}, %{{.*}} : i32
// CHECK:        arith.minsi %{{.*}}, %{{.*}} : i32
loop.kernel @combiners {
^bb0(%x: memref<8xf32>, %y: memref<8xi32>):
  %zero = arith.constant 0.0 : f32
  %izero = arith.constant 0 : i32
  %p = loop.reduce mul [8] init(%zero : f32) {
  ^bb1(%i: index):
    %v = loop.load %x[%i] : memref<8xf32> -> f32
    loop.yield %v : f32
  }
  %n = loop.reduce min [8] init(%zero : f32) {
  ^bb1(%i: index):
    %v = loop.load %x[%i] : memref<8xf32> -> f32
    loop.yield %v : f32
  }
  %s = loop.reduce add [8] init(%izero : i32) {
  ^bb1(%i: index):
    %w = loop.load %y[%i] : memref<8xi32> -> i32
    loop.yield %w : i32
  }
  %m = loop.reduce max [8] init(%izero : i32) {
  ^bb1(%i: index):
    %w = loop.load %y[%i] : memref<8xi32> -> i32
    loop.yield %w : i32
  }
  %k = loop.reduce min [8] init(%izero : i32) {
  ^bb1(%i: index):
    %w = loop.load %y[%i] : memref<8xi32> -> i32
    loop.yield %w : i32
  }
  loop.yield
}

// -----

// loop.call becomes func.call; a function from the graph conversion (it has
// graphfuse.outputs) gets llvm.emit_c_interface, others do not.
// CHECK-LABEL: func.func @copy(%{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32>) {
// CHECK-LABEL: func.func @entry(
// CHECK-SAME:    %[[X:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<8xf32>)
// CHECK-SAME:    attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 0 : i64, llvm.emit_c_interface} {
// CHECK-NEXT:   func.call @copy(%[[X]], %[[OUT]]) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT:   func.return
// CHECK-LABEL: func.func @helper(%{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32>) {
// CHECK-NEXT:   func.call @copy
loop.kernel @copy {
^bb0(%x: memref<8xf32>, %out: memref<8xf32>):
  loop.parallel [8] {
  ^bb1(%i: index):
    %v = loop.load %x[%i] : memref<8xf32> -> f32
    loop.store %v, %out[%i] : f32, memref<8xf32>
    loop.yield
  }
  loop.yield
}
func.func @entry(%x: memref<8xf32>, %out: memref<8xf32>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 0 : i64} {
  loop.call @copy(%x, %out) : memref<8xf32>, memref<8xf32>
  func.return
}
func.func @helper(%x: memref<8xf32>, %out: memref<8xf32>) {
  loop.call @copy(%x, %out) : memref<8xf32>, memref<8xf32>
  func.return
}

// -----

// i1 buffers are byte buffers (MemRefToLLVM loads and stores no narrower element; NumPy
// keeps bools as bytes): signatures, calls and constant globals use i8, loads truncate
// and stores zero-extend.
// CHECK:       "memref.global"() <{sym_name = "mask", sym_visibility = "private", type = memref<3xi8>, initial_value = dense<[1, 0, 1]> : tensor<3xi8>, constant}>
// CHECK-LABEL: func.func @negate(%{{.*}}: memref<3xi8>, %{{.*}}: memref<3xi8>) {
// CHECK:         %[[BYTE:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<3xi8>
// CHECK-NEXT:    %[[BIT:.*]] = arith.trunci %[[BYTE]] : i8 to i1
// CHECK:         %[[NOT:.*]] = arith.xori %[[BIT]], %{{.*}} : i1
// CHECK-NEXT:    %[[WIDE:.*]] = arith.extui %[[NOT]] : i1 to i8
// CHECK-NEXT:    memref.store %[[WIDE]], %{{.*}}[%{{.*}}] : memref<3xi8>
// CHECK-LABEL: func.func @masks(
// CHECK-SAME:    %[[OUT:.*]]: memref<3xi8>)
// CHECK-NEXT:    %[[G:.*]] = memref.get_global @mask : memref<3xi8>
// CHECK-NEXT:    func.call @negate(%[[G]], %[[OUT]]) : (memref<3xi8>, memref<3xi8>) -> ()
"memref.global"() <{sym_name = "mask", sym_visibility = "private", type = memref<3xi1>, initial_value = dense<[true, false, true]> : tensor<3xi1>, constant}> : () -> ()
loop.kernel @negate {
^bb0(%m: memref<3xi1>, %out: memref<3xi1>):
  loop.parallel [3] {
  ^bb1(%i: index):
    %v = loop.load %m[%i] : memref<3xi1> -> i1
    %t = arith.constant true
    %n = arith.xori %v, %t : i1
    loop.store %n, %out[%i] : i1, memref<3xi1>
    loop.yield
  }
  loop.yield
}
func.func @masks(%out: memref<3xi1>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 0 : i64} {
  %g = memref.get_global @mask : memref<3xi1>
  loop.call @negate(%g, %out) : memref<3xi1>, memref<3xi1>
  func.return
}
