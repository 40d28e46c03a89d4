"""The loops every packing of a tiled GEMM's operands runs in.

loop-tile-matmul's packing (operand_packing.py) walks the reduction's own dimensions
without divisions, the panels of B and their parts of a few columns, and stores a panel
either where it belongs in Bp or, when a task packs its own panels, in that task's slot:
those loops and that choice are here, the values packed are there.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.ir import SSAValue

from graphfuse.lowering.cpu.gemm.gemm_builder import GemmBuilder, Mapping
from graphfuse.lowering.cpu.gemm.tile_plan import TilePlan

Span = tuple[SSAValue, SSAValue]


class PanelLoops:
    """The packing's loops over the reduction and over B's panels, for `plan`."""

    def __init__(self, plan: TilePlan):
        self.plan = plan
        self.found = plan.found
        self._first_stored: SSAValue | None = None
        """The first panel of a task's own slot (`pack_b_panels`'s `local`), else None."""

    def _stored_panel(self, em: GemmBuilder, panel: SSAValue) -> SSAValue:
        """Where panel `panel` goes in its slot of Bp (see `pack_b_panels`'s `local`)."""
        if self._first_stored is None:
            return panel
        return em.emit(arith.SubiOp(panel, self._first_stored))

    def _over_reduction(
        self, em: GemmBuilder, leading: int | None = None
    ) -> tuple[GemmBuilder, Mapping, SSAValue]:
        """Loops over the reduction's own dimensions (the first `leading` of them, or all;
        no divisions per element); returns the innermost body, the reduction's indices
        there and their linear position."""
        reduce = self.found.reduce
        mapping: Mapping = {}
        linear: SSAValue = em.index(0)
        inner = em
        for arg, extent in zip(
            reduce.body.block.args[:leading], reduce.shape[:leading], strict=True
        ):
            _, inner = inner.loop(inner.index(0), inner.index(extent))
            mapping[arg] = inner.block.args[0]
            scaled = inner.emit(arith.MuliOp(linear, inner.index(extent)))
            linear = inner.emit(arith.AddiOp(scaled, inner.block.args[0]))
        return inner, mapping, linear

    def _panel_parts(
        self, em: GemmBuilder, panels: Span, width: int, parts: int | None = None
    ) -> tuple[GemmBuilder, SSAValue, SSAValue, SSAValue]:
        """Loops over the panels in `panels` and their first `parts` parts (all by default)
        of `width` columns; returns the inner body, the panel, the part's first lane in the
        panel and its first column."""
        nr = self.plan.nr
        _, panel = em.loop(*panels)
        _, part = panel.loop(panel.index(0), panel.index(parts or nr // width))
        p, h = panel.block.args[0], part.block.args[0]
        lane0 = part.emit(arith.MuliOp(h, part.index(width)))
        column0 = part.emit(arith.AddiOp(part.emit(arith.MuliOp(p, part.index(nr))), lane0))
        return part, p, lane0, column0
