// REQUIRES: mlir-opt
// The annotation scf-predicate-short-loops prints is upstream's: mlir-opt parses it
// and its scf-to-cf lowering moves it onto the loop's back edge, where mlir-translate makes
// it `llvm.loop.vectorize.*` (and `llvm.loop.unroll.disable`) metadata.
// RUN: xdsl-opt %S/scf-predicate-short-loops.mlir -p scf-predicate-short-loops --split-input-file | %mlir-opt --verify-each --split-input-file --convert-scf-to-cf | filecheck %s

// CHECK-DAG:   #[[VEC:.*]] = #llvm.loop_vectorize<disable = false, predicateEnable = true, width = 8 : i32>
// CHECK-DAG:   #[[ANNOTATION:.*]] = #llvm.loop_annotation<vectorize = #[[VEC]]>
// CHECK-LABEL: func.func @row_of_14(
// CHECK:       memref.store
// CHECK-NEXT:  arith.addi
// CHECK-NEXT:  cf.br ^{{.*}} {loop_annotation = #[[ANNOTATION]]}

// CHECK-DAG:   #[[UNROLL:.*]] = #llvm.loop_unroll<disable = true>
// CHECK-DAG:   #[[NO_UNROLL:.*]] = #llvm.loop_annotation<vectorize = #{{.*}}, unroll = #[[UNROLL]]>
// CHECK-LABEL: func.func @row_of_7(
// CHECK:       cf.br ^{{.*}} {loop_annotation = #[[NO_UNROLL]]}
// CHECK-LABEL: func.func @not_annotated(
// CHECK-NOT:   loop_annotation
