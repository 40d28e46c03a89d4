// REQUIRES: mlir-opt
// The whole CPU lowering chain on the bundled examples, and convert-loop-to-upstream on the
// hand-written kernels of convert-loop-to-upstream.mlir, give IR that upstream mlir-opt
// parses and verifies, serial and with threads (scf.parallel).
// RUN: xdsl-opt %S/convert-loop-to-upstream.mlir -p convert-loop-to-upstream --split-input-file | %mlir-opt --verify-each --split-input-file | filecheck %s --check-prefix=CASES
// RUN: xdsl-opt %S/convert-loop-to-upstream.mlir -p 'convert-loop-to-upstream{parallel=true}' --split-input-file | %mlir-opt --verify-each --split-input-file | filecheck %s --check-prefix=CASES
// RUN: xdsl-opt %examples/transformer_block.mlir -p graph-fuse,convert-graph-to-loop,convert-loop-to-upstream,math-approximate | %mlir-opt --verify-each | filecheck %s --check-prefix=TRANSFORMER
// RUN: xdsl-opt %examples/resnet_block.mlir -p graph-fuse,convert-graph-to-loop,convert-loop-to-upstream,math-approximate | %mlir-opt --verify-each | filecheck %s --check-prefix=RESNET
// RUN: xdsl-opt %examples/transformer_block.mlir -p 'graph-fuse,convert-graph-to-loop,convert-loop-to-upstream{parallel=true},math-approximate' | %mlir-opt --verify-each | filecheck %s --check-prefix=THREADS

// CASES-LABEL: func.func @elementwise(
// CASES-LABEL: func.func @row_sum(
// CASES:       arith.addf {{.*}} fastmath<reassoc,contract> : f32
// CASES-LABEL: func.func @max_all(
// CASES-LABEL: func.func @combiners(
// CASES-LABEL: func.func @entry(
// CASES-SAME:  llvm.emit_c_interface
// CASES-LABEL: func.func @helper(

// Kernels are plain functions; only @main, the entry, gets the C interface. No graph or
// loop op survives, and GELU's erf is approximated.
// TRANSFORMER-NOT:   graph.
// TRANSFORMER-NOT:   loop.
// TRANSFORMER-NOT:   math.erf
// TRANSFORMER-NOT:   llvm.emit_c_interface
// TRANSFORMER:       func.func @main(
// TRANSFORMER-SAME:  attributes {graphfuse.outputs = 1 : i64, graphfuse.scratch = {{[0-9]+}} : i64, llvm.emit_c_interface}
// TRANSFORMER-NEXT:  call @fused_
// TRANSFORMER-NOT:   graph.
// TRANSFORMER-NOT:   loop.

// RESNET-NOT:        graph.
// RESNET-NOT:        loop.
// RESNET:            func.func @fused_conv2d_{{.*}} {
// RESNET:            scf.for
// RESNET:            func.func @main(
// RESNET-SAME:       llvm.emit_c_interface
// RESNET:            call @fused_conv2d_

// THREADS:           scf.parallel
// THREADS:           func.func @main(
// THREADS-SAME:      llvm.emit_c_interface
