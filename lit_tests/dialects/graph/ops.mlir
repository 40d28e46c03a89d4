// RUN: xdsl-opt %s --split-input-file | filecheck %s
// RUN: xdsl-opt %s --split-input-file | xdsl-opt --split-input-file | filecheck %s
// RUN: xdsl-opt %s --split-input-file --print-op-generic | xdsl-opt --split-input-file | filecheck %s

// CHECK-LABEL: func.func @elementwise_unary
func.func @elementwise_unary(%x: tensor<4x8xf32>, %i: tensor<4xi32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %{{.*}} = graph.neg %{{.*}} : tensor<4x8xf32>
  %0 = graph.neg %x : tensor<4x8xf32>
  // CHECK-NEXT: graph.abs %{{.*}} : tensor<4xi32>
  %1 = graph.abs %i : tensor<4xi32>
  // CHECK-NEXT: graph.relu %{{.*}} : tensor<4x8xf32>
  %2 = graph.relu %0 : tensor<4x8xf32>
  // CHECK-NEXT: graph.exp
  %3 = graph.exp %2 : tensor<4x8xf32>
  // CHECK-NEXT: graph.log
  %4 = graph.log %3 : tensor<4x8xf32>
  // CHECK-NEXT: graph.sqrt
  %5 = graph.sqrt %4 : tensor<4x8xf32>
  // CHECK-NEXT: graph.rsqrt
  %6 = graph.rsqrt %5 : tensor<4x8xf32>
  // CHECK-NEXT: graph.tanh
  %7 = graph.tanh %6 : tensor<4x8xf32>
  // CHECK-NEXT: graph.sigmoid
  %8 = graph.sigmoid %7 : tensor<4x8xf32>
  // CHECK-NEXT: graph.erf %{{.*}} : tensor<4x8xf32>
  %9 = graph.erf %8 : tensor<4x8xf32>
  func.return %9 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @elementwise_types
func.func @elementwise_types(%h: tensor<2xf16>, %b: tensor<2xbf16>, %l: tensor<2xi64>) -> tensor<2xi1> {
  // CHECK-NEXT: graph.exp %{{.*}} : tensor<2xf16>
  %0 = graph.exp %h : tensor<2xf16>
  // CHECK-NEXT: graph.tanh %{{.*}} : tensor<2xbf16>
  %1 = graph.tanh %b : tensor<2xbf16>
  // CHECK-NEXT: graph.cast %{{.*}} : tensor<2xf16> -> tensor<2xi1>
  %2 = graph.cast %0 : tensor<2xf16> -> tensor<2xi1>
  // CHECK-NEXT: graph.neg %{{.*}} : tensor<2xi64>
  %3 = graph.neg %l : tensor<2xi64>
  func.return %2 : tensor<2xi1>
}

// -----

// CHECK-LABEL: func.func @elementwise_binary
func.func @elementwise_binary(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<4x1xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: graph.add %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %0 = graph.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: graph.sub %{{.*}}, %{{.*}} : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = graph.sub %c, %b : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: graph.mul
  %2 = graph.mul %0, %1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: graph.div
  %3 = graph.div %2, %c : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: graph.max
  %4 = graph.max %3, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: graph.min
  %5 = graph.min %4, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: graph.pow
  %6 = graph.pow %5, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[CMP:.*]] = graph.compare lt, %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xi1>
  %7 = graph.compare lt, %6, %c : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: graph.select %[[CMP]], %{{.*}}, %{{.*}} : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %8 = graph.select %7, %6, %b : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %8 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @shape_ops
func.func @shape_ops(%x: tensor<2x3x4xf32>, %y: tensor<2x3x2xf32>) -> tensor<5x3x8xf32> {
  // CHECK-NEXT: graph.broadcast_to %{{.*}} : tensor<2x3x4xf32> -> tensor<5x2x3x4xf32>
  %0 = graph.broadcast_to %x : tensor<2x3x4xf32> -> tensor<5x2x3x4xf32>
  // CHECK-NEXT: graph.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = graph.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  // CHECK-NEXT: graph.transpose %{{.*}} perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %2 = graph.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  // CHECK-NEXT: graph.slice %{{.*}} starts = [0, 1, 0] strides = [1, 1, 2] : tensor<2x3x4xf32> -> tensor<2x2x2xf32>
  %3 = graph.slice %x starts = [0, 1, 0] strides = [1, 1, 2] : tensor<2x3x4xf32> -> tensor<2x2x2xf32>
  // CHECK-NEXT: graph.concat %{{.*}}, %{{.*}} axis = 2 : (tensor<2x3x4xf32>, tensor<2x3x2xf32>) -> tensor<2x3x6xf32>
  %4 = graph.concat %x, %y axis = 2 : (tensor<2x3x4xf32>, tensor<2x3x2xf32>) -> tensor<2x3x6xf32>
  // CHECK-NEXT: graph.pad %{{.*}} low = [1, 0, 1] high = [2, 0, 1] value = 1.500000e+00 : tensor<2x3x6xf32> -> tensor<5x3x8xf32>
  %5 = graph.pad %4 low = [1, 0, 1] high = [2, 0, 1] value = 1.5 : tensor<2x3x6xf32> -> tensor<5x3x8xf32>
  // CHECK-NEXT: graph.pad %{{.*}} low = [0, 0] high = [1, 1] : tensor<6x4xf32> -> tensor<7x5xf32>
  %6 = graph.pad %1 low = [0, 0] high = [1, 1] : tensor<6x4xf32> -> tensor<7x5xf32>
  func.return %5 : tensor<5x3x8xf32>
}

// -----

// CHECK-LABEL: func.func @gather
func.func @gather(%table: tensor<10x4xf32>, %ids: tensor<2x5xi64>, %i: tensor<3xi32>, %s: tensor<i64>, %b: tensor<3x2xi1>) -> tensor<2x5x4xf32> {
  // CHECK-NEXT: graph.gather %{{.*}}, %{{.*}} axis = 0 : (tensor<10x4xf32>, tensor<2x5xi64>) -> tensor<2x5x4xf32>
  %0 = graph.gather %table, %ids axis = 0 : (tensor<10x4xf32>, tensor<2x5xi64>) -> tensor<2x5x4xf32>
  // CHECK-NEXT: graph.gather %{{.*}}, %{{.*}} axis = -1 : (tensor<10x4xf32>, tensor<3xi32>) -> tensor<10x3xf32>
  %1 = graph.gather %table, %i axis = -1 : (tensor<10x4xf32>, tensor<3xi32>) -> tensor<10x3xf32>
  // CHECK-NEXT: graph.gather %{{.*}}, %{{.*}} axis = 1 : (tensor<10x4xf32>, tensor<i64>) -> tensor<10xf32>
  %2 = graph.gather %table, %s axis = 1 : (tensor<10x4xf32>, tensor<i64>) -> tensor<10xf32>
  // CHECK-NEXT: graph.gather %{{.*}}, %{{.*}} axis = 0 : (tensor<3x2xi1>, tensor<3xi32>) -> tensor<3x2xi1>
  %3 = graph.gather %b, %i axis = 0 : (tensor<3x2xi1>, tensor<3xi32>) -> tensor<3x2xi1>
  func.return %0 : tensor<2x5x4xf32>
}

// -----

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x3x4xf32>, %i: tensor<2x3xi32>) -> tensor<2xf32> {
  // CHECK-NEXT: graph.reduce_sum %{{.*}} axes = [1, 2] : tensor<2x3x4xf32> -> tensor<2xf32>
  %0 = graph.reduce_sum %x axes = [1, 2] : tensor<2x3x4xf32> -> tensor<2xf32>
  // CHECK-NEXT: graph.reduce_max %{{.*}} axes = [-1] keepdims : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  %1 = graph.reduce_max %x axes = [-1] keepdims : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  // CHECK-NEXT: graph.reduce_min %{{.*}} axes = [0] : tensor<2x3xi32> -> tensor<3xi32>
  %2 = graph.reduce_min %i axes = [0] : tensor<2x3xi32> -> tensor<3xi32>
  // CHECK-NEXT: graph.reduce_mean %{{.*}} axes = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  %3 = graph.reduce_mean %x axes = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  func.return %0 : tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func @anchors
func.func @anchors(%a: tensor<3x4x5xf32>, %b: tensor<5x6xf32>, %x: tensor<1x4x9x9xf32>, %w: tensor<8x2x3x3xf32>) -> tensor<3x4x6xf32> {
  // CHECK-NEXT: graph.matmul %{{.*}}, %{{.*}} : (tensor<3x4x5xf32>, tensor<5x6xf32>) -> tensor<3x4x6xf32>
  %0 = graph.matmul %a, %b : (tensor<3x4x5xf32>, tensor<5x6xf32>) -> tensor<3x4x6xf32>
  // CHECK-NEXT: graph.conv2d %{{.*}}, %{{.*}} strides = [2, 2] padding = [1, 1, 1, 1] dilations = [1, 2] groups = 2 : (tensor<1x4x9x9xf32>, tensor<8x2x3x3xf32>) -> tensor<1x8x5x4xf32>
  %1 = graph.conv2d %x, %w strides = [2, 2] padding = [1, 1, 1, 1] dilations = [1, 2] groups = 2 : (tensor<1x4x9x9xf32>, tensor<8x2x3x3xf32>) -> tensor<1x8x5x4xf32>
  // CHECK-NEXT: graph.constant dense<1.000000e+00> : tensor<8x4x3x3xf32>
  %w2 = graph.constant dense<1.0> : tensor<8x4x3x3xf32>
  // CHECK-NEXT: graph.conv2d %{{.*}}, %{{.*}} : (tensor<1x4x9x9xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x7x7xf32>
  %2 = graph.conv2d %x, %w2 : (tensor<1x4x9x9xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x7x7xf32>
  // CHECK-NEXT: graph.max_pool2d %{{.*}} kernel = [3, 3] strides = [2, 2] padding = [1, 1, 1, 1] : tensor<1x4x9x9xf32> -> tensor<1x4x5x5xf32>
  %3 = graph.max_pool2d %x kernel = [3, 3] strides = [2, 2] padding = [1, 1, 1, 1] : tensor<1x4x9x9xf32> -> tensor<1x4x5x5xf32>
  // CHECK-NEXT: graph.avg_pool2d %{{.*}} kernel = [2, 2] strides = [2, 2] : tensor<1x4x9x9xf32> -> tensor<1x4x4x4xf32>
  %4 = graph.avg_pool2d %x kernel = [2, 2] strides = [2, 2] : tensor<1x4x9x9xf32> -> tensor<1x4x4x4xf32>
  // CHECK-NEXT: graph.avg_pool2d %{{.*}} kernel = [3, 3] padding = [1, 1, 1, 1] count_include_pad : tensor<1x4x9x9xf32> -> tensor<1x4x9x9xf32>
  %5 = graph.avg_pool2d %x kernel = [3, 3] padding = [1, 1, 1, 1] count_include_pad : tensor<1x4x9x9xf32> -> tensor<1x4x9x9xf32>
  func.return %0 : tensor<3x4x6xf32>
}

// -----

// CHECK-LABEL: func.func @compound
func.func @compound(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %img: tensor<1x3x4x4xf32>, %c: tensor<3xf32>) -> tensor<2x8x16xf32> {
  // CHECK-NEXT: graph.softmax %{{.*}} axis = -1 : tensor<2x8x16xf32>
  %0 = graph.softmax %x axis = -1 : tensor<2x8x16xf32>
  // CHECK-NEXT: graph.log_softmax %{{.*}} axis = 1 : tensor<2x8x16xf32>
  %1 = graph.log_softmax %x axis = 1 : tensor<2x8x16xf32>
  // CHECK-NEXT: graph.layer_norm %{{.*}}, %{{.*}}, %{{.*}} axis = 2 epsilon = 1.000000e-06 : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %2 = graph.layer_norm %x, %g, %g axis = 2 epsilon = 1.0e-06 : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK-NEXT: graph.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  %3 = graph.batch_norm %img, %c, %c, %c, %c : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  // CHECK-NEXT: graph.gelu %{{.*}} : tensor<2x8x16xf32>
  %4 = graph.gelu %2 : tensor<2x8x16xf32>
  // CHECK-NEXT: graph.gelu %{{.*}} approximate = tanh : tensor<2x8x16xf32>
  %5 = graph.gelu %2 approximate = tanh : tensor<2x8x16xf32>
  // CHECK-NEXT: graph.silu %{{.*}} : tensor<2x8x16xf32>
  %6 = graph.silu %5 : tensor<2x8x16xf32>
  func.return %6 : tensor<2x8x16xf32>
}

// -----

// CHECK-LABEL: func.func @opaque
func.func @opaque(%x: tensor<4x10xf32>) -> tensor<4x3xi64> {
  // CHECK-NEXT: graph.sort %{{.*}} axis = 1 descending : tensor<4x10xf32>
  %0 = graph.sort %x axis = 1 descending : tensor<4x10xf32>
  // CHECK-NEXT: %{{.*}}, %{{.*}} = graph.top_k %{{.*}} k = 3 axis = -1 : (tensor<4x10xf32>) -> (tensor<4x3xf32>, tensor<4x3xi64>)
  %1, %2 = graph.top_k %x k = 3 axis = -1 : (tensor<4x10xf32>) -> (tensor<4x3xf32>, tensor<4x3xi64>)
  // CHECK-NEXT: graph.external "my_kernel"(%{{.*}}, %{{.*}}) : (tensor<4x10xf32>, tensor<4x3xf32>) -> tensor<4x10xf32>
  %3 = graph.external "my_kernel"(%0, %1) : (tensor<4x10xf32>, tensor<4x3xf32>) -> tensor<4x10xf32>
  func.return %2 : tensor<4x3xi64>
}

// -----

// CHECK-LABEL: func.func @structure
func.func @structure(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  // CHECK-NEXT: %[[C:.*]] = graph.constant dense<2.000000e+00> : tensor<8xf32>
  %c = graph.constant dense<2.0> : tensor<8xf32>
  // CHECK-NEXT: %{{.*}}, %{{.*}} = graph.fused "fused_add_relu_reduce_sum"(%{{.*}}, %[[C]]) kind = reduction : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  // CHECK-NEXT: ^{{.*}}(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>):
  // CHECK-NEXT:   %[[S:.*]] = graph.add %[[A]], %[[B]]
  // CHECK-NEXT:   %[[R:.*]] = graph.relu %[[S]]
  // CHECK-NEXT:   %[[T:.*]] = graph.reduce_sum %[[R]] axes = [1]
  // CHECK-NEXT:   graph.yield %[[R]], %[[T]] : tensor<4x8xf32>, tensor<4xf32>
  // CHECK-NEXT: }
  %0, %1 = graph.fused "fused_add_relu_reduce_sum" (%x, %c) kind = reduction : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8xf32>):
    %s = graph.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r = graph.relu %s : tensor<4x8xf32>
    %t = graph.reduce_sum %r axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
    graph.yield %r, %t : tensor<4x8xf32>, tensor<4xf32>
  }
  func.return %0, %1 : tensor<4x8xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @element_types
func.func @element_types(%u: tensor<4xui8>, %i: tensor<4xi16>, %d: tensor<4xf64>, %b: tensor<4xi1>) -> tensor<4xui8> {
  // CHECK-NEXT: %[[K:.*]] = graph.constant dense<[1, 200, 3, 255]> : tensor<4xui8>
  %k = graph.constant dense<[1, 200, 3, 255]> : tensor<4xui8>
  // CHECK-NEXT: %[[M:.*]] = graph.mod %{{.*}}, %[[K]] fmod : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  %0 = graph.mod %u, %k fmod : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  // CHECK-NEXT: graph.mod %{{.*}}, %{{.*}} : (tensor<4xi16>, tensor<4xi16>) -> tensor<4xi16>
  %1 = graph.mod %i, %i : (tensor<4xi16>, tensor<4xi16>) -> tensor<4xi16>
  // CHECK-NEXT: graph.shift_left %{{.*}}, %{{.*}} : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  %2 = graph.shift_left %0, %k : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  // CHECK-NEXT: graph.shift_right %{{.*}}, %{{.*}} : (tensor<4xi16>, tensor<4xi16>) -> tensor<4xi16>
  %3 = graph.shift_right %1, %i : (tensor<4xi16>, tensor<4xi16>) -> tensor<4xi16>
  // CHECK-NEXT: graph.bitwise_and %{{.*}}, %{{.*}} : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  %4 = graph.bitwise_and %2, %k : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  // CHECK-NEXT: graph.bitwise_or %{{.*}}, %{{.*}} : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  %5 = graph.bitwise_or %4, %k : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  // CHECK-NEXT: graph.bitwise_xor %{{.*}}, %{{.*}} : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  %6 = graph.bitwise_xor %5, %k : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  // CHECK-NEXT: graph.bitwise_not %{{.*}} : tensor<4xi16>
  %7 = graph.bitwise_not %3 : tensor<4xi16>
  // CHECK-NEXT: graph.sin %{{.*}} : tensor<4xf64>
  %8 = graph.sin %d : tensor<4xf64>
  // CHECK-NEXT: graph.atanh %{{.*}} : tensor<4xf64>
  %9 = graph.atanh %8 : tensor<4xf64>
  // CHECK-NEXT: graph.round %{{.*}} : tensor<4xf64>
  %10 = graph.round %9 : tensor<4xf64>
  // CHECK-NEXT: graph.sign %{{.*}} : tensor<4xi16>
  %11 = graph.sign %7 : tensor<4xi16>
  // CHECK-NEXT: graph.bitcast %{{.*}} : tensor<4xi1> -> tensor<4xui8>
  %12 = graph.bitcast %b : tensor<4xi1> -> tensor<4xui8>
  // CHECK-NEXT: graph.reduce_prod %{{.*}} axes = [0] : tensor<4xui8> -> tensor<ui8>
  %13 = graph.reduce_prod %12 axes = [0] : tensor<4xui8> -> tensor<ui8>
  func.return %6 : tensor<4xui8>
}
