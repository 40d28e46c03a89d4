// RUN: xdsl-opt %s -p loop-tile-matmul | filecheck %s
// RUN: xdsl-opt %s -p 'loop-tile-matmul{threads=true}' | filecheck %s --check-prefix=PAR
// RUN: xdsl-opt %s -p loop-tile-matmul,convert-loop-to-upstream | %mlir-opt --verify-each > /dev/null
// REQUIRES: mlir-opt

// relu(A @ B + bias), 24x96 @ 96x40 (convert-graph-to-loop's form of it): the kernel gains
// a scratch buffer for the packed B, Bp[1][1][96][16] (one task on one thread, packing
// its three 16-column panels, the last padded, one at a time into its slot), which the
// caller passes and counts. A, read at [m, k], is read in place.
// CHECK-LABEL: loop.kernel @fused_matmul_add_relu {
// CHECK-NEXT:  ^bb0(%[[A:.*]]: memref<24x96xf32>, %{{.*}}: memref<96x40xf32>, %{{.*}}: memref<40xf32>, %{{.*}}: memref<24x40xf32>, %[[BP:.*]]: memref<1x1x96x16xf32>):
// CHECK-NOT:   loop.reduce
// The last panel (8 columns below N, one vector) comes first, in the then-branch of the
// test for it: the 4 row tiles go in pairs there, each pair one 12x8 tile (per k one
// vector load of the panel, twelve broadcasts of A, twelve FMAs: as many accumulators as
// a full tile's, TilePlan.paired_rows).
// CHECK:       scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK-NEXT:    vector.load %[[BP]]
// CHECK-NEXT:    loop.load %[[A]]
// CHECK-NEXT:    vector.broadcast
// CHECK-NEXT:    vector.fma
// CHECK-NEXT:    loop.load %[[A]]
// CHECK-COUNT-11: vector.fma
// The other panels: each pair is two 6x16 tiles, per k two vector loads of the panel, six
// broadcasts of A, twelve FMAs.
// CHECK:       scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// CHECK-NEXT:    vector.load %[[BP]]
// CHECK-NEXT:    vector.load %[[BP]]
// CHECK-NEXT:    loop.load %[[A]]
// CHECK-NEXT:    vector.broadcast
// CHECK-NEXT:    vector.fma
// CHECK-NEXT:    vector.fma
// CHECK-COUNT-10: vector.fma
// The epilogue (bias, relu) 8 columns at a time, from the sums' registers; the last
// panel's 8 columns are one such group.
// CHECK:       arith.addf {{.*}} : vector<8xf32>
// CHECK:       arith.maximumf {{.*}} : vector<8xf32>
// CHECK-NEXT:  vector.store {{.*}} : memref<24x40xf32>, vector<8xf32>
// CHECK-LABEL: func.func @main(
// CHECK-SAME:  memref<24x40xf32>, %[[S1:.*]]: memref<1x1x96x16xf32>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 1 : i64}
// CHECK-NEXT:  loop.call @fused_matmul_add_relu(

// With threads, a GEMM this small (92 k multiply-adds, below tile_plan.MIN_THREADED_MACS)
// still runs on the calling thread: its fork and join would cost more than a second core
// saves (tests/lowering/cpu/test_matmul_tiling.py covers the threaded form).
// PAR-NOT:     "scf.parallel"
// PAR:         func.func @main

builtin.module {
  loop.kernel @fused_matmul_add_relu {
  ^bb0(%0: memref<24x96xf32>, %1: memref<96x40xf32>, %2: memref<40xf32>, %3: memref<24x40xf32>):
    %4 = arith.constant 0.000000e+00 : f32
    loop.parallel [24, 40] {
    ^bb0(%5: index, %6: index):
      %7 = loop.reduce add [96] init(%4 : f32) {
      ^bb0(%8: index):
        %9 = loop.load %0[%5, %8] : memref<24x96xf32> -> f32
        %10 = loop.load %1[%8, %6] : memref<96x40xf32> -> f32
        %11 = arith.mulf %9, %10 : f32
        loop.yield %11 : f32
      }
      %12 = loop.load %2[%6] : memref<40xf32> -> f32
      %13 = arith.addf %7, %12 : f32
      %14 = arith.maximumf %13, %4 : f32
      loop.store %14, %3[%5, %6] : f32, memref<24x40xf32>
      loop.yield
    }
    loop.yield
  }
  func.func @main(%0: memref<24x96xf32>, %1: memref<96x40xf32>, %2: memref<40xf32>, %3: memref<24x40xf32>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 0 : i64} {
    loop.call @fused_matmul_add_relu(%0, %1, %2, %3) : memref<24x96xf32>, memref<96x40xf32>, memref<40xf32>, memref<24x40xf32>
    func.return
  }
}

