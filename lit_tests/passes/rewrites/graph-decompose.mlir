// RUN: xdsl-opt %s -p graph-decompose --split-input-file | filecheck %s

// Softmax subtracts the row maximum before exp, so large inputs stay finite.
// CHECK-LABEL: func.func @softmax
// CHECK-NEXT: %[[MAX:.*]] = graph.reduce_max %x axes = [1] keepdims : tensor<4x16xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[SH:.*]] = graph.sub %x, %[[MAX]] : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[E:.*]] = graph.exp %[[SH]]
// CHECK-NEXT: %[[S:.*]] = graph.reduce_sum %[[E]] axes = [1] keepdims
// CHECK-NEXT: %[[Y:.*]] = graph.div %[[E]], %[[S]]
// CHECK-NEXT: func.return %[[Y]]
func.func @softmax(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %y = graph.softmax %x axis = -1 : tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}

// -----

// CHECK-LABEL: func.func @log_softmax
// CHECK-NEXT: %[[MAX:.*]] = graph.reduce_max %x axes = [0] keepdims
// CHECK-NEXT: %[[SH:.*]] = graph.sub %x, %[[MAX]]
// CHECK-NEXT: %[[E:.*]] = graph.exp %[[SH]]
// CHECK-NEXT: %[[S:.*]] = graph.reduce_sum %[[E]] axes = [0] keepdims
// CHECK-NEXT: %[[L:.*]] = graph.log %[[S]]
// CHECK-NEXT: %[[Y:.*]] = graph.sub %[[SH]], %[[L]]
// CHECK-NEXT: func.return %[[Y]]
func.func @log_softmax(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %y = graph.log_softmax %x axis = 0 : tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}

// -----

// layer_norm over the last two dims: mean and variance reduce axes [1, 2] (reduce_mean
// is itself opened into a sum and a multiply by 1/24).
// CHECK-LABEL: func.func @layer_norm
// CHECK-NEXT: %[[S:.*]] = graph.reduce_sum %x axes = [1, 2] keepdims : tensor<2x3x8xf32> -> tensor<2x1x1xf32>
// CHECK-NEXT: %[[N:.*]] = graph.constant dense<0.0416666{{[0-9]+}}> : tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = graph.mul %[[S]], %[[N]]
// CHECK-NEXT: %[[C:.*]] = graph.sub %x, %[[MEAN]]
// CHECK-NEXT: %[[SQ:.*]] = graph.mul %[[C]], %[[C]]
// CHECK-NEXT: %[[VS:.*]] = graph.reduce_sum %[[SQ]] axes = [1, 2] keepdims
// CHECK:      %[[EPS:.*]] = graph.constant dense<1.000000e-03> : tensor<f32>
// CHECK-NEXT: %[[VE:.*]] = graph.add %{{.*}}, %[[EPS]]
// CHECK-NEXT: %[[R:.*]] = graph.rsqrt %[[VE]]
// CHECK-NEXT: %[[NORM:.*]] = graph.mul %[[C]], %[[R]]
// CHECK-NEXT: %[[G:.*]] = graph.mul %[[NORM]], %g
// CHECK-NEXT: %[[Y:.*]] = graph.add %[[G]], %b
// CHECK-NEXT: func.return %[[Y]]
func.func @layer_norm(%x: tensor<2x3x8xf32>, %g: tensor<3x8xf32>, %b: tensor<3x8xf32>) -> tensor<2x3x8xf32> {
  %y = graph.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-03 : (tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32>
  func.return %y : tensor<2x3x8xf32>
}

// -----

// batch_norm computes scale / sqrt(var + eps) on the channel vectors, then sub, mul, add
// on the activation with the vectors reshaped to C x 1 x 1.
// CHECK-LABEL: func.func @batch_norm
// CHECK:      %[[VE:.*]] = graph.add %v, %{{.*}} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-NEXT: %[[R:.*]] = graph.rsqrt %[[VE]] : tensor<3xf32>
// CHECK-NEXT: %[[K:.*]] = graph.mul %s, %[[R]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT: %[[M3:.*]] = graph.reshape %m : tensor<3xf32> -> tensor<3x1x1xf32>
// CHECK-NEXT: %[[K3:.*]] = graph.reshape %[[K]] : tensor<3xf32> -> tensor<3x1x1xf32>
// CHECK-NEXT: %[[B3:.*]] = graph.reshape %b : tensor<3xf32> -> tensor<3x1x1xf32>
// CHECK-NEXT: %[[C:.*]] = graph.sub %x, %[[M3]] : (tensor<2x3x4x4xf32>, tensor<3x1x1xf32>) -> tensor<2x3x4x4xf32>
// CHECK-NEXT: %[[SC:.*]] = graph.mul %[[C]], %[[K3]]
// CHECK-NEXT: %[[Y:.*]] = graph.add %[[SC]], %[[B3]]
// CHECK-NEXT: func.return %[[Y]]
func.func @batch_norm(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<2x3x4x4xf32> {
  %y = graph.batch_norm %x, %s, %b, %m, %v : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  func.return %y : tensor<2x3x4x4xf32>
}

// -----

// CHECK-LABEL: func.func @gelu_erf
// CHECK:      %[[SC:.*]] = graph.mul %x, %{{.*}} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
// CHECK-NEXT: %[[E:.*]] = graph.erf %[[SC]]
// CHECK:      %[[P:.*]] = graph.add %[[E]], %{{.*}}
// CHECK-NEXT: %[[Q:.*]] = graph.mul %[[P]], %{{.*}}
// CHECK-NEXT: %[[Y:.*]] = graph.mul %x, %[[Q]]
// CHECK-NOT:  graph.tanh
// CHECK:      func.return %[[Y]]
func.func @gelu_erf(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = graph.gelu %x : tensor<8xf32>
  func.return %y : tensor<8xf32>
}

// -----

// CHECK-LABEL: func.func @gelu_tanh
// CHECK-NOT:  graph.erf
// CHECK:      %[[T:.*]] = graph.tanh %{{.*}} : tensor<8xf32>
// CHECK:      func.return
func.func @gelu_tanh(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = graph.gelu %x approximate = tanh : tensor<8xf32>
  func.return %y : tensor<8xf32>
}

// -----

// f16 and bf16 ops are opened in f32 between two casts, so the result is rounded once.
// CHECK-LABEL: func.func @silu
// CHECK-NEXT: %[[X:.*]] = graph.cast %x : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT: %[[S:.*]] = graph.sigmoid %[[X]] : tensor<8xf32>
// CHECK-NEXT: %[[M:.*]] = graph.mul %[[X]], %[[S]] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[Y:.*]] = graph.cast %[[M]] : tensor<8xf32> -> tensor<8xbf16>
// CHECK-NEXT: func.return %[[Y]]
func.func @silu(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %y = graph.silu %x : tensor<8xbf16>
  func.return %y : tensor<8xbf16>
}

// -----

// An f16 mean sums in f32 (an f16 sum of 4096 twenties would overflow to inf); the scalar
// constants take the computing type.
// CHECK-LABEL: func.func @reduce_mean
// CHECK-NEXT: %[[X:.*]] = graph.cast %x : tensor<4x8xf16> -> tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]] = graph.reduce_sum %[[X]] axes = [0, 1] : tensor<4x8xf32> -> tensor<f32>
// CHECK-NEXT: %[[N:.*]] = graph.constant dense<3.125000e-02> : tensor<f32>
// CHECK-NEXT: %[[M:.*]] = graph.mul %[[S]], %[[N]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: %[[Y:.*]] = graph.cast %[[M]] : tensor<f32> -> tensor<f16>
// CHECK-NEXT: func.return %[[Y]]
func.func @reduce_mean(%x: tensor<4x8xf16>) -> tensor<f16> {
  %y = graph.reduce_mean %x axes = [0, 1] : tensor<4x8xf16> -> tensor<f16>
  func.return %y : tensor<f16>
}

// -----

// Every f16 operand is cast: the parameters of a layer_norm too.
// CHECK-LABEL: func.func @layer_norm_f16
// CHECK-NEXT: %[[X:.*]] = graph.cast %x : tensor<2x4xf16> -> tensor<2x4xf32>
// CHECK-NEXT: %[[G:.*]] = graph.cast %g : tensor<4xf16> -> tensor<4xf32>
// CHECK-NEXT: %[[B:.*]] = graph.cast %b : tensor<4xf16> -> tensor<4xf32>
// CHECK:      %[[SC:.*]] = graph.mul %{{.*}}, %[[G]] : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[O:.*]] = graph.add %[[SC]], %[[B]]
// CHECK-NEXT: %[[Y:.*]] = graph.cast %[[O]] : tensor<2x4xf32> -> tensor<2x4xf16>
// CHECK-NEXT: func.return %[[Y]]
func.func @layer_norm_f16(%x: tensor<2x4xf16>, %g: tensor<4xf16>, %b: tensor<4xf16>) -> tensor<2x4xf16> {
  %y = graph.layer_norm %x, %g, %b axis = -1 : (tensor<2x4xf16>, tensor<4xf16>, tensor<4xf16>) -> tensor<2x4xf16>
  func.return %y : tensor<2x4xf16>
}

// -----

// Primitive ops are left alone.
// CHECK-LABEL: func.func @primitives_untouched
// CHECK-NEXT: %[[S:.*]] = graph.reduce_sum %x axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[E:.*]] = graph.exp %[[S]] : tensor<4xf32>
// CHECK-NEXT: %[[T:.*]] = graph.sort %[[E]] axis = 0 : tensor<4xf32>
// CHECK-NEXT: func.return %[[T]]
func.func @primitives_untouched(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %s = graph.reduce_sum %x axes = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %e = graph.exp %s : tensor<4xf32>
  %t = graph.sort %e axis = 0 : tensor<4xf32>
  func.return %t : tensor<4xf32>
}

// -----

// A batch-norm whose conv weights and statistics are constants folds into the conv:
// w' = w * gamma / sqrt(var + eps) per output channel, b' = (0 - mean) * k + beta.
// With gamma = 2, var = 3, eps = 1 (k = 1), mean = 1, beta = 0.5: w' = w, b' = -0.5.
// CHECK-LABEL: func.func @fold_conv_batch_norm
// CHECK-NEXT: %[[W:.*]] = graph.constant dense<3.000000e+00> : tensor<2x1x1x1xf32>
// CHECK-NEXT: %[[C:.*]] = graph.conv2d %x, %[[W]]
// CHECK-NEXT: %[[B:.*]] = graph.constant dense<-5.000000e-01> : tensor<1x2x1x1xf32>
// CHECK-NEXT: %[[Y:.*]] = graph.add %[[C]], %[[B]]
// CHECK-NOT:  graph.batch_norm
// CHECK:      func.return %[[Y]]
func.func @fold_conv_batch_norm(%x: tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = graph.constant dense<3.0> : tensor<2x1x1x1xf32>
  %gamma = graph.constant dense<2.0> : tensor<2xf32>
  %beta = graph.constant dense<0.5> : tensor<2xf32>
  %mean = graph.constant dense<1.0> : tensor<2xf32>
  %var = graph.constant dense<3.0> : tensor<2xf32>
  %c = graph.conv2d %x, %w : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %y = graph.batch_norm %c, %gamma, %beta, %mean, %var epsilon = 1.0 : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %y : tensor<1x2x4x4xf32>
}

// -----

// A batch-norm after a conv with non-constant weights is opened, not folded.
// CHECK-LABEL: func.func @no_fold_with_weight_argument
// CHECK:      graph.conv2d %x, %w
// CHECK:      graph.sub
// CHECK-NOT:  graph.batch_norm
func.func @no_fold_with_weight_argument(%x: tensor<1x1x4x4xf32>, %w: tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32> {
  %gamma = graph.constant dense<2.0> : tensor<2xf32>
  %beta = graph.constant dense<0.5> : tensor<2xf32>
  %mean = graph.constant dense<1.0> : tensor<2xf32>
  %var = graph.constant dense<3.0> : tensor<2xf32>
  %c = graph.conv2d %x, %w : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %y = graph.batch_norm %c, %gamma, %beta, %mean, %var epsilon = 1.0 : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %y : tensor<1x2x4x4xf32>
}

// -----

// A constant bias between them folds too when it is per channel (C on axis 1):
// b' = (b - mean) * k + beta = ([1, 2] - 1) * 1 + 0.5.
// CHECK-LABEL: func.func @fold_conv_bias_batch_norm
// CHECK-NEXT: %[[W:.*]] = graph.constant dense<3.000000e+00> : tensor<2x1x1x1xf32>
// CHECK-NEXT: %[[C:.*]] = graph.conv2d %x, %[[W]]
// CHECK-NEXT: %[[B:.*]] = graph.constant dense<{{\[\[\[\[}}5.000000e-01]], {{\[\[}}1.500000e+00]]]]> : tensor<1x2x1x1xf32>
// CHECK-NEXT: %[[Y:.*]] = graph.add %[[C]], %[[B]]
// CHECK-NEXT: func.return %[[Y]]
func.func @fold_conv_bias_batch_norm(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = graph.constant dense<3.0> : tensor<2x1x1x1xf32>
  %b = graph.constant dense<[[[1.0]], [[2.0]]]> : tensor<2x1x1xf32>
  %gamma = graph.constant dense<2.0> : tensor<2xf32>
  %beta = graph.constant dense<0.5> : tensor<2xf32>
  %mean = graph.constant dense<1.0> : tensor<2xf32>
  %var = graph.constant dense<3.0> : tensor<2xf32>
  %c = graph.conv2d %x, %w : (tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x2x2xf32>
  %a = graph.add %c, %b : (tensor<1x2x2x2xf32>, tensor<2x1x1xf32>) -> tensor<1x2x2x2xf32>
  %y = graph.batch_norm %a, %gamma, %beta, %mean, %var epsilon = 1.0 : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  func.return %y : tensor<1x2x2x2xf32>
}

// -----

// A bias of C elements that broadcasts along W (here C = W = 2) is not per channel: the
// batch-norm is opened, not folded.
// CHECK-LABEL: func.func @no_fold_bias_along_width
// CHECK:      %[[A:.*]] = graph.add %{{.*}}, %{{.*}} : (tensor<1x2x2x2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
// CHECK:      graph.sub %[[A]]
// CHECK-NOT:  graph.batch_norm
func.func @no_fold_bias_along_width(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = graph.constant dense<3.0> : tensor<2x1x1x1xf32>
  %b = graph.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %gamma = graph.constant dense<2.0> : tensor<2xf32>
  %beta = graph.constant dense<0.5> : tensor<2xf32>
  %mean = graph.constant dense<1.0> : tensor<2xf32>
  %var = graph.constant dense<3.0> : tensor<2xf32>
  %c = graph.conv2d %x, %w : (tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x2x2xf32>
  %a = graph.add %c, %b : (tensor<1x2x2x2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  %y = graph.batch_norm %a, %gamma, %beta, %mean, %var epsilon = 1.0 : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  func.return %y : tensor<1x2x2x2xf32>
}

// -----

// A bias that makes the sum larger than the conv's result (here 4x1x1x1 broadcasts N from
// 1 to 4) cannot be folded into the conv: the batch-norm is opened instead.
// CHECK-LABEL: func.func @no_fold_bias_grows_batch
// CHECK:      %[[A:.*]] = graph.add %{{.*}}, %{{.*}} : (tensor<1x4x1x1xf32>, tensor<4x1x1x1xf32>) -> tensor<4x4x1x1xf32>
// CHECK:      graph.sub %[[A]]
// CHECK-NOT:  graph.batch_norm
func.func @no_fold_bias_grows_batch(%x: tensor<1x2x1x1xf32>) -> tensor<4x4x1x1xf32> {
  %w = graph.constant dense<1.0> : tensor<4x2x1x1xf32>
  %b = graph.constant dense<[[[[1.0]]], [[[2.0]]], [[[3.0]]], [[[4.0]]]]> : tensor<4x1x1x1xf32>
  %g = graph.constant dense<2.0> : tensor<4xf32>
  %be = graph.constant dense<0.5> : tensor<4xf32>
  %m = graph.constant dense<0.1> : tensor<4xf32>
  %v = graph.constant dense<1.0> : tensor<4xf32>
  %c = graph.conv2d %x, %w : (tensor<1x2x1x1xf32>, tensor<4x2x1x1xf32>) -> tensor<1x4x1x1xf32>
  %a = graph.add %c, %b : (tensor<1x4x1x1xf32>, tensor<4x1x1x1xf32>) -> tensor<4x4x1x1xf32>
  %n = graph.batch_norm %a, %g, %be, %m, %v : (tensor<4x4x1x1xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x4x1x1xf32>
  func.return %n : tensor<4x4x1x1xf32>
}

// -----

// The same for a bias of higher rank, even though its C lines up with the conv's axis 1.
// CHECK-LABEL: func.func @no_fold_bias_grows_rank
// CHECK:      %[[A:.*]] = graph.add %{{.*}}, %{{.*}} : (tensor<1x2x1x1xf32>, tensor<1x1x2x1x1xf32>) -> tensor<1x1x2x1x1xf32>
// CHECK:      graph.sub %[[A]]
// CHECK-NOT:  graph.batch_norm
func.func @no_fold_bias_grows_rank(%x: tensor<1x1x1x1xf32>) -> tensor<1x1x2x1x1xf32> {
  %w = graph.constant dense<3.0> : tensor<2x1x1x1xf32>
  %b = graph.constant dense<[[[[[1.0]], [[2.0]]]]]> : tensor<1x1x2x1x1xf32>
  %p = graph.constant dense<2.0> : tensor<1xf32>
  %c = graph.conv2d %x, %w : (tensor<1x1x1x1xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x1x1xf32>
  %a = graph.add %c, %b : (tensor<1x2x1x1xf32>, tensor<1x1x2x1x1xf32>) -> tensor<1x1x2x1x1xf32>
  %n = graph.batch_norm %a, %p, %p, %p, %p : (tensor<1x1x2x1x1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x2x1x1xf32>
  func.return %n : tensor<1x1x2x1x1xf32>
}
