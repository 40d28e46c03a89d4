// Algebraic simplifications of the graph dialect, as PDL patterns (MLIR's pattern
// language, run by xDSL's PDL interpreter). A rule whose replacement must have the
// matched op's type binds one `pdl.type` to both, so x - 0 with a broadcasting x is left
// alone. `is_pos_zero`, `is_neg_zero` and `is_one` are native constraints: the value is a
// graph.constant whose every element is +0.0, -0.0 (any integer 0 for both) or 1.
//
// Only exact rewrites: x + (-0.0) and x - (+0.0) are x for every x, but x + (+0.0) and
// x - (-0.0) turn x = -0.0 into +0.0 (and 1 / x from -inf into +inf), so they stay.

pdl.pattern @add_neg_zero_rhs : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %z = pdl.operand
  %op = pdl.operation "graph.add"(%x, %z : !pdl.value, !pdl.value) -> (%t : !pdl.type)
  pdl.apply_native_constraint "is_neg_zero"(%z : !pdl.value)
  pdl.rewrite %op {
    pdl.replace %op with (%x : !pdl.value)
  }
}

pdl.pattern @add_neg_zero_lhs : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %z = pdl.operand
  %op = pdl.operation "graph.add"(%z, %x : !pdl.value, !pdl.value) -> (%t : !pdl.type)
  pdl.apply_native_constraint "is_neg_zero"(%z : !pdl.value)
  pdl.rewrite %op {
    pdl.replace %op with (%x : !pdl.value)
  }
}

pdl.pattern @sub_pos_zero : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %z = pdl.operand
  %op = pdl.operation "graph.sub"(%x, %z : !pdl.value, !pdl.value) -> (%t : !pdl.type)
  pdl.apply_native_constraint "is_pos_zero"(%z : !pdl.value)
  pdl.rewrite %op {
    pdl.replace %op with (%x : !pdl.value)
  }
}

pdl.pattern @mul_one_rhs : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %o = pdl.operand
  %op = pdl.operation "graph.mul"(%x, %o : !pdl.value, !pdl.value) -> (%t : !pdl.type)
  pdl.apply_native_constraint "is_one"(%o : !pdl.value)
  pdl.rewrite %op {
    pdl.replace %op with (%x : !pdl.value)
  }
}

pdl.pattern @mul_one_lhs : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %o = pdl.operand
  %op = pdl.operation "graph.mul"(%o, %x : !pdl.value, !pdl.value) -> (%t : !pdl.type)
  pdl.apply_native_constraint "is_one"(%o : !pdl.value)
  pdl.rewrite %op {
    pdl.replace %op with (%x : !pdl.value)
  }
}

pdl.pattern @div_one : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %o = pdl.operand
  %op = pdl.operation "graph.div"(%x, %o : !pdl.value, !pdl.value) -> (%t : !pdl.type)
  pdl.apply_native_constraint "is_one"(%o : !pdl.value)
  pdl.rewrite %op {
    pdl.replace %op with (%x : !pdl.value)
  }
}

pdl.pattern @neg_neg : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %inner = pdl.operation "graph.neg"(%x : !pdl.value) -> (%t : !pdl.type)
  %y = pdl.result 0 of %inner
  %op = pdl.operation "graph.neg"(%y : !pdl.value) -> (%t : !pdl.type)
  pdl.rewrite %op {
    pdl.replace %op with (%x : !pdl.value)
  }
}

pdl.pattern @reshape_reshape : benefit(1) {
  %x = pdl.operand
  %mid = pdl.type
  %inner = pdl.operation "graph.reshape"(%x : !pdl.value) -> (%mid : !pdl.type)
  %y = pdl.result 0 of %inner
  %t = pdl.type
  %op = pdl.operation "graph.reshape"(%y : !pdl.value) -> (%t : !pdl.type)
  pdl.rewrite %op {
    %new = pdl.operation "graph.reshape"(%x : !pdl.value) -> (%t : !pdl.type)
    pdl.replace %op with %new
  }
}

pdl.pattern @reshape_identity : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %op = pdl.operation "graph.reshape"(%x : !pdl.value) -> (%t : !pdl.type)
  pdl.rewrite %op {
    pdl.replace %op with (%x : !pdl.value)
  }
}

pdl.pattern @broadcast_to_identity : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %op = pdl.operation "graph.broadcast_to"(%x : !pdl.value) -> (%t : !pdl.type)
  pdl.rewrite %op {
    pdl.replace %op with (%x : !pdl.value)
  }
}

pdl.pattern @cast_identity : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %op = pdl.operation "graph.cast"(%x : !pdl.value) -> (%t : !pdl.type)
  pdl.rewrite %op {
    pdl.replace %op with (%x : !pdl.value)
  }
}
