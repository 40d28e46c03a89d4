// RUN: xdsl-opt %s -p loop-tile-matmul | filecheck %s
// RUN: xdsl-opt %s -p loop-tile-matmul,convert-loop-to-upstream | %mlir-opt --verify-each > /dev/null
// REQUIRES: mlir-opt

// relu(a + b) into a 3x3 max pool at stride 2 with padding 1, [1, 8, 16, 16] -> 8x8
// (convert-graph-to-loop's form: taps past the input read the nearest row or column).
// The window's 17 columns (7 * 2 + 3) get a scratch buffer V[1, 8, 8, 17]. Column 0 lies
// left of the input (column -1) and holds -inf, the reduction's init; columns 1..16 are
// input columns 0..15, each the maximum of relu(a + b) down the window's 3 clamped rows;
// the pool then takes the maximum of V[.., ow * 2 + j] over its 3 columns j.
// CHECK-LABEL: loop.kernel @fused_add_relu_max_pool2d {
// CHECK-NEXT:  ^bb0(%[[A:.*]]: memref<1x8x16x16xf32>, %[[B:.*]]: memref<1x8x16x16xf32>, %[[Y:.*]]: memref<1x8x8x8xf32>, %[[V:.*]]: memref<1x8x8x17xf32>):
// CHECK:         %[[INF:.*]] = arith.constant 0xff800000 : f32
// CHECK:         loop.store %[[INF]], %[[V]][
// CHECK:         loop.parallel [8, 16] {
// CHECK-NEXT:    ^bb0(%[[OH:.*]]: index, %[[T:.*]]: index):
// CHECK:           loop.reduce max [3] init(%[[INF]] : f32) {
// CHECK:             %[[ROW:.*]] = arith.minsi
// CHECK-NEXT:        %[[LA:.*]] = loop.load %[[A]][%{{.*}}, %{{.*}}, %[[ROW]], %[[T]]]
// CHECK-NEXT:        %[[LB:.*]] = loop.load %[[B]][%{{.*}}, %{{.*}}, %[[ROW]], %[[T]]]
// CHECK-NEXT:        arith.addf %[[LA]], %[[LB]]
// CHECK-NEXT:        arith.maximumf
// CHECK:           loop.store %{{.*}}, %[[V]][
// CHECK:         loop.parallel [8, 8] {
// CHECK:           loop.reduce max [3] init(%[[INF]] : f32) {
// CHECK:             arith.muli
// CHECK-NEXT:        arith.addi
// CHECK-NEXT:        loop.load %[[V]][
// CHECK:           loop.store %{{.*}}, %[[Y]][

// A 2x2 pool at stride 2 without padding reads affine columns and no window overlaps
// another: it is left as it is.
// CHECK-LABEL: loop.kernel @fused_max_pool2d {
// CHECK:         loop.reduce max [2, 2]
// CHECK-LABEL: func.func @main(
// CHECK-SAME:  %{{.*}}: memref<1x8x8x17xf32>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 1 : i64}

builtin.module {
  loop.kernel @fused_add_relu_max_pool2d {
  ^bb0(%0: memref<1x8x16x16xf32>, %1: memref<1x8x16x16xf32>, %2: memref<1x8x8x8xf32>):
    %3 = arith.constant 0.000000e+00 : f32
    %4 = arith.constant 15 : index
    %5 = arith.constant 0 : index
    %6 = arith.constant -1 : index
    %7 = arith.constant 2 : index
    %8 = arith.constant 0xff800000 : f32
    loop.parallel [1, 8, 8, 8] {
    ^bb0(%9: index, %10: index, %11: index, %12: index):
      %13 = loop.reduce max [3, 3] init(%8 : f32) {
      ^bb0(%14: index, %15: index):
        %16 = arith.muli %11, %7 : index
        %17 = arith.addi %16, %6 : index
        %18 = arith.addi %17, %14 : index
        %19 = arith.muli %12, %7 : index
        %20 = arith.addi %19, %6 : index
        %21 = arith.addi %20, %15 : index
        %22 = arith.maxsi %18, %5 : index
        %23 = arith.minsi %22, %4 : index
        %24 = arith.maxsi %21, %5 : index
        %25 = arith.minsi %24, %4 : index
        %26 = loop.load %0[%5, %10, %23, %25] : memref<1x8x16x16xf32> -> f32
        %27 = loop.load %1[%5, %10, %23, %25] : memref<1x8x16x16xf32> -> f32
        %28 = arith.addf %26, %27 : f32
        %29 = arith.maximumf %28, %3 fastmath<nsz> : f32
        loop.yield %29 : f32
      }
      loop.store %13, %2[%5, %10, %11, %12] : f32, memref<1x8x8x8xf32>
      loop.yield
    }
    loop.yield
  }
  loop.kernel @fused_max_pool2d {
  ^bb0(%0: memref<1x8x16x16xf32>, %1: memref<1x8x8x8xf32>):
    %2 = arith.constant 0 : index
    %3 = arith.constant 2 : index
    %4 = arith.constant 0xff800000 : f32
    loop.parallel [1, 8, 8, 8] {
    ^bb0(%5: index, %6: index, %7: index, %8: index):
      %9 = loop.reduce max [2, 2] init(%4 : f32) {
      ^bb0(%10: index, %11: index):
        %12 = arith.muli %7, %3 : index
        %13 = arith.addi %12, %10 : index
        %14 = arith.muli %8, %3 : index
        %15 = arith.addi %14, %11 : index
        %16 = loop.load %0[%2, %6, %13, %15] : memref<1x8x16x16xf32> -> f32
        loop.yield %16 : f32
      }
      loop.store %9, %1[%2, %6, %7, %8] : f32, memref<1x8x8x8xf32>
      loop.yield
    }
    loop.yield
  }
  func.func @main(%a: memref<1x8x16x16xf32>, %b: memref<1x8x16x16xf32>, %0: memref<1x8x8x8xf32>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 0 : i64} {
    loop.call @fused_add_relu_max_pool2d(%a, %b, %0) : memref<1x8x16x16xf32>, memref<1x8x16x16xf32>, memref<1x8x8x8xf32>
    func.return
  }
}
