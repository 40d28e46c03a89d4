// RUN: xdsl-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s
// One verifier rule per split; the expected message sits right under the bad op.

loop.kernel @kernel_arg {
// CHECK: argument #0 has type tensor<4xf32>, expected a memref
^bb0(%x: tensor<4xf32>):
  loop.yield
}

// -----

loop.kernel @kernel_end {
// CHECK: body must end with loop.yield
^bb0(%x: memref<4xf32>):
  "test.termop"() : () -> ()
}

// -----

loop.kernel @parallel_args {
^bb0(%x: memref<4x8xf32>):
  loop.parallel [4, 8] {
  // CHECK: loop.parallel body has 1 arguments, expected 2 (one index per bound)
  ^bb1(%i: index):
    loop.yield
  }
  loop.yield
}

// -----

loop.kernel @parallel_arg_type {
^bb0(%x: memref<4xf32>):
  loop.parallel [4] {
  // CHECK: loop.parallel body argument #0 has type i64, expected index
  ^bb1(%i: i64):
    loop.yield
  }
  loop.yield
}

// -----

loop.kernel @parallel_bound {
^bb0(%x: memref<4xf32>):
  loop.parallel [4, 0] {
  // CHECK: bound #1 is 0, expected at least 1
  ^bb1(%i: index, %j: index):
    loop.yield
  }
  loop.yield
}

// -----

loop.kernel @parallel_yield {
^bb0(%x: memref<4xf32>):
  loop.parallel [4] {
  // CHECK: body must end with a loop.yield of no values
  ^bb1(%i: index):
    %v = loop.load %x[%i] : memref<4xf32> -> f32
    loop.yield %v : f32
  }
  loop.yield
}

// -----

loop.kernel @reduce_args {
^bb0(%x: memref<4xf32>):
  %z = arith.constant 0.0 : f32
  %s = loop.reduce add [4] init(%z : f32) {
  // CHECK: loop.reduce body has 2 arguments, expected 1 (one index per bound)
  ^bb1(%i: index, %j: index):
    loop.yield %z : f32
  }
  loop.yield
}

// -----

loop.kernel @reduce_arg_type {
^bb0(%x: memref<4xf32>):
  %z = arith.constant 0.0 : f32
  %s = loop.reduce add [4] init(%z : f32) {
  // CHECK: loop.reduce body argument #0 has type f32, expected index
  ^bb1(%i: f32):
    loop.yield %z : f32
  }
  loop.yield
}

// -----

loop.kernel @reduce_bound {
^bb0(%x: memref<4xf32>):
  %z = arith.constant 0.0 : f32
  %s = loop.reduce add [-1] init(%z : f32) {
  // CHECK: bound #0 is -1, expected at least 1
  ^bb1(%i: index):
    loop.yield %z : f32
  }
  loop.yield
}

// -----

loop.kernel @reduce_yield_type {
^bb0(%x: memref<4xf16>):
  %z = arith.constant 0.0 : f32
  %s = loop.reduce add [4] init(%z : f32) {
  // CHECK: body yields f16, expected f32 (the init type)
  ^bb1(%i: index):
    %v = loop.load %x[%i] : memref<4xf16> -> f16
    loop.yield %v : f16
  }
  loop.yield
}

// -----

loop.kernel @reduce_yield_count {
^bb0(%x: memref<4xf32>):
  %z = arith.constant 0.0 : f32
  %s = loop.reduce add [4] init(%z : f32) {
  // CHECK: body must end with a loop.yield of one value
  ^bb1(%i: index):
    loop.yield
  }
  loop.yield
}

// -----

loop.kernel @reduce_result {
^bb0(%x: memref<4xf32>):
  %z = arith.constant 0.0 : f32
  %s = "loop.reduce"(%z) <{kind = #loop<reduce_kind add>, bounds = array<i64: 4>}> ({
  // CHECK: attribute f32 expected from variable 'T', but got f16
  ^bb1(%i: index):
    loop.yield %z : f32
  }) : (f32) -> f16
  loop.yield
}

// -----

loop.kernel @reduce_kind {
^bb0(%x: memref<4xf32>):
  %z = arith.constant 0.0 : f32
  %s = loop.reduce avg [4] init(%z : f32) {
  // CHECK: Expected `add`, `mul`, `max`, `min`, `umax`, or `umin`.
  ^bb1(%i: index):
    loop.yield %z : f32
  }
  loop.yield
}

// -----

loop.kernel @load_indices {
^bb0(%x: memref<4x8xf32>):
  loop.parallel [4] {
  ^bb1(%i: index):
    %v = loop.load %x[%i] : memref<4x8xf32> -> f32
    // CHECK: 1 indices for a buffer of rank 2
    loop.yield
  }
  loop.yield
}

// -----

loop.kernel @load_type {
^bb0(%x: memref<4xf32>):
  loop.parallel [4] {
  ^bb1(%i: index):
    %v = loop.load %x[%i] : memref<4xf32> -> f16
    // CHECK: result has type f16, expected f32
    loop.yield
  }
  loop.yield
}

// -----

loop.kernel @load_index_type {
^bb0(%x: memref<4xf32>):
  %c = arith.constant 0 : i64
  %v = "loop.load"(%x, %c) : (memref<4xf32>, i64) -> f32
  // CHECK: i64 should be of base attribute index
  loop.yield
}

// -----

loop.kernel @load_buffer {
^bb0(%x: memref<4xf32>):
  %c = arith.constant 0 : index
  %t = "test.op"() : () -> tensor<4xf32>
  %v = "loop.load"(%t, %c) : (tensor<4xf32>, index) -> f32
  // CHECK: tensor<4xf32> should be of base attribute memref
  loop.yield
}

// -----

loop.kernel @store_indices {
^bb0(%x: memref<4xf32>):
  %z = arith.constant 0.0 : f32
  loop.parallel [4] {
  ^bb1(%i: index):
    loop.store %z, %x[%i, %i] : f32, memref<4xf32>
    // CHECK: 2 indices for a buffer of rank 1
    loop.yield
  }
  loop.yield
}

// -----

loop.kernel @store_type {
^bb0(%x: memref<4xf16>):
  %z = arith.constant 0.0 : f32
  loop.parallel [4] {
  ^bb1(%i: index):
    loop.store %z, %x[%i] : f32, memref<4xf16>
    // CHECK: stored value has type f32, expected f16
    loop.yield
  }
  loop.yield
}

// -----

loop.kernel @k {
^bb0(%x: memref<4xf32>, %out: memref<4xf32>):
  loop.yield
}
func.func @call_types(%x: memref<4xf32>, %out: memref<8xf32>) {
  loop.call @k(%x, %out) : memref<4xf32>, memref<8xf32>
  // CHECK: buffers have types (memref<4xf32>, memref<8xf32>), expected (memref<4xf32>, memref<4xf32>) (the kernel's arguments)
  func.return
}

// -----

loop.kernel @k {
^bb0(%x: memref<4xf32>, %out: memref<4xf32>):
  loop.yield
}
func.func @call_count(%x: memref<4xf32>) {
  loop.call @k(%x) : memref<4xf32>
  // CHECK: buffers have types (memref<4xf32>), expected (memref<4xf32>, memref<4xf32>) (the kernel's arguments)
  func.return
}

// -----

func.func @call_tensor(%x: tensor<4xf32>) {
  loop.call @k(%x) : tensor<4xf32>
  // CHECK: tensor<4xf32> should be of base attribute memref
  func.return
}

// -----

func.func @not_a_kernel(%x: memref<4xf32>) {
  func.return
}
func.func @call_func(%x: memref<4xf32>) {
  loop.call @not_a_kernel(%x) : memref<4xf32>
  // CHECK: 'not_a_kernel' is not a loop.kernel
  func.return
}

// -----

func.func @call_missing(%x: memref<4xf32>) {
  loop.call @nowhere(%x) : memref<4xf32>
  // CHECK: 'nowhere' is not a loop.kernel
  func.return
}

// -----

func.func @yield_parent() {
  loop.yield
  // CHECK: 'loop.yield' expects parent op to be one of 'loop.kernel', 'loop.parallel', 'loop.reduce'
}
