pdl.pattern @broken : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %op = pdl.operation "graph.exp"(%x : !pdl.value -> (%t : !pdl.type)
}
