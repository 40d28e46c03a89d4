// RUN: xdsl-opt %s -p loop-plan-scratch | filecheck %s

// Scratch buffers live over calls [first, last]: %a [0, 1], %b [1, 2], %c [2, 3]; %p is
// a kernel's persistent argument (live throughout) and %u is never used. Largest first:
// %c at 0; %a at 0 (never live with %c); %b past both, at 128; %p past everything, at
// 192; %u anywhere (0).
// CHECK-LABEL: func.func @entry(
// CHECK-SAME:  graphfuse.scratch_offsets = array<i64: 0, 128, 0, 192, 0>
builtin.module {
  loop.kernel @k {
  ^bb0(%i: memref<16xf32>, %o: memref<16xf32>):
    loop.yield
  }
  loop.kernel @widen {
  ^bb0(%i: memref<16xf32>, %o: memref<32xf32>):
    loop.yield
  }
  loop.kernel @narrow {
  ^bb0(%i: memref<32xf32>, %o: memref<16xf32>):
    loop.yield
  }
  loop.kernel @packs attributes {graphfuse.persistent = array<i64: 1>} {
  ^bb0(%i: memref<16xf32>, %o: memref<8xf32>):
    loop.yield
  }
  func.func @entry(%x: memref<16xf32>, %out: memref<16xf32>, %a: memref<16xf32>, %b: memref<16xf32>, %c: memref<32xf32>, %p: memref<8xf32>, %u: memref<4xf32>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 5 : i64} {
    loop.call @k(%x, %a) : memref<16xf32>, memref<16xf32>
    loop.call @k(%a, %b) : memref<16xf32>, memref<16xf32>
    loop.call @widen(%b, %c) : memref<16xf32>, memref<32xf32>
    loop.call @narrow(%c, %out) : memref<32xf32>, memref<16xf32>
    loop.call @packs(%x, %p) : memref<16xf32>, memref<8xf32>
    func.return
  }
}
