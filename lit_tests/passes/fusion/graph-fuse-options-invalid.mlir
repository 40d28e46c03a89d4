// Out-of-range graph-fuse and graph-simplify options are refused with one
// PassFailedException line naming the option and what it allows; no module is printed.
// RUN: not xdsl-opt %s -p 'graph-fuse{max-depth=-1}' 2>&1 | filecheck %s --check-prefix=DEPTH-NEG
// RUN: not xdsl-opt %s -p 'graph-fuse{max-depth=0}' 2>&1 | filecheck %s --check-prefix=DEPTH-ZERO
// RUN: not xdsl-opt %s -p 'graph-fuse{target=tpu}' 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not xdsl-opt %s -p 'graph-fuse{horizontal-max-bytes=-1}' 2>&1 | filecheck %s --check-prefix=HBYTES
// RUN: not xdsl-opt %s -p 'graph-fuse{max-inputs=0}' 2>&1 | filecheck %s --check-prefix=INPUTS
// RUN: not xdsl-opt %s -p 'graph-fuse{max-results=0}' 2>&1 | filecheck %s --check-prefix=RESULTS
// RUN: not xdsl-opt %s -p 'graph-fuse{rules="%t.missing.mlir"}' 2>&1 | filecheck %s --check-prefix=RULES
// RUN: not xdsl-opt %s -p 'graph-simplify{rules="%t.missing.mlir"}' 2>&1 | filecheck %s --check-prefix=RULES
// With --verify-diagnostics xdsl-opt prints the diagnostic alone, as one line.
// RUN: xdsl-opt %s -p 'graph-fuse{max-depth=-1}' --verify-diagnostics | filecheck %s --check-prefix=ONE-LINE

// DEPTH-NEG: PassFailedException: graph-fuse: option max-depth must be >= 1, got -1
// DEPTH-NEG-NOT: builtin.module
// DEPTH-ZERO: PassFailedException: graph-fuse: option max-depth must be >= 1, got 0
// TARGET: PassFailedException: graph-fuse: unknown target 'tpu'; valid targets: cpu, h100 (option target, the cost-model preset)
// HBYTES: PassFailedException: graph-fuse: option horizontal-max-bytes must be >= 0, got -1
// INPUTS: PassFailedException: graph-fuse: option max-inputs must be >= 1, got 0
// RESULTS: PassFailedException: graph-fuse: option max-results must be >= 1, got 0
// RULES: PassFailedException: {{.*}}.missing.mlir: cannot read PDL rules (option rules): No such file or directory
// ONE-LINE: {{^}}graph-fuse: option max-depth must be >= 1, got -1{{$}}
// ONE-LINE-NOT: {{.}}

func.func @options_invalid(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.relu %x : tensor<4x8xf32>
  %1 = graph.exp %0 : tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}
