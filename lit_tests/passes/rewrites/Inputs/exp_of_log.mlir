// A user's rule: exp(log(x)) -> x (valid for the positive x that log accepts).
pdl.pattern @exp_of_log : benefit(1) {
  %t = pdl.type
  %x = pdl.operand : %t
  %log = pdl.operation "graph.log"(%x : !pdl.value) -> (%t : !pdl.type)
  %y = pdl.result 0 of %log
  %exp = pdl.operation "graph.exp"(%y : !pdl.value) -> (%t : !pdl.type)
  pdl.rewrite %exp {
    pdl.replace %exp with (%x : !pdl.value)
  }
}
