// RUN: xdsl-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s
// One verifier rule per split; the expected message sits right under the bad op.

func.func @exp_int(%x: tensor<4xi32>) {
  %0 = graph.exp %x : tensor<4xi32>
  // CHECK: Unexpected attribute i32
  func.return
}

// -----

func.func @unary_f80(%x: tensor<4xf80>) {
  %0 = graph.neg %x : tensor<4xf80>
  // CHECK: Unexpected attribute f80
  func.return
}

// -----

func.func @bitwise_float(%x: tensor<4xf32>) {
  %0 = graph.bitwise_and %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: f32 should be one of i8, i16, i32, i64, ui8, ui16, ui32, ui64
  func.return
}

// -----

func.func @unsigned_i1(%x: tensor<4xui1>) {
  %0 = graph.neg %x : tensor<4xui1>
  // CHECK: ui1 should be one of i8, i16, i32, i64, ui8, ui16, ui32, ui64
  func.return
}

// -----

func.func @bitcast_width(%x: tensor<4xf32>) {
  %0 = graph.bitcast %x : tensor<4xf32> -> tensor<4xi16>
  // CHECK: result element type i16 has 2 bytes, expected 4 (the input's f32; not i1)
  func.return
}

// -----

func.func @unary_type(%x: tensor<4xf32>) {
  %0 = "graph.neg"(%x) : (tensor<4xf32>) -> tensor<5xf32>
  // CHECK: attribute tensor<4xf32> expected from variable 'T', but got tensor<5xf32>
  func.return
}

// -----

func.func @add_bcast(%x: tensor<4x8xf32>, %y: tensor<3xf32>) {
  %0 = graph.add %x, %y : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>
  // CHECK: operand shapes 4x8 and 3 are not broadcast-compatible (sizes 3 and 8 meet at result dimension #1)
  func.return
}

// -----

func.func @add_result(%x: tensor<4x8xf32>, %y: tensor<8xf32>) {
  %0 = graph.add %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<8xf32>
  // CHECK: result #0 has shape 8, expected 4x8 (broadcast of the operand shapes)
  func.return
}

// -----

func.func @add_elt(%x: tensor<4xf32>, %y: tensor<4xi32>) {
  %0 = graph.add %x, %y : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  // CHECK: attribute f32 expected from variable 'E', but got i32
  func.return
}

// -----

func.func @cast_shape(%x: tensor<4xf32>) {
  %0 = graph.cast %x : tensor<4xf32> -> tensor<2x2xi32>
  // CHECK: result #0 has shape 2x2, expected 4 (a cast keeps the shape)
  func.return
}

// -----

func.func @compare_result(%x: tensor<4xf32>) {
  %0 = graph.compare lt, %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: Expected attribute i1 but got f32
  func.return
}

// -----

func.func @compare_pred(%x: tensor<4xf32>) {
  %0 = graph.compare less, %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  // CHECK: Expected `eq`, `ne`, `lt`, `le`, `gt`, or `ge`.
  func.return
}

// -----

func.func @select_cond(%c: tensor<4xf32>, %x: tensor<4xf32>) {
  %0 = graph.select %c, %x, %x : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: Expected attribute i1 but got f32
  func.return
}

// -----

func.func @select_bcast(%c: tensor<3xi1>, %x: tensor<4xf32>) {
  %0 = graph.select %c, %x, %x : (tensor<3xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: operand shapes 3 and 4 and 4 are not broadcast-compatible (sizes 3 and 4 meet at result dimension #0)
  func.return
}

// -----

func.func @broadcast_to(%x: tensor<3x4xf32>) {
  %0 = graph.broadcast_to %x : tensor<3x4xf32> -> tensor<2x4xf32>
  // CHECK: operand shapes 3x4 and 2x4 are not broadcast-compatible (sizes 2 and 3 meet at result dimension #0)
  func.return
}

// -----

func.func @broadcast_to_rank(%x: tensor<3x4xf32>) {
  %0 = graph.broadcast_to %x : tensor<3x4xf32> -> tensor<4xf32>
  // CHECK: input shape 3x4 cannot be broadcast to 4
  func.return
}

// -----

func.func @reshape(%x: tensor<3x4xf32>) {
  %0 = graph.reshape %x : tensor<3x4xf32> -> tensor<5x2xf32>
  // CHECK: reshape from 3x4 (12 elements) to 5x2 (10 elements) changes the element count
  func.return
}

// -----

func.func @transpose_perm(%x: tensor<3x4xf32>) {
  %0 = graph.transpose %x perm = [0, 0] : tensor<3x4xf32> -> tensor<3x3xf32>
  // CHECK: perm [0, 0] is not a permutation of the 2 input dimensions
  func.return
}

// -----

func.func @transpose_result(%x: tensor<3x4xf32>) {
  %0 = graph.transpose %x perm = [1, 0] : tensor<3x4xf32> -> tensor<3x4xf32>
  // CHECK: result #0 has shape 3x4, expected 4x3 (input transposed by perm [1, 0])
  func.return
}

// -----

func.func @slice_rank(%x: tensor<3x4xf32>) {
  %0 = graph.slice %x starts = [0, 0] strides = [1, 1] : tensor<3x4xf32> -> tensor<3xf32>
  // CHECK: result rank 1 differs from input rank 2
  func.return
}

// -----

func.func @slice_starts(%x: tensor<3x4xf32>) {
  %0 = graph.slice %x starts = [0] strides = [1, 1] : tensor<3x4xf32> -> tensor<3x4xf32>
  // CHECK: starts and strides need 2 entries (the input rank), got 1 and 2
  func.return
}

// -----

func.func @slice_bounds(%x: tensor<3x4xf32>) {
  %0 = graph.slice %x starts = [0, 1] strides = [1, 2] : tensor<3x4xf32> -> tensor<3x3xf32>
  // CHECK: dimension #1: slice of 3 from 1 with stride 2 reads past the input extent 4
  func.return
}

// -----

func.func @slice_stride(%x: tensor<3x4xf32>) {
  %0 = graph.slice %x starts = [0, 0] strides = [1, 0] : tensor<3x4xf32> -> tensor<3x2xf32>
  // CHECK: dimension #1: stride 0 is not positive
  func.return
}

// -----

func.func @concat_dims(%x: tensor<3x4xf32>, %y: tensor<2x5xf32>) {
  %0 = graph.concat %x, %y axis = 0 : (tensor<3x4xf32>, tensor<2x5xf32>) -> tensor<5x4xf32>
  // CHECK: input #1 has shape 2x5, expected 3x4 outside axis 0
  func.return
}

// -----

func.func @concat_axis(%x: tensor<3x4xf32>) {
  %0 = graph.concat %x, %x axis = 2 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<6x4xf32>
  // CHECK: axis 2 is out of range for rank 2
  func.return
}

// -----

func.func @concat_result(%x: tensor<3x4xf32>) {
  %0 = graph.concat %x, %x axis = -1 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<6x4xf32>
  // CHECK: result #0 has shape 6x4, expected 3x8 (concatenation along axis -1)
  func.return
}

// -----

func.func @concat_empty() {
  %0 = "graph.concat"() <{axis = 0 : i64}> : () -> tensor<6x4xf32>
  // CHECK: concat needs at least one input
  func.return
}

// -----

func.func @gather_float_indices(%x: tensor<10x4xf32>, %i: tensor<3xf32>) {
  %0 = graph.gather %x, %i axis = 0 : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  // CHECK: indices must be a tensor of i32 or i64
  func.return
}

// -----

func.func @gather_bool_indices(%x: tensor<10x4xf32>, %i: tensor<3xi1>) {
  %0 = graph.gather %x, %i axis = 0 : (tensor<10x4xf32>, tensor<3xi1>) -> tensor<3x4xf32>
  // CHECK: indices must be a tensor of i32 or i64
  func.return
}

// -----

func.func @gather_axis(%x: tensor<10x4xf32>, %i: tensor<3xi64>) {
  %0 = graph.gather %x, %i axis = -3 : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  // CHECK: axis -3 is out of range for rank 2
  func.return
}

// -----

func.func @gather_result(%x: tensor<10x4xf32>, %i: tensor<2x3xi64>) {
  %0 = graph.gather %x, %i axis = -1 : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  // CHECK: result #0 has shape 2x3x4, expected 10x2x3 (gather along axis -1)
  func.return
}

// -----

func.func @gather_element_type(%x: tensor<10x4xf32>, %i: tensor<3xi64>) {
  %0 = graph.gather %x, %i axis = 0 : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf16>
  // CHECK: attribute f32 expected from variable 'E', but got f16
  func.return
}

// -----

func.func @gather_scalar_data(%x: tensor<f32>, %i: tensor<3xi64>) {
  %0 = graph.gather %x, %i axis = 0 : (tensor<f32>, tensor<3xi64>) -> tensor<3xf32>
  // CHECK: data must have rank at least 1, got a scalar
  func.return
}

// -----

func.func @gather_empty_axis(%x: tensor<0x4xf32>, %i: tensor<2xi64>) {
  %0 = graph.gather %x, %i axis = 0 : (tensor<0x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  // CHECK: cannot gather 2 indices from axis 0 of extent 0 (data 0x4)
  func.return
}

// -----

func.func @pad_negative(%x: tensor<3x4xf32>) {
  %0 = graph.pad %x low = [0, -1] high = [0, 0] : tensor<3x4xf32> -> tensor<3x3xf32>
  // CHECK: padding must be non-negative, got [0, -1], [0, 0]
  func.return
}

// -----

func.func @pad_length(%x: tensor<3x4xf32>) {
  %0 = graph.pad %x low = [0] high = [0, 0] : tensor<3x4xf32> -> tensor<3x4xf32>
  // CHECK: low and high need 2 entries (the input rank), got 1 and 2
  func.return
}

// -----

func.func @pad_result(%x: tensor<3x4xf32>) {
  %0 = graph.pad %x low = [1, 1] high = [1, 1] : tensor<3x4xf32> -> tensor<5x5xf32>
  // CHECK: result #0 has shape 5x5, expected 5x6 (input padded by [1, 1], [1, 1])
  func.return
}

// -----

func.func @reduce_axis(%x: tensor<3x4xf32>) {
  %0 = graph.reduce_sum %x axes = [2] : tensor<3x4xf32> -> tensor<3xf32>
  // CHECK: axis 2 is out of range for rank 2
  func.return
}

// -----

func.func @reduce_repeat(%x: tensor<3x4xf32>) {
  %0 = graph.reduce_max %x axes = [1, -1] : tensor<3x4xf32> -> tensor<3xf32>
  // CHECK: axes [1, -1] contain a repeated axis
  func.return
}

// -----

func.func @reduce_keepdims(%x: tensor<3x4xf32>) {
  %0 = graph.reduce_min %x axes = [1] keepdims : tensor<3x4xf32> -> tensor<3xf32>
  // CHECK: result #0 has shape 3, expected 3x1 (reduction over axes [1])
  func.return
}

// -----

func.func @reduce_mean_int(%x: tensor<3x4xi32>) {
  %0 = graph.reduce_mean %x axes = [1] : tensor<3x4xi32> -> tensor<3xi32>
  // CHECK: Unexpected attribute i32
  func.return
}

// -----

func.func @matmul_rank(%x: tensor<4xf32>, %y: tensor<4x5xf32>) {
  %0 = graph.matmul %x, %y : (tensor<4xf32>, tensor<4x5xf32>) -> tensor<5xf32>
  // CHECK: matmul operands must have rank >= 2, got 4 and 4x5
  func.return
}

// -----

func.func @matmul_k(%x: tensor<3x4xf32>, %y: tensor<5x6xf32>) {
  %0 = graph.matmul %x, %y : (tensor<3x4xf32>, tensor<5x6xf32>) -> tensor<3x6xf32>
  // CHECK: contraction dimensions differ: lhs 3x4 has K=4, rhs 5x6 has K=5
  func.return
}

// -----

func.func @matmul_batch(%x: tensor<2x3x4xf32>, %y: tensor<3x4x6xf32>) {
  %0 = graph.matmul %x, %y : (tensor<2x3x4xf32>, tensor<3x4x6xf32>) -> tensor<2x3x6xf32>
  // CHECK: operand shapes 2 and 3 are not broadcast-compatible (sizes 2 and 3 meet at result dimension #0)
  func.return
}

// -----

func.func @matmul_result(%x: tensor<3x4xf32>, %y: tensor<4x6xf32>) {
  %0 = graph.matmul %x, %y : (tensor<3x4xf32>, tensor<4x6xf32>) -> tensor<3x4xf32>
  // CHECK: result #0 has shape 3x4, expected 3x6 (batched matmul of the operand shapes)
  func.return
}

// -----

func.func @conv_rank(%x: tensor<4x9x9xf32>, %w: tensor<8x4x3x3xf32>) {
  %0 = graph.conv2d %x, %w : (tensor<4x9x9xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x7x7xf32>
  // CHECK: conv2d expects a rank-4 NCHW input and OIHW weight, got 4x9x9 and 8x4x3x3
  func.return
}

// -----

func.func @conv_groups(%x: tensor<1x4x9x9xf32>, %w: tensor<8x4x3x3xf32>) {
  %0 = graph.conv2d %x, %w groups = 3 : (tensor<1x4x9x9xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x7x7xf32>
  // CHECK: groups=3 must divide input channels 4 and output channels 8
  func.return
}

// -----

func.func @conv_channels(%x: tensor<1x4x9x9xf32>, %w: tensor<8x3x3x3xf32>) {
  %0 = graph.conv2d %x, %w : (tensor<1x4x9x9xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x7x7xf32>
  // CHECK: weight has 3 input channels per group, expected 4 (input channels 4 / groups 1)
  func.return
}

// -----

func.func @conv_strides(%x: tensor<1x4x9x9xf32>, %w: tensor<8x4x3x3xf32>) {
  %0 = graph.conv2d %x, %w strides = [0, 1] : (tensor<1x4x9x9xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x7x7xf32>
  // CHECK: strides must be two positive integers, got [0, 1]
  func.return
}

// -----

func.func @conv_padding(%x: tensor<1x4x9x9xf32>, %w: tensor<8x4x3x3xf32>) {
  %0 = graph.conv2d %x, %w padding = [1, 1] : (tensor<1x4x9x9xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x9x9xf32>
  // CHECK: padding must be four non-negative integers [top, left, bottom, right], got [1, 1]
  func.return
}

// -----

func.func @conv_dilations(%x: tensor<1x4x9x9xf32>, %w: tensor<8x4x3x3xf32>) {
  %0 = graph.conv2d %x, %w dilations = [1] : (tensor<1x4x9x9xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x7x7xf32>
  // CHECK: dilations must be two positive integers, got [1]
  func.return
}

// -----

func.func @conv_window(%x: tensor<1x4x2x2xf32>, %w: tensor<8x4x3x3xf32>) {
  %0 = graph.conv2d %x, %w : (tensor<1x4x2x2xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x1x1xf32>
  // CHECK: window of extent 3 does not fit in input extent 2 with padding 0
  func.return
}

// -----

func.func @conv_result(%x: tensor<1x4x9x9xf32>, %w: tensor<8x4x3x3xf32>) {
  %0 = graph.conv2d %x, %w strides = [2, 2] : (tensor<1x4x9x9xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x7x7xf32>
  // CHECK: result #0 has shape 1x8x7x7, expected 1x8x4x4 (conv2d of the input and weight shapes)
  func.return
}

// -----

func.func @pool_rank(%x: tensor<4x9x9xf32>) {
  %0 = graph.max_pool2d %x kernel = [2, 2] : tensor<4x9x9xf32> -> tensor<4x8x8xf32>
  // CHECK: pooling expects a rank-4 NCHW input, got 4x9x9
  func.return
}

// -----

func.func @pool_kernel(%x: tensor<1x4x9x9xf32>) {
  %0 = graph.max_pool2d %x kernel = [0, 2] : tensor<1x4x9x9xf32> -> tensor<1x4x8x8xf32>
  // CHECK: kernel must be two positive integers, got [0, 2]
  func.return
}

// -----

func.func @pool_padding(%x: tensor<1x4x9x9xf32>) {
  %0 = graph.avg_pool2d %x kernel = [2, 2] padding = [2, 0, 0, 0] : tensor<1x4x9x9xf32> -> tensor<1x4x10x8xf32>
  // CHECK: padding [2, 0, 0, 0] must be smaller than the kernel [2, 2]
  func.return
}

// -----

func.func @pool_result(%x: tensor<1x4x9x9xf32>) {
  %0 = graph.max_pool2d %x kernel = [3, 3] strides = [2, 2] : tensor<1x4x9x9xf32> -> tensor<1x4x3x3xf32>
  // CHECK: result #0 has shape 1x4x3x3, expected 1x4x4x4 (pooling of the input shape)
  func.return
}

// -----

func.func @softmax_axis(%x: tensor<3x4xf32>) {
  %0 = graph.softmax %x axis = 2 : tensor<3x4xf32>
  // CHECK: axis 2 is out of range for rank 2
  func.return
}

// -----

func.func @layer_norm_scale(%x: tensor<2x3x4xf32>, %g: tensor<3x4xf32>, %b: tensor<4xf32>) {
  %0 = graph.layer_norm %x, %g, %b axis = 2 : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  // CHECK: operand #1 has shape 3x4, expected 4 (the normalised dims)
  func.return
}

// -----

func.func @layer_norm_param_type(%x: tensor<2x4xf32>, %g: tensor<4xf16>) {
  %0 = graph.layer_norm %x, %g, %g axis = 1 : (tensor<2x4xf32>, tensor<4xf16>, tensor<4xf16>) -> tensor<2x4xf32>
  // CHECK: attribute f32 expected from variable 'E', but got f16
  func.return
}

// -----

func.func @layer_norm_result_type(%x: tensor<2x4xbf16>, %g: tensor<4xbf16>) {
  %0 = graph.layer_norm %x, %g, %g axis = 1 : (tensor<2x4xbf16>, tensor<4xbf16>, tensor<4xbf16>) -> tensor<2x4xf32>
  // CHECK: attribute tensor<2x4xbf16> expected from variable 'T', but got tensor<2x4xf32>
  func.return
}

// -----

func.func @batch_norm_rank(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  %0 = graph.batch_norm %x, %c, %c, %c, %c : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: input has rank 1, expected at least 2 (N, C, ...)
  func.return
}

// -----

func.func @batch_norm_param(%x: tensor<1x3x2x2xf32>, %c: tensor<3xf32>, %d: tensor<4xf32>) {
  %0 = graph.batch_norm %x, %c, %c, %d, %c : (tensor<1x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>) -> tensor<1x3x2x2xf32>
  // CHECK: operand #3 has shape 4, expected 3 (the channel count)
  func.return
}

// -----

func.func @batch_norm_param_type(%x: tensor<2x3xf16>, %c: tensor<3xf16>, %d: tensor<3xf32>) {
  %0 = graph.batch_norm %x, %c, %c, %c, %d : (tensor<2x3xf16>, tensor<3xf16>, tensor<3xf16>, tensor<3xf16>, tensor<3xf32>) -> tensor<2x3xf16>
  // CHECK: attribute f16 expected from variable 'E', but got f32
  func.return
}

// -----

func.func @gelu_approx(%x: tensor<4xf32>) {
  %0 = graph.gelu %x approximate = fast : tensor<4xf32>
  // CHECK: Expected `none`, or `tanh`.
  func.return
}

// -----

func.func @sort_axis(%x: tensor<3x4xf32>) {
  %0 = graph.sort %x axis = -3 : tensor<3x4xf32>
  // CHECK: axis -3 is out of range for rank 2
  func.return
}

// -----

func.func @top_k_k(%x: tensor<3x4xf32>) {
  %0, %1 = graph.top_k %x k = 5 axis = 1 : (tensor<3x4xf32>) -> (tensor<3x5xf32>, tensor<3x5xi64>)
  // CHECK: k=5 must be in [1, 4] (extent of axis)
  func.return
}

// -----

func.func @top_k_result(%x: tensor<3x4xf32>) {
  %0, %1 = graph.top_k %x k = 2 axis = 1 : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<2x2xi64>)
  // CHECK: result #1 has shape 2x2, expected 3x2 (top 2 along axis 1)
  func.return
}

// -----

func.func @constant_type() {
  %0 = "graph.constant"() <{value = dense<1.0> : tensor<4xf32>}> : () -> tensor<5xf32>
  // CHECK: attribute tensor<5xf32> expected from variable 'T', but got tensor<4xf32>
  func.return
}

// -----

func.func @fused_args(%x: tensor<4xf32>) {
  %0 = graph.fused "k" (%x) kind = elemwise : (tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%a: tensor<5xf32>):
  // CHECK: region arguments have types (tensor<5xf32>), expected (tensor<4xf32>) (the input types)
      %c = graph.constant dense<1.0> : tensor<4xf32>
      graph.yield %c : tensor<4xf32>
    }
  func.return
}

// -----

func.func @fused_yield(%x: tensor<4xf32>) {
  %0 = graph.fused "k" (%x) kind = elemwise : (tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%a: tensor<4xf32>):
      %s = graph.reduce_sum %a axes = [0] : tensor<4xf32> -> tensor<f32>
      graph.yield %s : tensor<f32>
  // CHECK: graph.yield gives (tensor<f32>), expected (tensor<4xf32>) (the result types)
    }
  func.return
}

// -----

func.func @fused_kind(%x: tensor<4xf32>) {
  %0 = graph.fused "k" (%x) kind = cheap : (tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: Expected `elemwise`, `broadcast`, `injective`, `reduction`, `out_elemwise_fusable`, `tuple`, or `opaque`.
    ^bb0(%a: tensor<4xf32>):
      graph.yield %a : tensor<4xf32>
    }
  func.return
}

// -----

func.func @fused_above(%x: tensor<4xf32>) {
  %0 = graph.fused "k" (%x) kind = elemwise : (tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%a: tensor<4xf32>):
      %e = graph.exp %x : tensor<4xf32>
  // CHECK: Operation using value defined out of its IsolatedFromAbove parent: ExpOp(%e = graph.exp %x : tensor<4xf32>)
      graph.yield %e : tensor<4xf32>
    }
  func.return
}

// -----

func.func @yield_parent(%x: tensor<4xf32>) {
  graph.yield %x : tensor<4xf32>
  // CHECK: 'graph.yield' expects parent op 'graph.fused'
  func.return
}

// -----

func.func @dynamic_operand(%x: tensor<?x8xf32>) {
  %0 = graph.transpose %x perm = [1, 0] : tensor<?x8xf32> -> tensor<8x4xf32>
  // CHECK: operand #0 has a dynamic dimension (#0 of tensor<?x8xf32>): dynamic dimensions are not supported yet
  func.return
}

// -----

func.func @dynamic_result(%x: tensor<4x8xf32>) {
  %0 = graph.transpose %x perm = [1, 0] : tensor<4x8xf32> -> tensor<8x?xf32>
  // CHECK: result #0 has a dynamic dimension (#1 of tensor<8x?xf32>): dynamic dimensions are not supported yet
  func.return
}
