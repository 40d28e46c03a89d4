// A ResNet basic block (NCHW, 64 channels, 56x56): two conv -> batch-norm stages, a
// residual add and ReLUs. Batch-norm statistics are constants, as in an inference graph.
func.func @main(%x: tensor<1x64x56x56xf32>, %w1: tensor<64x64x3x3xf32>, %w2: tensor<64x64x3x3xf32>, %gamma1: tensor<64xf32>, %beta1: tensor<64xf32>, %gamma2: tensor<64xf32>, %beta2: tensor<64xf32>) -> tensor<1x64x56x56xf32> {
  %mean = graph.constant dense<5.000000e-02> : tensor<64xf32>
  %var = graph.constant dense<1.500000e+00> : tensor<64xf32>
  %c1 = graph.conv2d %x, %w1 padding = [1, 1, 1, 1] : (tensor<1x64x56x56xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x56x56xf32>
  %n1 = graph.batch_norm %c1, %gamma1, %beta1, %mean, %var epsilon = 1.0e-05 : (tensor<1x64x56x56xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
  %r1 = graph.relu %n1 : tensor<1x64x56x56xf32>
  %c2 = graph.conv2d %r1, %w2 padding = [1, 1, 1, 1] : (tensor<1x64x56x56xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x56x56xf32>
  %n2 = graph.batch_norm %c2, %gamma2, %beta2, %mean, %var epsilon = 1.0e-05 : (tensor<1x64x56x56xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
  %sum = graph.add %n2, %x : (tensor<1x64x56x56xf32>, tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
  %out = graph.relu %sum : tensor<1x64x56x56xf32>
  func.return %out : tensor<1x64x56x56xf32>
}
