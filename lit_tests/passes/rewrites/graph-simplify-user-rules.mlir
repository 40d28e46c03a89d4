// RUN: xdsl-opt %s -p 'graph-simplify{rules="%S/Inputs/exp_of_log.mlir"}' | filecheck %s
// RUN: xdsl-opt %s -p graph-simplify | filecheck %s --check-prefix=BUILTIN
// RUN: not xdsl-opt %s -p 'graph-simplify{rules="%S/Inputs/unknown_op.mlir"}' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not xdsl-opt %s -p 'graph-simplify{rules="%S/Inputs/bad_syntax.mlir"}' 2>&1 | filecheck %s --check-prefix=SYNTAX

// CHECK-LABEL: func.func @exp_of_log
// CHECK-NEXT: %[[T:.*]] = graph.tanh %x
// CHECK-NEXT: func.return %[[T]]

// Without the user's rule nothing changes.
// BUILTIN-LABEL: func.func @exp_of_log
// BUILTIN-NEXT: graph.log
// BUILTIN-NEXT: graph.exp

// UNKNOWN: unknown_op.mlir:4:3: PDL rule names unknown op 'graph.expp'
// SYNTAX: bad_syntax.mlir:4:51: Expected ')'
func.func @exp_of_log(%x: tensor<8xf32>) -> tensor<8xf32> {
  %l = graph.log %x : tensor<8xf32>
  %e = graph.exp %l : tensor<8xf32>
  %t = graph.tanh %e : tensor<8xf32>
  func.return %t : tensor<8xf32>
}
