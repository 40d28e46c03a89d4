// RUN: xdsl-opt %s -p loop-tile-matmul | filecheck %s
// RUN: xdsl-opt %s -p loop-tile-matmul,convert-loop-to-upstream | %mlir-opt --verify-each > /dev/null
// REQUIRES: mlir-opt

// relu(A @ B + D @ E) as one nest with two reductions (a fused downsampling block's two
// convolutions have this form): the first moves to a nest of its own that stores its sums
// into a scratch buffer of the nest's shape, the second's epilogue loads them; both are
// tiled (two 6x16 tile loops; on one thread each GEMM is one task, packing its panels one
// at a time into one slot) and the caller passes the scratch.
// CHECK-LABEL: loop.kernel @two_contractions {
// CHECK-NEXT:  ^bb0(%{{.*}}: memref<32x64xf32>, %{{.*}}: memref<64x64xf32>, %{{.*}}: memref<32x48xf32>, %{{.*}}: memref<48x64xf32>, %{{.*}}: memref<32x64xf32>, %[[SUMS:.*]]: memref<32x64xf32>,
// CHECK-NOT:   loop.reduce
// CHECK:       vector.store {{.*}}, %[[SUMS]]
// CHECK:       vector.load %[[SUMS]]
// CHECK-NOT:   loop.reduce
// CHECK-LABEL: func.func @main(
// CHECK-SAME:  %{{.*}}: memref<32x64xf32>, %{{.*}}: memref<1x1x64x16xf32>, %{{.*}}: memref<1x1x48x16xf32>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 3 : i64}

builtin.module {
  loop.kernel @two_contractions {
  ^bb0(%a: memref<32x64xf32>, %b: memref<64x64xf32>, %d: memref<32x48xf32>, %e: memref<48x64xf32>, %y: memref<32x64xf32>):
    %zero = arith.constant 0.000000e+00 : f32
    loop.parallel [32, 64] {
    ^bb0(%m: index, %n: index):
      %s1 = loop.reduce add [64] init(%zero : f32) {
      ^bb0(%k: index):
        %1 = loop.load %a[%m, %k] : memref<32x64xf32> -> f32
        %2 = loop.load %b[%k, %n] : memref<64x64xf32> -> f32
        %3 = arith.mulf %1, %2 : f32
        loop.yield %3 : f32
      }
      %s2 = loop.reduce add [48] init(%zero : f32) {
      ^bb0(%j: index):
        %4 = loop.load %d[%m, %j] : memref<32x48xf32> -> f32
        %5 = loop.load %e[%j, %n] : memref<48x64xf32> -> f32
        %6 = arith.mulf %4, %5 : f32
        loop.yield %6 : f32
      }
      %7 = arith.addf %s1, %s2 : f32
      %8 = arith.maximumf %7, %zero : f32
      loop.store %8, %y[%m, %n] : f32, memref<32x64xf32>
      loop.yield
    }
    loop.yield
  }
  func.func @main(%a: memref<32x64xf32>, %b: memref<64x64xf32>, %d: memref<32x48xf32>, %e: memref<48x64xf32>, %y: memref<32x64xf32>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 0 : i64} {
    loop.call @two_contractions(%a, %b, %d, %e, %y) : memref<32x64xf32>, memref<64x64xf32>, memref<32x48xf32>, memref<48x64xf32>, memref<32x64xf32>
    func.return
  }
}
