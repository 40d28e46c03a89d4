// RUN: xdsl-opt %s -p convert-graph-to-loop --split-input-file --verify-diagnostics | filecheck %s
// The input is already fused (graph.fused written out), so each case fixes the kernel it
// lowers; --verify-diagnostics prints the message of the splits the pass refuses.

// One loop over the result; the broadcast operands load through their index maps (a
// trailing 8 reads [j], a 4x1 reads [i, 0]) and nothing in between is stored.
// CHECK-LABEL: loop.kernel @fused_add_mul_exp {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<8xf32>, %[[C:.*]]: memref<4x1xf32>, %[[OUT:.*]]: memref<4x8xf32>):
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:   loop.parallel [4, 8] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT:     %[[XV:.*]] = loop.load %[[X]][%[[I]], %[[J]]] : memref<4x8xf32> -> f32
// CHECK-NEXT:     %[[BV:.*]] = loop.load %[[B]][%[[J]]] : memref<8xf32> -> f32
// CHECK-NEXT:     %[[SUM:.*]] = arith.addf %[[XV]], %[[BV]] : f32
// CHECK-NEXT:     %[[CV:.*]] = loop.load %[[C]][%[[I]], %[[ZERO]]] : memref<4x1xf32> -> f32
// CHECK-NEXT:     %[[PROD:.*]] = arith.mulf %[[SUM]], %[[CV]] : f32
// CHECK-NEXT:     %[[EXP:.*]] = math.exp %[[PROD]] : f32
// CHECK-NEXT:     loop.store %[[EXP]], %[[OUT]][%[[I]], %[[J]]] : f32, memref<4x8xf32>
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.yield
// CHECK-NEXT: }
// CHECK-LABEL: func.func @elementwise_broadcast(
// CHECK-SAME: %[[FX:.*]]: memref<4x8xf32>, %[[FB:.*]]: memref<8xf32>, %[[FC:.*]]: memref<4x1xf32>, %[[FOUT:.*]]: memref<4x8xf32>)
// CHECK-SAME: attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 0 : i64}
// CHECK-NEXT: loop.call @fused_add_mul_exp(%[[FX]], %[[FB]], %[[FC]], %[[FOUT]])
// CHECK-NEXT: func.return
func.func @elementwise_broadcast(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %0 = graph.fused "fused_add_mul_exp"(%x, %b, %c) kind = broadcast : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32> {
  ^bb0(%xa: tensor<4x8xf32>, %ba: tensor<8xf32>, %ca: tensor<4x1xf32>):
    %a = graph.add %xa, %ba : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %m = graph.mul %a, %ca : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %e = graph.exp %m : tensor<4x8xf32>
    graph.yield %e : tensor<4x8xf32>
  }
  func.return %0 : tensor<4x8xf32>
}

// -----

// Two results of one shape: one loop stores both, the shared exp computed once.
// CHECK-LABEL: loop.kernel @fused_exp_neg {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<8xf32>, %[[OUT0:.*]]: memref<8xf32>, %[[OUT1:.*]]: memref<8xf32>):
// CHECK-NEXT:   loop.parallel [8] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index):
// CHECK-NEXT:     %[[V:.*]] = loop.load %[[X]][%[[I]]]
// CHECK-NEXT:     %[[E:.*]] = math.exp %[[V]] : f32
// CHECK-NEXT:     loop.store %[[E]], %[[OUT0]][%[[I]]]
// CHECK-NEXT:     %[[N:.*]] = arith.negf %[[E]] : f32
// CHECK-NEXT:     loop.store %[[N]], %[[OUT1]][%[[I]]]
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.yield
// CHECK-LABEL: func.func @two_results(
// CHECK-SAME: attributes {graphfuse.outputs = 2 : i64, graphfuse.scratch = 0 : i64}
func.func @two_results(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0, %1 = graph.fused "fused_exp_neg"(%x) kind = elemwise : (tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  ^bb0(%xa: tensor<8xf32>):
    %e = graph.exp %xa : tensor<8xf32>
    %n = graph.neg %e : tensor<8xf32>
    graph.yield %e, %n : tensor<8xf32>, tensor<8xf32>
  }
  func.return %0, %1 : tensor<8xf32>, tensor<8xf32>
}

// -----

// Results of different shapes cannot share a loop: one loop per shape.
// CHECK-LABEL: loop.kernel @fused_exp_reduce_sum {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4x8xf32>, %[[E:.*]]: memref<4x8xf32>, %[[S:.*]]: memref<4xf32>):
// CHECK:        loop.parallel [4, 8] {
// CHECK:          loop.store %{{.*}}, %[[E]][%{{.*}}, %{{.*}}]
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.parallel [4] {
// CHECK:          loop.reduce add [8]
// CHECK:          loop.store %{{.*}}, %[[S]][%{{.*}}]
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.yield
func.func @two_shapes(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %0, %1 = graph.fused "fused_exp_reduce_sum"(%x) kind = reduction : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%xa: tensor<4x8xf32>):
    %e = graph.exp %xa : tensor<4x8xf32>
    %s = graph.reduce_sum %e axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
    graph.yield %e, %s : tensor<4x8xf32>, tensor<4xf32>
  }
  func.return %0, %1 : tensor<4x8xf32>, tensor<4xf32>
}

// -----

// The reduction is an accumulator inside the output loop, its prologue (exp) inside the
// reduce body and its epilogue (sqrt) after it, applied to the scalar: one store.
// CHECK-LABEL: loop.kernel @fused_exp_reduce_sum_sqrt {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4xf32>):
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:   loop.parallel [4] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index):
// CHECK-NEXT:     %[[SUM:.*]] = loop.reduce add [8] init(%[[ZERO]] : f32) {
// CHECK-NEXT:     ^{{.*}}(%[[J:.*]]: index):
// CHECK-NEXT:       %[[V:.*]] = loop.load %[[X]][%[[I]], %[[J]]]
// CHECK-NEXT:       %[[E:.*]] = math.exp %[[V]] : f32
// CHECK-NEXT:       loop.yield %[[E]] : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[R:.*]] = math.sqrt %[[SUM]] : f32
// CHECK-NEXT:     loop.store %[[R]], %[[OUT]][%[[I]]]
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.yield
// CHECK-LABEL: func.func @reduce_epilogue(
// CHECK-SAME: graphfuse.scratch = 0 : i64
func.func @reduce_epilogue(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = graph.fused "fused_exp_reduce_sum_sqrt"(%x) kind = reduction : (tensor<4x8xf32>) -> tensor<4xf32> {
  ^bb0(%xa: tensor<4x8xf32>):
    %e = graph.exp %xa : tensor<4x8xf32>
    %s = graph.reduce_sum %e axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %q = graph.sqrt %s : tensor<4xf32>
    graph.yield %q : tensor<4xf32>
  }
  func.return %0 : tensor<4xf32>
}

// -----

// A reduction broadcast back over the rows it reduced would be recomputed at every
// element. Here it reduces the leading dim (a column max), so the kernel cannot run row by
// row: it is materialised. A first loop stores it into a scratch buffer (a kernel argument
// the caller passes), a second loop loads it.
// CHECK-LABEL: loop.kernel @fused_reduce_max_sub_exp {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4x8xf32>, %[[MAX:.*]]: memref<1x8xf32>):
// CHECK-DAG:    %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-DAG:    %[[LOWEST:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:   loop.parallel [1, 8] {
// CHECK-NEXT:   ^{{.*}}(%{{.*}}: index, %[[J:.*]]: index):
// CHECK-NEXT:     %[[M:.*]] = loop.reduce max [4] init(%[[LOWEST]] : f32) {
// CHECK:          loop.store %[[M]], %[[MAX]][%[[ZERO]], %[[J]]]
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.parallel [4, 8] {
// CHECK-NEXT:   ^{{.*}}(%[[I2:.*]]: index, %[[J2:.*]]: index):
// CHECK-NEXT:     %[[V:.*]] = loop.load %[[X]][%[[I2]], %[[J2]]]
// CHECK-NEXT:     %[[MV:.*]] = loop.load %[[MAX]][%[[ZERO]], %[[J2]]]
// CHECK-NEXT:     %[[D:.*]] = arith.subf %[[V]], %[[MV]] : f32
// CHECK-NEXT:     %[[E:.*]] = math.exp %[[D]] : f32
// CHECK-NEXT:     loop.store %[[E]], %[[OUT]][%[[I2]], %[[J2]]]
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.yield
// CHECK-LABEL: func.func @reduce_broadcast_back(
// CHECK-SAME: %[[FX:.*]]: memref<4x8xf32>, %[[FOUT:.*]]: memref<4x8xf32>, %[[FMAX:.*]]: memref<1x8xf32>)
// CHECK-SAME: attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 1 : i64}
// CHECK-NEXT: loop.call @fused_reduce_max_sub_exp(%[[FX]], %[[FOUT]], %[[FMAX]])
func.func @reduce_broadcast_back(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.fused "fused_reduce_max_sub_exp"(%x) kind = reduction : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xa: tensor<4x8xf32>):
    %m = graph.reduce_max %xa axes = [0] keepdims : tensor<4x8xf32> -> tensor<1x8xf32>
    %d = graph.sub %xa, %m : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
    %e = graph.exp %d : tensor<4x8xf32>
    graph.yield %e : tensor<4x8xf32>
  }
  func.return %0 : tensor<4x8xf32>
}

// -----

// A materialised value that is also a result lives in its output buffer: no scratch.
// CHECK-LABEL: loop.kernel @fused_reduce_max_sub {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4x8xf32>, %[[MAX:.*]]: memref<1x8xf32>):
// CHECK:        loop.reduce max [4]
// CHECK:        loop.store %{{.*}}, %[[MAX]]
// CHECK:        loop.parallel [4, 8] {
// CHECK:          loop.load %[[MAX]]
// CHECK:          loop.store %{{.*}}, %[[OUT]]
// CHECK-LABEL: func.func @result_materialised(
// CHECK-SAME: attributes {graphfuse.outputs = 2 : i64, graphfuse.scratch = 0 : i64}
func.func @result_materialised(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<1x8xf32>) {
  %0, %1 = graph.fused "fused_reduce_max_sub"(%x) kind = reduction : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<1x8xf32>) {
  ^bb0(%xa: tensor<4x8xf32>):
    %m = graph.reduce_max %xa axes = [0] keepdims : tensor<4x8xf32> -> tensor<1x8xf32>
    %d = graph.sub %xa, %m : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
    graph.yield %d, %m : tensor<4x8xf32>, tensor<1x8xf32>
  }
  func.return %0, %1 : tensor<4x8xf32>, tensor<1x8xf32>
}

// -----

// Softmax over rows, stitched: one loop over the rows. Per row the max and the sum are
// scalars (no scratch buffer); exp(x - max), needed by the sum and by the output, is
// written once into the row of the output buffer by the sum as it adds it up, and the
// inner loop divides it in place. No second loop over the kernel.
// CHECK-LABEL: loop.kernel @fused_reduce_max_sub_exp_reduce_sum_div {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4x8xf32>):
// CHECK-DAG:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:    %[[LOWEST:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:   loop.parallel [4] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index):
// CHECK-NEXT:     %[[MAX:.*]] = loop.reduce max [8] init(%[[LOWEST]] : f32) {
// CHECK-NEXT:     ^{{.*}}(%[[K:.*]]: index):
// CHECK-NEXT:       %[[XK:.*]] = loop.load %[[X]][%[[I]], %[[K]]]
// CHECK-NEXT:       loop.yield %[[XK]] : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[SUM:.*]] = loop.reduce add [8] init(%[[ZERO]] : f32) {
// CHECK-NEXT:     ^{{.*}}(%[[K2:.*]]: index):
// CHECK-NEXT:       %[[XJ:.*]] = loop.load %[[X]][%[[I]], %[[K2]]]
// CHECK-NEXT:       %[[D:.*]] = arith.subf %[[XJ]], %[[MAX]] : f32
// CHECK-NEXT:       %[[E:.*]] = math.exp %[[D]] : f32
// CHECK-NEXT:       loop.store %[[E]], %[[OUT]][%[[I]], %[[K2]]]
// CHECK-NEXT:       loop.yield %[[E]] : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     loop.parallel [8] {
// CHECK-NEXT:     ^{{.*}}(%[[J2:.*]]: index):
// CHECK-NEXT:       %[[EJ:.*]] = loop.load %[[OUT]][%[[I]], %[[J2]]]
// CHECK-NEXT:       %[[Y:.*]] = arith.divf %[[EJ]], %[[SUM]] : f32
// CHECK-NEXT:       loop.store %[[Y]], %[[OUT]][%[[I]], %[[J2]]]
// CHECK-NEXT:       loop.yield
// CHECK-NEXT:     }
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NOT:    loop.parallel
// CHECK-NEXT:   loop.yield
// CHECK-LABEL: func.func @softmax_rows(
// CHECK-SAME: attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 0 : i64}
func.func @softmax_rows(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.fused "fused_reduce_max_sub_exp_reduce_sum_div"(%x) kind = reduction : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xa: tensor<4x8xf32>):
    %m = graph.reduce_max %xa axes = [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
    %d = graph.sub %xa, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %e = graph.exp %d : tensor<4x8xf32>
    %s = graph.reduce_sum %e axes = [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
    %y = graph.div %e, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    graph.yield %y : tensor<4x8xf32>
  }
  func.return %0 : tensor<4x8xf32>
}

// -----

// A stitched kernel returning its reduction (keepdims) stores the row's scalar directly,
// before the inner loop over the row.
// CHECK-LABEL: loop.kernel @fused_reduce_max_sub {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4x8xf32>, %[[MAXOUT:.*]]: memref<4x1xf32>):
// CHECK-DAG:    %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-DAG:    %[[LOWEST:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:   loop.parallel [4] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index):
// CHECK-NEXT:     %[[MAX:.*]] = loop.reduce max [8] init(%[[LOWEST]] : f32) {
// CHECK:          }
// CHECK-NEXT:     loop.store %[[MAX]], %[[MAXOUT]][%[[I]], %[[ZERO]]]
// CHECK-NEXT:     loop.parallel [8] {
// CHECK-NEXT:     ^{{.*}}(%[[J:.*]]: index):
// CHECK-NEXT:       %[[XJ:.*]] = loop.load %[[X]][%[[I]], %[[J]]]
// CHECK-NEXT:       %[[D:.*]] = arith.subf %[[XJ]], %[[MAX]] : f32
// CHECK-NEXT:       loop.store %[[D]], %[[OUT]][%[[I]], %[[J]]]
// CHECK-NEXT:       loop.yield
// CHECK-NEXT:     }
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.yield
// CHECK-LABEL: func.func @rows_and_reduction(
// CHECK-SAME: attributes {graphfuse.outputs = 2 : i64, graphfuse.scratch = 0 : i64}
func.func @rows_and_reduction(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  %0, %1 = graph.fused "fused_reduce_max_sub"(%x) kind = reduction : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  ^bb0(%xa: tensor<4x8xf32>):
    %m = graph.reduce_max %xa axes = [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
    %d = graph.sub %xa, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    graph.yield %d, %m : tensor<4x8xf32>, tensor<4x1xf32>
  }
  func.return %0, %1 : tensor<4x8xf32>, tensor<4x1xf32>
}

// -----

// Not stitched: the result is the rows transposed, so a row's max would be read while
// computing other rows. The max is materialised and read by a second loop.
// CHECK-LABEL: loop.kernel @fused_reduce_max_sub_transpose {
// CHECK-NEXT: ^{{.*}}(%{{.*}}: memref<4x8xf32>, %{{.*}}: memref<8x4xf32>, %[[MAX:.*]]: memref<4x1xf32>):
// CHECK:        loop.parallel [4, 1] {
// CHECK:          loop.store %{{.*}}, %[[MAX]]
// CHECK:        loop.parallel [8, 4] {
// CHECK:          loop.load %[[MAX]]
// CHECK-LABEL: func.func @rows_transposed(
// CHECK-SAME: graphfuse.scratch = 1 : i64
func.func @rows_transposed(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %0 = graph.fused "fused_reduce_max_sub_transpose"(%x) kind = reduction : (tensor<4x8xf32>) -> tensor<8x4xf32> {
  ^bb0(%xa: tensor<4x8xf32>):
    %m = graph.reduce_max %xa axes = [1] keepdims : tensor<4x8xf32> -> tensor<4x1xf32>
    %d = graph.sub %xa, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %t = graph.transpose %d perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
    graph.yield %t : tensor<8x4xf32>
  }
  func.return %0 : tensor<8x4xf32>
}

// -----

// Matmul: a first loop copies the right-hand side transposed (scratch), so the sum over K
// reads both operands contiguously; bias and relu apply to the accumulated scalar.
// CHECK-LABEL: loop.kernel @fused_matmul_add_relu {
// CHECK-NEXT: ^{{.*}}(%[[A:.*]]: memref<4x16xf32>, %[[W:.*]]: memref<16x8xf32>, %[[B:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<4x8xf32>, %[[WT:.*]]: memref<8x16xf32>):
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:   loop.parallel [8, 16] {
// CHECK-NEXT:   ^{{.*}}(%[[N:.*]]: index, %[[K:.*]]: index):
// CHECK-NEXT:     %[[WV:.*]] = loop.load %[[W]][%[[K]], %[[N]]]
// CHECK-NEXT:     loop.store %[[WV]], %[[WT]][%[[N]], %[[K]]]
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.parallel [4, 8] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT:     %[[DOT:.*]] = loop.reduce add [16] init(%[[ZERO]] : f32) {
// CHECK-NEXT:     ^{{.*}}(%[[R:.*]]: index):
// CHECK-NEXT:       %[[AV:.*]] = loop.load %[[A]][%[[I]], %[[R]]]
// CHECK-NEXT:       %[[BV:.*]] = loop.load %[[WT]][%[[J]], %[[R]]]
// CHECK-NEXT:       %[[P:.*]] = arith.mulf %[[AV]], %[[BV]] : f32
// CHECK-NEXT:       loop.yield %[[P]] : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[BIAS:.*]] = loop.load %[[B]][%[[J]]]
// CHECK-NEXT:     %[[S:.*]] = arith.addf %[[DOT]], %[[BIAS]] : f32
// CHECK-NEXT:     %[[RELU:.*]] = arith.maximumf %[[S]], %[[ZERO]] fastmath<nsz> : f32
// CHECK-NEXT:     loop.store %[[RELU]], %[[OUT]][%[[I]], %[[J]]]
// CHECK-NEXT:     loop.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.yield
// CHECK-LABEL: func.func @matmul_bias_relu(
// CHECK-SAME: attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 1 : i64}
func.func @matmul_bias_relu(%a: tensor<4x16xf32>, %w: tensor<16x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = graph.fused "fused_matmul_add_relu"(%a, %w, %b) kind = out_elemwise_fusable : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%aa: tensor<4x16xf32>, %wa: tensor<16x8xf32>, %ba: tensor<8xf32>):
    %m = graph.matmul %aa, %wa : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %s = graph.add %m, %ba : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r = graph.relu %s : tensor<4x8xf32>
    graph.yield %r : tensor<4x8xf32>
  }
  func.return %0 : tensor<4x8xf32>
}

// -----

// A matmul read through a transpose is not elementwise-closed: it is materialised into a
// scratch buffer (materialised values come before the operand copies among the scratch
// arguments), and the transpose loop reads it with permuted indices.
// CHECK-LABEL: loop.kernel @fused_matmul_transpose {
// CHECK-NEXT: ^{{.*}}(%{{.*}}: memref<4x16xf32>, %{{.*}}: memref<16x8xf32>, %[[OUT:.*]]: memref<8x4xf32>, %[[M:.*]]: memref<4x8xf32>, %[[WT:.*]]: memref<8x16xf32>):
// CHECK:        loop.parallel [8, 16] {
// CHECK:          loop.store %{{.*}}, %[[WT]]
// CHECK:        loop.parallel [4, 8] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT:     %[[DOT:.*]] = loop.reduce add [16]
// CHECK:          loop.store %[[DOT]], %[[M]][%[[I]], %[[J]]]
// CHECK:        loop.parallel [8, 4] {
// CHECK-NEXT:   ^{{.*}}(%[[P:.*]]: index, %[[Q:.*]]: index):
// CHECK-NEXT:     %[[V:.*]] = loop.load %[[M]][%[[Q]], %[[P]]]
// CHECK-NEXT:     loop.store %[[V]], %[[OUT]][%[[P]], %[[Q]]]
// CHECK-LABEL: func.func @matmul_transposed(
// CHECK-SAME: attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 2 : i64}
func.func @matmul_transposed(%a: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<8x4xf32> {
  %0 = graph.fused "fused_matmul_transpose"(%a, %w) kind = out_elemwise_fusable : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<8x4xf32> {
  ^bb0(%aa: tensor<4x16xf32>, %wa: tensor<16x8xf32>):
    %m = graph.matmul %aa, %wa : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %t = graph.transpose %m perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
    graph.yield %t : tensor<8x4xf32>
  }
  func.return %0 : tensor<8x4xf32>
}

// -----

// Output dim d reads input dim perm[d]: out[i, j, k] = in[j, k, i].
// CHECK-LABEL: loop.kernel @fused_transpose_neg {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<2x3x4xf32>, %[[OUT:.*]]: memref<4x2x3xf32>):
// CHECK-NEXT:   loop.parallel [4, 2, 3] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index, %[[K:.*]]: index):
// CHECK-NEXT:     %[[V:.*]] = loop.load %[[X]][%[[J]], %[[K]], %[[I]]] : memref<2x3x4xf32> -> f32
// CHECK-NEXT:     %[[N:.*]] = arith.negf %[[V]] : f32
// CHECK-NEXT:     loop.store %[[N]], %[[OUT]][%[[I]], %[[J]], %[[K]]] : f32, memref<4x2x3xf32>
func.func @transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = graph.fused "fused_transpose_neg"(%x) kind = injective : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  ^bb0(%xa: tensor<2x3x4xf32>):
    %t = graph.transpose %xa perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
    %n = graph.neg %t : tensor<4x2x3xf32>
    graph.yield %n : tensor<4x2x3xf32>
  }
  func.return %0 : tensor<4x2x3xf32>
}

// -----

// Pad: branch-free. The load uses the shifted index clamped into the input; a select
// keeps it inside the input, the pad value outside.
// CHECK-LABEL: loop.kernel @fused_pad {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4xf32>, %[[OUT:.*]]: memref<7xf32>):
// CHECK-DAG:    %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG:    %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:    %[[FILL:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG:    %[[LOW:.*]] = arith.constant -1 : index
// CHECK:        loop.parallel [7] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index):
// CHECK-NEXT:     %[[S:.*]] = arith.addi %[[I]], %[[LOW]] : index
// CHECK-NEXT:     %[[GE:.*]] = arith.cmpi sge, %[[S]], %[[C0]] : index
// CHECK-NEXT:     %[[LT:.*]] = arith.cmpi slt, %[[S]], %[[C4]] : index
// CHECK-NEXT:     %[[IN:.*]] = arith.andi %[[GE]], %[[LT]] : i1
// CHECK-NEXT:     %[[MAX:.*]] = arith.maxsi %[[S]], %[[C0]] : index
// CHECK-NEXT:     %[[CL:.*]] = arith.minsi %[[MAX]], %[[C3]] : index
// CHECK-NEXT:     %[[V:.*]] = loop.load %[[X]][%[[CL]]] : memref<4xf32> -> f32
// CHECK-NEXT:     %[[R:.*]] = arith.select %[[IN]], %[[V]], %[[FILL]] : f32
// CHECK-NEXT:     loop.store %[[R]], %[[OUT]][%[[I]]]
func.func @pad(%x: tensor<4xf32>) -> tensor<7xf32> {
  %0 = graph.fused "fused_pad"(%x) kind = injective : (tensor<4xf32>) -> tensor<7xf32> {
  ^bb0(%xa: tensor<4xf32>):
    %p = graph.pad %xa low = [1] high = [2] value = 0.5 : tensor<4xf32> -> tensor<7xf32>
    graph.yield %p : tensor<7xf32>
  }
  func.return %0 : tensor<7xf32>
}

// -----

// A concat that is the kernel's result: one loop per input over its own shape, storing at
// the input's offset along the axis.
// CHECK-LABEL: loop.kernel @fused_concat {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4x3xf32>, %[[Y:.*]]: memref<4x5xf32>, %[[OUT:.*]]: memref<4x8xf32>):
// CHECK-NEXT:   %[[C3:.*]] = arith.constant 3 : index
// CHECK-NEXT:   loop.parallel [4, 3] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT:     %[[XV:.*]] = loop.load %[[X]][%[[I]], %[[J]]]
// CHECK-NEXT:     loop.store %[[XV]], %[[OUT]][%[[I]], %[[J]]]
// CHECK:        loop.parallel [4, 5] {
// CHECK-NEXT:   ^{{.*}}(%[[I2:.*]]: index, %[[J2:.*]]: index):
// CHECK-NEXT:     %[[AT:.*]] = arith.addi %[[J2]], %[[C3]] : index
// CHECK-NEXT:     %[[YV:.*]] = loop.load %[[Y]][%[[I2]], %[[J2]]]
// CHECK-NEXT:     loop.store %[[YV]], %[[OUT]][%[[I2]], %[[AT]]]
func.func @concat(%x: tensor<4x3xf32>, %y: tensor<4x5xf32>) -> tensor<4x8xf32> {
  %0 = graph.fused "fused_concat"(%x, %y) kind = injective : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32> {
  ^bb0(%xa: tensor<4x3xf32>, %ya: tensor<4x5xf32>):
    %c = graph.concat %xa, %ya axis = 1 : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32>
    graph.yield %c : tensor<4x8xf32>
  }
  func.return %0 : tensor<4x8xf32>
}

// -----

// A concat read by another op of the kernel: each input loads at its clamped local index;
// a select on the position picks one.
// CHECK-LABEL: loop.kernel @fused_concat_neg {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4x3xf32>, %[[Y:.*]]: memref<4x5xf32>, %[[OUT:.*]]: memref<4x8xf32>):
// CHECK-DAG:    %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG:    %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG:    %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:    %[[M3:.*]] = arith.constant -3 : index
// CHECK:        loop.parallel [4, 8] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NEXT:     %[[YJ:.*]] = arith.addi %[[J]], %[[M3]] : index
// CHECK-NEXT:     %[[YLO:.*]] = arith.maxsi %[[YJ]], %[[C0]] : index
// CHECK-NEXT:     %[[YCL:.*]] = arith.minsi %[[YLO]], %[[C4]] : index
// CHECK-NEXT:     %[[YV:.*]] = loop.load %[[Y]][%[[I]], %[[YCL]]]
// CHECK-NEXT:     %[[XLO:.*]] = arith.maxsi %[[J]], %[[C0]] : index
// CHECK-NEXT:     %[[XCL:.*]] = arith.minsi %[[XLO]], %[[C2]] : index
// CHECK-NEXT:     %[[XV:.*]] = loop.load %[[X]][%[[I]], %[[XCL]]]
// CHECK-NEXT:     %[[FIRST:.*]] = arith.cmpi slt, %[[J]], %[[C3]] : index
// CHECK-NEXT:     %[[R:.*]] = arith.select %[[FIRST]], %[[XV]], %[[YV]] : f32
// CHECK-NEXT:     %[[N:.*]] = arith.negf %[[R]] : f32
// CHECK-NEXT:     loop.store %[[N]], %[[OUT]][%[[I]], %[[J]]]
func.func @concat_neg(%x: tensor<4x3xf32>, %y: tensor<4x5xf32>) -> tensor<4x8xf32> {
  %0 = graph.fused "fused_concat_neg"(%x, %y) kind = injective : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32> {
  ^bb0(%xa: tensor<4x3xf32>, %ya: tensor<4x5xf32>):
    %c = graph.concat %xa, %ya axis = 1 : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32>
    %n = graph.neg %c : tensor<4x8xf32>
    graph.yield %n : tensor<4x8xf32>
  }
  func.return %0 : tensor<4x8xf32>
}

// -----

// Gather: the index read from the indices (at the dims they span) becomes the load's index
// on the axis: cast to index, wrapped when negative, clamped into the axis.
// CHECK-LABEL: loop.kernel @fused_gather {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<6x4xf32>, %[[IDX:.*]]: memref<2x3xi32>, %[[OUT:.*]]: memref<2x3x4xf32>):
// CHECK-DAG:    %[[C5:.*]] = arith.constant 5 : index
// CHECK-DAG:    %[[C6:.*]] = arith.constant 6 : index
// CHECK-DAG:    %[[C0:.*]] = arith.constant 0 : index
// CHECK:        loop.parallel [2, 3, 4] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index, %[[J:.*]]: index, %[[K:.*]]: index):
// CHECK-NEXT:     %[[RAW:.*]] = loop.load %[[IDX]][%[[I]], %[[J]]] : memref<2x3xi32> -> i32
// CHECK-NEXT:     %[[P:.*]] = arith.index_cast %[[RAW]] : i32 to index
// CHECK-NEXT:     %[[NEG:.*]] = arith.cmpi slt, %[[P]], %[[C0]] : index
// CHECK-NEXT:     %[[UP:.*]] = arith.addi %[[P]], %[[C6]] : index
// CHECK-NEXT:     %[[W:.*]] = arith.select %[[NEG]], %[[UP]], %[[P]] : index
// CHECK-NEXT:     %[[LO:.*]] = arith.maxsi %[[W]], %[[C0]] : index
// CHECK-NEXT:     %[[CL:.*]] = arith.minsi %[[LO]], %[[C5]] : index
// CHECK-NEXT:     %[[V:.*]] = loop.load %[[X]][%[[CL]], %[[K]]] : memref<6x4xf32> -> f32
// CHECK-NEXT:     loop.store %[[V]], %[[OUT]][%[[I]], %[[J]], %[[K]]]
func.func @gather(%x: tensor<6x4xf32>, %i: tensor<2x3xi32>) -> tensor<2x3x4xf32> {
  %0 = graph.fused "fused_gather"(%x, %i) kind = injective : (tensor<6x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32> {
  ^bb0(%xa: tensor<6x4xf32>, %ia: tensor<2x3xi32>):
    %g = graph.gather %xa, %ia axis = 0 : (tensor<6x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
    graph.yield %g : tensor<2x3x4xf32>
  }
  func.return %0 : tensor<2x3x4xf32>
}

// -----

// A constant rank-0 index is wrapped at compile time: x[:, -1] is a load at column 3.
// CHECK-LABEL: loop.kernel @fused_gather {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<6x4xf32>, %[[OUT:.*]]: memref<6xf32>):
// CHECK-NEXT:   %[[C3:.*]] = arith.constant 3 : index
// CHECK-NEXT:   loop.parallel [6] {
// CHECK-NEXT:   ^{{.*}}(%[[I:.*]]: index):
// CHECK-NEXT:     %[[V:.*]] = loop.load %[[X]][%[[I]], %[[C3]]] : memref<6x4xf32> -> f32
// CHECK-NEXT:     loop.store %[[V]], %[[OUT]][%[[I]]]
// CHECK-NOT:  arith.index_cast
// CHECK-LABEL: func.func @gather_constant_scalar_index(
func.func @gather_constant_scalar_index(%x: tensor<6x4xf32>) -> tensor<6xf32> {
  %0 = graph.fused "fused_gather"(%x) kind = injective : (tensor<6x4xf32>) -> tensor<6xf32> {
  ^bb0(%xa: tensor<6x4xf32>):
    %last = graph.constant dense<-1> : tensor<i64>
    %g = graph.gather %xa, %last axis = 1 : (tensor<6x4xf32>, tensor<i64>) -> tensor<6xf32>
    graph.yield %g : tensor<6xf32>
  }
  func.return %0 : tensor<6xf32>
}

// -----

// f16 is computed in f32: extended on load, rounded to f16 after every op (as the
// reference rounds), and the rounded value stored.
// CHECK-LABEL: loop.kernel @fused_exp {
// CHECK:        %[[V:.*]] = loop.load %{{.*}}[%{{.*}}] : memref<8xf16> -> f16
// CHECK-NEXT:   %[[W:.*]] = arith.extf %[[V]] : f16 to f32
// CHECK-NEXT:   %[[E:.*]] = math.exp %[[W]] : f32
// CHECK-NEXT:   %[[T:.*]] = arith.truncf %[[E]] : f32 to f16
// CHECK-NOT:    arith.truncf
// CHECK:        loop.store %[[T]], %{{.*}}[%{{.*}}] : f16, memref<8xf16>
func.func @f16(%x: tensor<8xf16>) -> tensor<8xf16> {
  %0 = graph.fused "fused_exp"(%x) kind = elemwise : (tensor<8xf16>) -> tensor<8xf16> {
  ^bb0(%xa: tensor<8xf16>):
    %e = graph.exp %xa : tensor<8xf16>
    graph.yield %e : tensor<8xf16>
  }
  func.return %0 : tensor<8xf16>
}

// -----

// A value crossing kernels without being returned gets a scratch buffer, appended after
// the outputs; the function returns nothing and says how many buffers of each kind it takes.
// CHECK: loop.kernel @fused_exp {
// CHECK: loop.kernel @fused_neg {
// CHECK-LABEL: func.func @crossing(
// CHECK-SAME: %[[X:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<8xf32>, %[[T:.*]]: memref<8xf32>)
// CHECK-SAME: attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = 1 : i64} {
// CHECK-NEXT: loop.call @fused_exp(%[[X]], %[[T]]) : memref<8xf32>, memref<8xf32>
// CHECK-NEXT: loop.call @fused_neg(%[[T]], %[[OUT]]) : memref<8xf32>, memref<8xf32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @crossing(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = graph.fused "fused_exp"(%x) kind = elemwise : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%xa: tensor<8xf32>):
    %e = graph.exp %xa : tensor<8xf32>
    graph.yield %e : tensor<8xf32>
  }
  %1 = graph.fused "fused_neg"(%0) kind = elemwise : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%ea: tensor<8xf32>):
    %n = graph.neg %ea : tensor<8xf32>
    graph.yield %n : tensor<8xf32>
  }
  func.return %1 : tensor<8xf32>
}

// -----

// Results no kernel writes in place (an argument, a value returned twice) are copied.
// CHECK-LABEL: func.func @returns_copies(
// CHECK-SAME: %[[X:.*]]: memref<8xf32>, %[[OUT0:.*]]: memref<8xf32>, %[[OUT1:.*]]: memref<8xf32>, %[[OUT2:.*]]: memref<8xf32>)
// CHECK-SAME: attributes {graphfuse.outputs = 3 : i64, graphfuse.scratch = 0 : i64} {
// CHECK-NEXT: loop.call @fused_exp(%[[X]], %[[OUT0]])
// CHECK-NEXT: "memref.copy"(%[[X]], %[[OUT1]]) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT: "memref.copy"(%[[OUT0]], %[[OUT2]]) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT: func.return
func.func @returns_copies(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0 = graph.fused "fused_exp"(%x) kind = elemwise : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%xa: tensor<8xf32>):
    %e = graph.exp %xa : tensor<8xf32>
    graph.yield %e : tensor<8xf32>
  }
  func.return %0, %x, %0 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Non-splat constants become private memref.globals read through memref.get_global, in
// the function (outside kernels) or hoisted to the top of the kernel; a splat constant
// inside a kernel is a scalar arith.constant.
// CHECK:      "memref.global"() <{sym_name = "[[OUTER:__graphfuse_constant_[0-9]+]]", type = memref<4xf32>, initial_value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>, sym_visibility = "private", constant
// CHECK-NEXT: "memref.global"() <{sym_name = "[[INNER:__graphfuse_constant_[0-9]+]]", type = memref<4xf32>, initial_value = dense<[5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00]> : tensor<4xf32>, sym_visibility = "private", constant
// CHECK-NOT:  "memref.global"
// CHECK-LABEL: loop.kernel @fused_add_mul_sub {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: memref<4xf32>, %[[C:.*]]: memref<4xf32>, %[[OUT:.*]]: memref<4xf32>):
// CHECK-DAG:    %[[W:.*]] = memref.get_global @[[INNER]] : memref<4xf32>
// CHECK-DAG:    %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK:        loop.parallel [4] {
// CHECK:          %[[CV:.*]] = loop.load %[[C]]
// CHECK:          arith.mulf %{{.*}}, %[[TWO]] : f32
// CHECK-NEXT:     %[[WV:.*]] = loop.load %[[W]]
// CHECK-LABEL: func.func @constants(
// CHECK-SAME: %[[FX:.*]]: memref<4xf32>, %[[OUT0:.*]]: memref<4xf32>, %[[OUT1:.*]]: memref<4xf32>)
// CHECK-NEXT: %[[G:.*]] = memref.get_global @[[OUTER]] : memref<4xf32>
// CHECK-NEXT: loop.call @fused_add_mul_sub(%[[FX]], %[[G]], %[[OUT0]])
// CHECK-NEXT: "memref.copy"(%[[G]], %[[OUT1]])
func.func @constants(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = graph.fused "fused_add_mul_sub"(%x, %c) kind = elemwise : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%xa: tensor<4xf32>, %ca: tensor<4xf32>):
    %two = graph.constant dense<2.0> : tensor<4xf32>
    %w = graph.constant dense<[5.0, 6.0, 7.0, 8.0]> : tensor<4xf32>
    %a = graph.add %xa, %ca : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %m = graph.mul %a, %two : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %s = graph.sub %m, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    graph.yield %s : tensor<4xf32>
  }
  func.return %0, %c : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @unfused(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = graph.exp %x : tensor<8xf32>
  // CHECK: 'graph.exp' in @unfused is outside any graph.fused kernel; run graph-fuse before convert-graph-to-loop
  func.return %e : tensor<8xf32>
}

// -----

func.func @scalar_argument(%x: f32) -> f32 {
  // CHECK: @scalar_argument takes or returns f32; graph functions use ranked tensors
  func.return %x : f32
}

// -----

func.func @no_loop_lowering(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.fused "fused_softmax"(%x) kind = opaque : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xa: tensor<4x8xf32>):
    %s = graph.softmax %xa axis = 1 : tensor<4x8xf32>
    // CHECK: 'graph.softmax' has no loop lowering (convert-graph-to-loop supports elementwise, data-movement, reduction, matmul, conv2d and pooling ops)
    graph.yield %s : tensor<4x8xf32>
  }
  func.return %0 : tensor<4x8xf32>
}

// -----

// Kernel symbols never clash: a name the module already uses (the function @fused_exp)
// or an earlier kernel took gets the first free suffix.
// CHECK-LABEL: loop.kernel @fused_exp_1
// CHECK: loop.kernel @fused_exp_2
// CHECK: func.func @fused_exp(
// CHECK-NEXT: loop.call @fused_exp_1(
// CHECK-NEXT: loop.call @fused_exp_2(
func.func @fused_exp(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = graph.fused "fused_exp"(%x) kind = elemwise : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    %e = graph.exp %a : tensor<8xf32>
    graph.yield %e : tensor<8xf32>
  }
  %1 = graph.fused "fused_exp"(%0) kind = elemwise : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%b: tensor<8xf32>):
    %f = graph.exp %b : tensor<8xf32>
    graph.yield %f : tensor<8xf32>
  }
  func.return %1 : tensor<8xf32>
}
