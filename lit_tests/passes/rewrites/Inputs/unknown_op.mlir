pdl.pattern @typo : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %op = pdl.operation "graph.expp"(%x : !pdl.value) -> (%t : !pdl.type)
  pdl.rewrite %op {
    pdl.replace %op with (%x : !pdl.value)
  }
}
