// REQUIRES: mlir-opt
// The annotation scf-interleave-loops prints is upstream's: mlir-opt parses it, and
// its scf-to-cf lowering moves it onto the loop's back edge, where mlir-translate makes
// it `llvm.loop.interleave.count` metadata.
// RUN: xdsl-opt %S/scf-interleave-loops.mlir -p math-approximate,scf-interleave-loops --split-input-file | %mlir-opt --verify-each --split-input-file --convert-scf-to-cf | filecheck %s

// CHECK:       #[[COUNT:.*]] = #llvm.loop_interleave<count = 4 : i32>
// CHECK-NEXT:  #[[ANNOTATION:.*]] = #llvm.loop_annotation<interleave = #[[COUNT]]>
// CHECK-LABEL: func.func @tanh_rows(
// CHECK:       cf.br ^{{.*}} {loop_annotation = #[[ANNOTATION]]}
// CHECK-NEXT:  ^
// CHECK-NEXT:  arith.addi
// CHECK-NEXT:  cf.br ^{{.*}}(%{{.*}} : index){{$}}
// CHECK-LABEL: func.func @light(
// CHECK-NOT:   loop_annotation
// CHECK-LABEL: func.func @short(
