// RUN: xdsl-opt %s -p loop-tile-matmul --split-input-file | filecheck %s
// RUN: xdsl-opt %s -p loop-tile-matmul,convert-loop-to-upstream --split-input-file | %mlir-opt --split-input-file --verify-each > /dev/null
// REQUIRES: mlir-opt

// relu(A @ B + bias) + R, 24x96 @ 96x48: every panel is full (48 = 3 x 16) and the columns
// are the output's last dimension, so each tile row runs the epilogue on 8 columns at a
// time: the sums straight from the tile loop's accumulators, the bias (per column) and the
// residual as vector loads, relu as a vector maximumf, one vector store. A compare of lane
// values keeps the scalar epilogue (xDSL's compares give i1 only).
// CHECK-LABEL: loop.kernel @fused_matmul_add_relu_add {
// CHECK:       %[[SUMS:[0-9]+]], %{{.*}} = scf.for
// CHECK:       vector.fma
// CHECK:       %[[BIAS:.*]] = vector.load %{{.*}}[%{{.*}}] : memref<48xf32>, vector<8xf32>
// CHECK-NEXT:  %[[S:.*]] = arith.addf %[[SUMS]], %[[BIAS]] : vector<8xf32>
// CHECK-NEXT:  %[[ZERO:.*]] = vector.broadcast %{{.*}} : f32 to vector<8xf32>
// CHECK-NEXT:  %[[RELU:.*]] = arith.maximumf %[[S]], %[[ZERO]] fastmath<nsz> : vector<8xf32>
// CHECK-NEXT:  %[[RES:.*]] = vector.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<24x48xf32>, vector<8xf32>
// CHECK-NEXT:  %[[Y:.*]] = arith.addf %[[RELU]], %[[RES]] : vector<8xf32>
// CHECK-NEXT:  vector.store %[[Y]], %{{.*}}[%{{.*}}, %{{.*}}] : memref<24x48xf32>, vector<8xf32>
// No point-by-point epilogue is left.
// CHECK-NOT:   loop.store

builtin.module {
  loop.kernel @fused_matmul_add_relu_add {
  ^bb0(%0: memref<24x96xf32>, %1: memref<96x48xf32>, %2: memref<48xf32>, %r: memref<24x48xf32>, %3: memref<24x48xf32>):
    %4 = arith.constant 0.000000e+00 : f32
    loop.parallel [24, 48] {
    ^bb0(%5: index, %6: index):
      %7 = loop.reduce add [96] init(%4 : f32) {
      ^bb0(%8: index):
        %9 = loop.load %0[%5, %8] : memref<24x96xf32> -> f32
        %10 = loop.load %1[%8, %6] : memref<96x48xf32> -> f32
        %11 = arith.mulf %9, %10 : f32
        loop.yield %11 : f32
      }
      %12 = loop.load %2[%6] : memref<48xf32> -> f32
      %13 = arith.addf %7, %12 : f32
      %14 = arith.maximumf %13, %4 fastmath<nsz> : f32
      %15 = loop.load %r[%5, %6] : memref<24x48xf32> -> f32
      %16 = arith.addf %14, %15 : f32
      loop.store %16, %3[%5, %6] : f32, memref<24x48xf32>
      loop.yield
    }
    loop.yield
  }
  func.func @main(%0: memref<24x96xf32>, %1: memref<96x48xf32>, %2: memref<48xf32>, %r: memref<24x48xf32>, %3: memref<24x48xf32>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 0 : i64} {
    loop.call @fused_matmul_add_relu_add(%0, %1, %2, %r, %3) : memref<24x96xf32>, memref<96x48xf32>, memref<48xf32>, memref<24x48xf32>, memref<24x48xf32>
    func.return
  }
}

// -----

// CHECK-LABEL: loop.kernel @compare_stays_scalar {
// CHECK-NOT:   vector.store {{.*}} : memref<24x48xf32>
// CHECK:       arith.cmpf olt, %{{.*}}, %{{.*}} : f32
// CHECK:       loop.store

builtin.module {
  loop.kernel @compare_stays_scalar {
  ^bb0(%0: memref<24x96xf32>, %1: memref<96x48xf32>, %3: memref<24x48xf32>):
    %4 = arith.constant 0.000000e+00 : f32
    loop.parallel [24, 48] {
    ^bb0(%5: index, %6: index):
      %7 = loop.reduce add [96] init(%4 : f32) {
      ^bb0(%8: index):
        %9 = loop.load %0[%5, %8] : memref<24x96xf32> -> f32
        %10 = loop.load %1[%8, %6] : memref<96x48xf32> -> f32
        %11 = arith.mulf %9, %10 : f32
        loop.yield %11 : f32
      }
      %neg = arith.cmpf olt, %7, %4 : f32
      %14 = arith.select %neg, %4, %7 : f32
      loop.store %14, %3[%5, %6] : f32, memref<24x48xf32>
      loop.yield
    }
    loop.yield
  }
  func.func @main(%0: memref<24x96xf32>, %1: memref<96x48xf32>, %3: memref<24x48xf32>) attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 0 : i64} {
    loop.call @compare_stays_scalar(%0, %1, %3) : memref<24x96xf32>, memref<96x48xf32>, memref<24x48xf32>
    func.return
  }
}
