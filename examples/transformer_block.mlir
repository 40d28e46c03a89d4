// A pre-norm transformer encoder block: sequence 128, model width 256, 4 heads of 64,
// feed-forward width 1024, GELU. Weights are arguments; the attention scale is a constant.
func.func @main(%x: tensor<1x128x256xf32>,
                %ln1_g: tensor<256xf32>, %ln1_b: tensor<256xf32>,
                %wq: tensor<256x256xf32>, %bq: tensor<256xf32>,
                %wk: tensor<256x256xf32>, %bk: tensor<256xf32>,
                %wv: tensor<256x256xf32>, %bv: tensor<256xf32>,
                %wo: tensor<256x256xf32>, %bo: tensor<256xf32>,
                %ln2_g: tensor<256xf32>, %ln2_b: tensor<256xf32>,
                %w1: tensor<256x1024xf32>, %b1: tensor<1024xf32>,
                %w2: tensor<1024x256xf32>, %b2: tensor<256xf32>) -> tensor<1x128x256xf32> {
  // Attention.
  %ln1 = graph.layer_norm %x, %ln1_g, %ln1_b axis = 2 epsilon = 1.0e-05 : (tensor<1x128x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<1x128x256xf32>
  %q0 = graph.matmul %ln1, %wq : (tensor<1x128x256xf32>, tensor<256x256xf32>) -> tensor<1x128x256xf32>
  %q = graph.add %q0, %bq : (tensor<1x128x256xf32>, tensor<256xf32>) -> tensor<1x128x256xf32>
  %k0 = graph.matmul %ln1, %wk : (tensor<1x128x256xf32>, tensor<256x256xf32>) -> tensor<1x128x256xf32>
  %k = graph.add %k0, %bk : (tensor<1x128x256xf32>, tensor<256xf32>) -> tensor<1x128x256xf32>
  %v0 = graph.matmul %ln1, %wv : (tensor<1x128x256xf32>, tensor<256x256xf32>) -> tensor<1x128x256xf32>
  %v = graph.add %v0, %bv : (tensor<1x128x256xf32>, tensor<256xf32>) -> tensor<1x128x256xf32>
  %q4 = graph.reshape %q : tensor<1x128x256xf32> -> tensor<1x128x4x64xf32>
  %k4 = graph.reshape %k : tensor<1x128x256xf32> -> tensor<1x128x4x64xf32>
  %v4 = graph.reshape %v : tensor<1x128x256xf32> -> tensor<1x128x4x64xf32>
  %qh = graph.transpose %q4 perm = [0, 2, 1, 3] : tensor<1x128x4x64xf32> -> tensor<1x4x128x64xf32>
  %kh = graph.transpose %k4 perm = [0, 2, 3, 1] : tensor<1x128x4x64xf32> -> tensor<1x4x64x128xf32>
  %vh = graph.transpose %v4 perm = [0, 2, 1, 3] : tensor<1x128x4x64xf32> -> tensor<1x4x128x64xf32>
  %scores0 = graph.matmul %qh, %kh : (tensor<1x4x128x64xf32>, tensor<1x4x64x128xf32>) -> tensor<1x4x128x128xf32>
  %scale = graph.constant dense<1.250000e-01> : tensor<f32>
  %scores = graph.mul %scores0, %scale : (tensor<1x4x128x128xf32>, tensor<f32>) -> tensor<1x4x128x128xf32>
  %probs = graph.softmax %scores axis = -1 : tensor<1x4x128x128xf32>
  %ctx = graph.matmul %probs, %vh : (tensor<1x4x128x128xf32>, tensor<1x4x128x64xf32>) -> tensor<1x4x128x64xf32>
  %ctx_t = graph.transpose %ctx perm = [0, 2, 1, 3] : tensor<1x4x128x64xf32> -> tensor<1x128x4x64xf32>
  %ctx2 = graph.reshape %ctx_t : tensor<1x128x4x64xf32> -> tensor<1x128x256xf32>
  %o0 = graph.matmul %ctx2, %wo : (tensor<1x128x256xf32>, tensor<256x256xf32>) -> tensor<1x128x256xf32>
  %o = graph.add %o0, %bo : (tensor<1x128x256xf32>, tensor<256xf32>) -> tensor<1x128x256xf32>
  %res1 = graph.add %x, %o : (tensor<1x128x256xf32>, tensor<1x128x256xf32>) -> tensor<1x128x256xf32>
  // Feed-forward.
  %ln2 = graph.layer_norm %res1, %ln2_g, %ln2_b axis = 2 epsilon = 1.0e-05 : (tensor<1x128x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<1x128x256xf32>
  %h0 = graph.matmul %ln2, %w1 : (tensor<1x128x256xf32>, tensor<256x1024xf32>) -> tensor<1x128x1024xf32>
  %h1 = graph.add %h0, %b1 : (tensor<1x128x1024xf32>, tensor<1024xf32>) -> tensor<1x128x1024xf32>
  %h = graph.gelu %h1 : tensor<1x128x1024xf32>
  %f0 = graph.matmul %h, %w2 : (tensor<1x128x1024xf32>, tensor<1024x256xf32>) -> tensor<1x128x256xf32>
  %f = graph.add %f0, %b2 : (tensor<1x128x256xf32>, tensor<256xf32>) -> tensor<1x128x256xf32>
  %out = graph.add %res1, %f : (tensor<1x128x256xf32>, tensor<1x128x256xf32>) -> tensor<1x128x256xf32>
  func.return %out : tensor<1x128x256xf32>
}
