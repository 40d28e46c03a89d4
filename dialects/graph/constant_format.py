"""How `graph.constant` writes and reads its value, so that every float survives the text.

xDSL's printer writes -inf, +inf and NaN of a dense literal as hex elements
(`dense<[0xff800000, 1.000000e+00]>`), and a few finite f32 and f64 values the same way;
MLIR reads a hex element as the float's bits, xDSL's parser as an integer value
(4286578688.0). Its printer also writes `[0.0, -0.0]` as the splat `dense<0.0>`. A float
value whose element-wise text would not read back as the same bytes is printed as MLIR's
hex blob instead, `dense<"0xFF8000000000803F"> : tensor<2xf32>` (one element's bytes for a
splat), which xDSL's parser and upstream `mlir-opt` both read as bytes. Reading, a hex
element is the float's bits (graphfuse.parsing.float_bits), under plain `xdsl-opt` too, so
files with hex elements read right whoever wrote them.
"""

from __future__ import annotations

import io

from xdsl.dialects.builtin import AnyFloat, DenseIntOrFPElementsAttr
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.hints import isa

from graphfuse.parsing import LocatedParser, float_bits


@irdl_custom_directive
class ConstantValue(CustomDirective):
    """`$value` of graph.constant: the attribute as xDSL writes it, or the hex blob where
    that text would not read back as the same bytes; hex elements read as bits."""

    value: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        start = parser.pos
        value = _parse_value(parser)
        if value is None:
            parser.raise_error(_UNREADABLE, start)
        if isa(value, DenseIntOrFPElementsAttr) and not isinstance(parser, LocatedParser):
            value = float_bits(parser, start, value)  # graphfuse's own parser did already
        self.value.set(state, value)

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        value = self.value.get(op)
        assert value is not None, "graph.constant's value is not optional"
        state.print_whitespace(printer)
        text = exact_text(value)
        if text is None:
            printer.print_attribute(value)
        else:
            printer.print_string(text)


def _parse_value(parser: Parser) -> Attribute | None:
    """The attribute at the parser, None where xDSL's reading of a hex f16 element as an
    integer value fails (one above 0xFFEF does not fit f16)."""
    try:
        return parser.parse_attribute()
    except OverflowError:
        return None


_UNREADABLE = (
    "a hex element does not fit its float type as xDSL's parser reads it (as an integer "
    "value); graphfuse's own commands read hex elements as the floats' bits"
)


def exact_text(value: Attribute) -> str | None:
    """The text of a float dense `value`, as xDSL prints it where that reads back as the
    same bytes, else as MLIR's hex blob; None for any other attribute (a handle, integers),
    which xDSL's own printing keeps exact."""
    if not isa(value, DenseIntOrFPElementsAttr):
        return None
    if not isinstance(value.get_element_type(), AnyFloat):
        return None
    text = io.StringIO()
    Printer(stream=text).print_attribute(value)
    printed = text.getvalue()
    literal = printed[: printed.index(">")]
    if literal.startswith('dense<"'):  # xDSL's own hex blob (over 100 elements)
        return printed
    one_value = _one_value(value)
    splat = "[" not in literal and len(value) > 1
    if "0x" not in literal and (one_value or not splat):
        return printed
    data = value.data.data
    if one_value:  # MLIR's splat: one element's bytes
        data = data[: len(data) // len(value)]
    return f'dense<"0x{data.hex().upper()}"{printed[len(literal) :]}'


def _one_value(value: DenseIntOrFPElementsAttr) -> bool:
    """Every element holds the same bytes (NaN and -0.0 compared as bits)."""
    data = value.data.data
    size = len(data) // max(len(value), 1)
    return data == data[:size] * len(value)
