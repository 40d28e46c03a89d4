// RUN: xdsl-opt %s -p 'loop-tile-matmul{lanes=16}' | filecheck %s

// Attention's query split into heads ([B, S, H x D] read at column 8 h + k) beside a
// transposed copy of K into scratch: the copy and the product run plane by plane, and the
// query, a kernel input read at a stride of 8 along its columns, keeps its layout (its
// columns are not moved into phases: the caller wrote them, not this kernel). The scratch
// copy is the only buffer the kernel lays out.
// CHECK:       loop.kernel @fused_reshape_transpose_matmul
// CHECK:       loop.parallel [2, 9, 1] {
// CHECK:         %[[H8:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK-NEXT:    %[[COL:.*]] = arith.addi %[[H8]], %{{.*}} : index
// CHECK-NEXT:    loop.load %0[%{{.*}}, %{{.*}}, %[[COL]]] : memref<2x4x72xf32> -> f32
// CHECK-NOT:   arith.remui
// CHECK:       func.func @main
builtin.module {
  loop.kernel @fused_reshape_transpose_matmul {
  ^bb0(%0: memref<2x4x72xf32>, %1: memref<2x9x8x6xf32>, %2: memref<2x9x4x6xf32>, %3: memref<2x9x6x8xf32>):
    %4 = arith.constant 8 : index
    %5 = arith.constant 0.000000e+00 : f32
    loop.parallel [2, 9, 6, 8] {
    ^bb0(%6: index, %7: index, %8: index, %9: index):
      %10 = loop.load %1[%6, %7, %9, %8] : memref<2x9x8x6xf32> -> f32
      loop.store %10, %3[%6, %7, %8, %9] : f32, memref<2x9x6x8xf32>
      loop.yield
    }
    loop.parallel [2, 9, 4, 6] {
    ^bb0(%11: index, %12: index, %13: index, %14: index):
      %15 = loop.reduce add [8] init(%5 : f32) {
      ^bb0(%16: index):
        %17 = arith.muli %12, %4 : index
        %18 = arith.addi %17, %16 : index
        %19 = loop.load %0[%11, %13, %18] : memref<2x4x72xf32> -> f32
        %20 = loop.load %3[%11, %12, %14, %16] : memref<2x9x6x8xf32> -> f32
        %21 = arith.mulf %19, %20 : f32
        loop.yield %21 : f32
      }
      loop.store %15, %2[%11, %12, %13, %14] : f32, memref<2x9x4x6xf32>
      loop.yield
    }
    loop.yield
  }
  func.func @main(%Q: memref<2x4x72xf32>, %KT: memref<2x9x8x6xf32>, %0: memref<2x9x4x6xf32>, %1: memref<2x9x6x8xf32>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 1 : i64} {
    loop.call @fused_reshape_transpose_matmul(%Q, %KT, %0, %1) : memref<2x4x72xf32>, memref<2x9x8x6xf32>, memref<2x9x4x6xf32>, memref<2x9x6x8xf32>
    func.return
  }
}

