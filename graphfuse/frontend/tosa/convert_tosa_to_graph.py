"""The `convert-tosa-to-graph` pass: TOSA functions (generic form) to graph-dialect ones."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from graphfuse.frontend.tosa.conversion import convert_module
from graphfuse.parsing import GraphfuseError


@dataclass(frozen=True)
class ConvertTosaToGraphPass(ModulePass):
    """Rewrite every function holding `tosa.*` ops into graph ops (docs/tosa.md's table).

    xDSL defines only part of TOSA, so `xdsl-opt` needs `--allow-unregistered-dialect` to
    read the rest; ops are converted by name and attributes either way. NHWC convolutions
    and pools become NCHW graph ops between transposes:

        %y = "tosa.conv2d"(%x, %w, %b, %zp, %zp) <{pad = array<i64: 1, 1, 1, 1>, ...}>
      ->
        %t = graph.transpose %x perm = array<i64: 0, 3, 1, 2>
        %c = graph.conv2d %t, %w_oihw padding = array<i64: 1, 1, 1, 1> ...
        %a = graph.add %c, %b_1c11
        %y = graph.transpose %a perm = array<i64: 0, 2, 3, 1>

    An op it cannot convert (quantised, dynamic shapes, ops outside the table) fails the
    pass with one line naming the op.
    """

    name = "convert-tosa-to-graph"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            convert_module(op)
        except GraphfuseError as error:
            raise PassFailedException(str(error)) from None
