// Every bundled example prints, parses again and prints the same text.
// RUN: xdsl-opt %examples/transformer_block.mlir > %t.first.mlir
// RUN: xdsl-opt %t.first.mlir > %t.second.mlir
// RUN: diff %t.first.mlir %t.second.mlir
// RUN: filecheck %s --check-prefix=TRANSFORMER < %t.second.mlir
// RUN: xdsl-opt %examples/resnet_block.mlir > %t.r1.mlir
// RUN: xdsl-opt %t.r1.mlir > %t.r2.mlir
// RUN: diff %t.r1.mlir %t.r2.mlir
// RUN: filecheck %s --check-prefix=RESNET < %t.r2.mlir

// TRANSFORMER-LABEL: func.func @main
// TRANSFORMER: graph.layer_norm
// TRANSFORMER: graph.softmax
// TRANSFORMER: graph.layer_norm
// TRANSFORMER: graph.gelu
// TRANSFORMER: func.return

// RESNET-LABEL: func.func @main
// RESNET-COUNT-2: graph.conv2d
// RESNET: graph.add
// RESNET: graph.relu
// RESNET: func.return
