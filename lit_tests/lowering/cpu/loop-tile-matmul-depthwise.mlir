// RUN: xdsl-opt %s -p 'loop-tile-matmul{lanes=16}' | filecheck %s

// A depthwise 3x3 convolution (batch 1, 16 channels, 4x4 rows: narrower than half a
// vector) with a bias: the padded copy's border fills (top and bottom rows, left and right
// columns, channels innermost) write a channels-last copy instead; its interior is copied
// by 8x8 transposes along each 4x4 plane (24 shuffles); the weights are copied to
// [1, 3, 3, C], and the convolution runs over [N, Ho, Wo, C] with its 9 taps unrolled (no
// loop.reduce left), the bias added and stored channels-last into scratch; 8x8 transposes
// (24 shuffles) move that to the NCHW output, viewed as [N, C, Ho x Wo].
// CHECK:       loop.kernel @fused_conv2d_add
// CHECK-NEXT:  ^bb0(%[[IN:[0-9]+]]: memref<1x16x4x4xf32>, %{{.*}}, %[[OUT:[0-9]+]]: memref<1x16x4x4xf32>, %[[PAD:[0-9]+]]: memref<1x16x6x6xf32>, %[[IMG:[0-9]+]]: memref<1x6x6x16xf32>, %[[WT:[0-9]+]]: memref<1x3x3x16xf32>, %[[CL:[0-9]+]]: memref<1x4x4x16xf32>)
// CHECK-NEXT:  {{.*}}
// CHECK:       loop.parallel [1, 1, 6, 16] {
// CHECK-COUNT-4: loop.store %{{.*}}, %[[IMG]][
// CHECK:       memref.collapse_shape %[[IN]] {{.*}} into memref<1x16x16xf32>
// CHECK-COUNT-24: vector.shuffle
// CHECK:       vector.store %{{.*}}, %[[IMG]][
// CHECK:       loop.parallel [1, 3, 3, 16] {
// CHECK:         loop.store %{{.*}}, %[[WT]][
// CHECK:       loop.parallel [1, 4, 4, 16] {
// CHECK-COUNT-9: loop.load %[[IMG]]
// CHECK-NOT:   loop.reduce
// CHECK:         arith.addf
// CHECK:         loop.store %{{.*}}, %[[CL]][
// CHECK:       %[[FLAT:.*]] = memref.collapse_shape %[[OUT]] {{.*}} into memref<1x16x16xf32>
// CHECK-COUNT-24: vector.shuffle
// CHECK:       vector.store %{{.*}}, %[[FLAT]][
// CHECK-NOT:   loop.reduce
// CHECK-NOT:   %[[PAD]]
// CHECK:       func.func @main

builtin.module {
  loop.kernel @fused_conv2d_add {
  ^bb0(%0: memref<1x16x4x4xf32>, %1: memref<16x1x3x3xf32>, %2: memref<1x16x1x1xf32>, %3: memref<1x16x4x4xf32>, %4: memref<1x16x6x6xf32>):
    %5 = arith.constant 3 : index
    %6 = arith.constant 4 : index
    %7 = arith.constant 0 : index
    %8 = arith.constant 0.000000e+00 : f32
    %9 = arith.constant -1 : index
    loop.parallel [1, 16, 6, 6] {
    ^bb0(%10: index, %11: index, %12: index, %13: index):
      %14 = arith.addi %12, %9 : index
      %15 = arith.addi %13, %9 : index
      %16 = arith.cmpi sge, %14, %7 : index
      %17 = arith.cmpi slt, %14, %6 : index
      %18 = arith.andi %16, %17 : i1
      %19 = arith.cmpi sge, %15, %7 : index
      %20 = arith.cmpi slt, %15, %6 : index
      %21 = arith.andi %19, %20 : i1
      %22 = arith.andi %18, %21 : i1
      %23 = arith.maxsi %14, %7 : index
      %24 = arith.minsi %23, %5 : index
      %25 = arith.maxsi %15, %7 : index
      %26 = arith.minsi %25, %5 : index
      %27 = loop.load %0[%7, %11, %24, %26] : memref<1x16x4x4xf32> -> f32
      %28 = arith.select %22, %27, %8 : f32
      loop.store %28, %4[%7, %11, %12, %13] : f32, memref<1x16x6x6xf32>
      loop.yield
    }
    loop.parallel [1, 16, 4, 4] {
    ^bb0(%29: index, %30: index, %31: index, %32: index):
      %33 = loop.reduce add [1, 3, 3] init(%8 : f32) {
      ^bb0(%34: index, %35: index, %36: index):
        %37 = arith.addi %31, %35 : index
        %38 = arith.addi %32, %36 : index
        %39 = loop.load %4[%7, %30, %37, %38] : memref<1x16x6x6xf32> -> f32
        %40 = loop.load %1[%30, %7, %35, %36] : memref<16x1x3x3xf32> -> f32
        %41 = arith.mulf %39, %40 : f32
        loop.yield %41 : f32
      }
      %42 = loop.load %2[%7, %30, %7, %7] : memref<1x16x1x1xf32> -> f32
      %43 = arith.addf %33, %42 : f32
      loop.store %43, %3[%7, %30, %31, %32] : f32, memref<1x16x4x4xf32>
      loop.yield
    }
    loop.yield
  }
  func.func @main(%0: memref<1x16x4x4xf32>, %1: memref<16x1x3x3xf32>, %2: memref<1x16x1x1xf32>, %3: memref<1x16x4x4xf32>, %4: memref<1x16x6x6xf32>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 1 : i64} {
    loop.call @fused_conv2d_add(%0, %1, %2, %3, %4) : memref<1x16x4x4xf32>, memref<16x1x3x3xf32>, memref<1x16x1x1xf32>, memref<1x16x4x4xf32>, memref<1x16x6x6xf32>
    func.return
  }
}
