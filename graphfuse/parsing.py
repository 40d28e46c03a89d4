"""Reading graph-dialect files with source locations, and one-line diagnostics.

xDSL's parser leaves `op.location` unknown unless the text spells out `loc(...)`; graphfuse
records each op's line and column as it parses, so a verifier failure found later names the
op and where it is. `GraphfuseError` carries the one-line message the CLI prints;
`option_error` is the one shape of every pass's refusal of an option value.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.builtin import (
    AnyDenseElement,
    AnyFloat,
    BytesAttr,
    ComplexType,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    FileLineColLoc,
    IndexType,
    IntAttr,
    IntegerType,
    ModuleOp,
    RankedStructure,
    StringAttr,
    UnregisteredOp,
)
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.parser import AttrParser, Parser
from xdsl.universe import Universe
from xdsl.utils.exceptions import (
    ParseError,
    PassFailedException,
    VerifyException,
)
from xdsl.utils.lexer import Input, Position, Span
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRToken, MLIRTokenKind

from graphfuse.errors import GraphfuseError

if TYPE_CHECKING:
    from graphfuse.weights import WeightsFile

NAME_HINT = "graph.name"
"""Discardable attribute on a constant: the name its weight is printed under
(graphfuse.weights)."""


def make_context() -> Context:
    """A context that knows every dialect xdsl-opt knows (ours included), loaded lazily."""
    ctx = Context(allow_unregistered=False)
    for name, getter in Universe.get_multiverse().all_dialects.items():
        ctx.register_dialect(name, getter)
    return ctx


class LocatedParser(Parser):
    """An xDSL parser that stamps every op with the file, line and column it starts at."""

    def __init__(self, ctx: Context, text: str, name: str) -> None:
        super().__init__(ctx, text, name)
        self.weights: WeightsFile | None = None
        """Where `dense_resource` handles find their data (graphfuse.weights)."""
        self.blobs: dict[str, str] = {}
        """The builtin entries of the text's `dialect_resources` section, by handle."""
        self.unresolved: list[tuple[Operation, str]] = []
        """Handles neither the section nor the weights file holds, with their ops."""

    def parse_operation(self) -> Operation:
        span = self._current_token.span
        try:
            op = super().parse_operation()
        except VerifyException as error:
            # Type constraints of a custom format are checked while parsing; name the op,
            # and the type where one on its line is outside the dialect's element types.
            message = _unsupported_type_at(span) or str(error)
            raise ParseError(span, f"{_op_name_at(span)}{message}") from None
        value = op.properties.get("value")
        if isinstance(value, DenseResourceAttr) and op.name == "graph.constant":
            # Printed again under its handle (graphfuse.weights).
            op.attributes[NAME_HINT] = value.resource_handle
        if not isinstance(op.location, FileLineColLoc):
            line, col = self._line_and_column(span)
            op.location = FileLineColLoc(StringAttr(span.input.name), IntAttr(line), IntAttr(col))
        return op

    def parse_dense_int_or_fp_elements_attr(
        self, type: RankedStructure[AnyDenseElement] | None
    ) -> DenseIntOrFPElementsAttr:
        """A dense literal, its hex elements read as MLIR reads them (`float_bits`)."""
        start = self.pos
        value = super().parse_dense_int_or_fp_elements_attr(type)
        return float_bits(self, start, value)

    _Element = Parser._TensorLiteralElement  # pyright takes a protected name in this body

    class _HexElement(_Element):
        """A hex element of a dense literal. For a float type it stands for bits that
        `float_bits` writes once the type is known; its value as an integer would not
        fit some (f16 above 0xFFEF), and xDSL's conversion would fail."""

        def to_type(
            self, parser: AttrParser, type: AnyFloat | IntegerType | IndexType | ComplexType
        ) -> int | float | tuple[int, int] | tuple[float, float]:
            if isinstance(type, AnyFloat):
                return 0.0
            return super().to_type(parser, type)

    def _parse_tensor_literal_element(self) -> Parser._TensorLiteralElement:
        element = super()._parse_tensor_literal_element()
        if "0x" not in element.span.text:  # MLIR's lexer: hex is `0x` and digits
            return element
        return self._HexElement(element.is_negative, element.value, element.span)

    def _parse_builtin_dense_resource_attr(self) -> DenseResourceAttr:
        """`dense_resource<handle> : type`, its data found once the whole text is read
        (`parse_module`). xDSL's own reading declares each handle in a process-wide
        table and renames one seen before (`w` -> `w_0`): a file parsed twice would
        name its weights differently, and its section entries would miss them."""
        self.parse_characters("<", " in dense_resource attribute")
        at = self._current_token.span
        handle = self.parse_identifier(" for resource handle")
        self.parse_characters(">", " in dense_resource attribute")
        self.parse_characters(":", " in dense_resource attribute")
        typ = self.parse_type()
        from graphfuse.weights import shaped

        try:
            checked = shaped(typ)
        except GraphfuseError as error:
            raise ParseError(at, str(error)) from None
        return DenseResourceAttr.from_params(handle, checked)

    def _parse_resource(self, dialect_name: str, interface: OpAsmDialectInterface) -> None:
        """One `handle: "0x..."` entry of the `dialect_resources` section; builtin's are
        kept by this parser, not in xDSL's process-wide table (see above)."""
        if dialect_name != "builtin":
            super()._parse_resource(dialect_name, interface)
            return
        handle = self.parse_identifier(" for resource handle")
        self.parse_characters(":", " in dialect resource")
        self.blobs[handle] = self.parse_str_literal()

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        """The module, each `dense_resource` handle replaced by its data from the
        section or the weights file; handles found in neither stay, in `unresolved`.
        Data that does not fit its handle's type is a diagnostic naming the op."""
        module = super().parse_module(allow_implicit_module)
        for op in module.walk():
            self._fill(op, op.properties)
            self._fill(op, op.attributes)
        return module

    def _fill(self, op: Operation, holder: dict[str, Attribute]) -> None:
        for key, value in holder.items():
            if isinstance(value, DenseResourceAttr):
                holder[key] = self._data_of(value, op)

    def check_resolved(self) -> None:
        """Fail on the first handle `parse_module` found no data for."""
        if self.unresolved:
            from graphfuse.resources import no_data

            op, handle = self.unresolved[0]
            raise op_error(op, no_data(handle))

    def _data_of(self, handle_attr: DenseResourceAttr, op: Operation) -> Attribute:
        from graphfuse.resources import dense_of
        from graphfuse.weights import shaped

        handle = handle_attr.resource_handle.data
        typ = shaped(handle_attr.type)
        try:
            blob = self.blobs.get(handle)
            if blob is not None:
                return dense_of(handle, blob, typ)
            if self.weights is not None:
                return self.weights.dense(handle, typ)
        except GraphfuseError as error:
            raise op_error(op, str(error)) from None
        self.unresolved.append((op, handle))
        return handle_attr

    _line_starts: list[int] | None = None

    def _line_and_column(self, span: Span[str]) -> tuple[int, int]:
        """Where `span` starts, from the text's line starts found once: xDSL's
        `Span.get_location` counts newlines from the file's start, quadratic over a file
        of many ops."""
        if self._line_starts is None:
            content = span.input.content
            self._line_starts = [0, *(m.end() for m in re.finditer("\n", content))]
        line = bisect.bisect_right(self._line_starts, span.start)
        return line + span.line_offset, span.start - self._line_starts[line - 1] + 1


def float_bits(
    parser: Parser, start: Position, value: DenseIntOrFPElementsAttr
) -> DenseIntOrFPElementsAttr:
    """`value`, parsed from the dense literal at `start`, with each hex element of a float
    literal read as the float's bits, as MLIR defines it: `dense<[0xFF800000, 1.0]> :
    tensor<2xf32>` holds -inf and 1.0. xDSL's parser reads such an element as an integer
    value (4286578688.0), and its printer writes -inf, +inf and NaN that way. Only a
    literal of elements whose text holds `0x` is lexed again; others (the hex-blob form
    `dense<"0x...">` among them, which xDSL reads as bytes) come back as they are."""
    element = value.get_element_type()
    content = parser.lexer.input.content
    literal = content[start : content.find(">", start)]
    if not isinstance(element, AnyFloat) or "0x" not in literal or '"' in literal:
        return value
    elements = _literal_elements(parser, start)
    if not any(e is not None for e in elements) or len(elements) not in (1, len(value)):
        return value
    size = element.compile_time_size
    data = bytearray(value.data.data)
    for index, hex_element in enumerate(elements):
        if hex_element is not None:
            raw = _element_bits(parser, hex_element, element)
            if len(elements) == 1:  # a splat: the one element everywhere
                data = bytearray(raw * len(value))
            else:
                data[index * size : (index + 1) * size] = raw
    return DenseIntOrFPElementsAttr(value.type, BytesAttr(bytes(data)))


def _literal_elements(parser: Parser, start: Position) -> list[tuple[Span[str], bool] | None]:
    """The elements of the dense literal at `start` (at `dense` or its `<`), in order: each
    hex element's span and whether a minus leads it, None for any other element."""
    lexer = MLIRLexer(parser.lexer.input)
    lexer.pos = start
    elements: list[tuple[Span[str], bool] | None] = []
    minus: MLIRToken | None = None
    while (token := lexer.lex()).kind not in (MLIRTokenKind.GREATER, MLIRTokenKind.EOF):
        if token.kind is MLIRTokenKind.MINUS:
            minus = token
        elif token.kind in _ELEMENT_TOKENS and token.text != "dense":
            hexadecimal = token.kind is MLIRTokenKind.INTEGER_LIT and token.text[:2] == "0x"
            begin = minus.span.start if minus is not None else token.span.start
            span = Span(begin, token.span.end, token.span.input)
            elements.append((span, minus is not None) if hexadecimal else None)
            minus = None
    return elements


_ELEMENT_TOKENS = (MLIRTokenKind.INTEGER_LIT, MLIRTokenKind.FLOAT_LIT, MLIRTokenKind.BARE_IDENT)


def _element_bits(parser: Parser, element: tuple[Span[str], bool], typ: AnyFloat) -> bytes:
    """The bytes of `typ` a hex element stands for, refused where MLIR refuses it."""
    span, negative = element
    if negative:
        parser.raise_error("hexadecimal float literal should not have a leading minus", span)
    bits, size = int(span.text, 16), typ.compile_time_size
    if bits >> (8 * size):
        parser.raise_error(f"hexadecimal float constant out of range for {typ}", span)
    return bits.to_bytes(size, "little")


def _op_name_at(span: Span[str]) -> str:
    line_end = span.input.get_end_of_line(span.start)
    match = _OP_NAME.search(span.input.content[span.start : line_end])
    return f"'{match.group(1)}' op " if match else ""


def _unsupported_type_at(span: Span[str]) -> str | None:
    line = span.input.content[span.start : span.input.get_end_of_line(span.start)]
    for match in _TENSOR_TYPE.finditer(line):
        *dims, element = match.group(1).split("x")
        if element not in _ELEMENT_NAMES:
            from graphfuse.graph_inputs import ELEMENT_TYPES

            return (
                f"element type {element} ({match.group(0)}) is not supported: graph ops "
                f"take {ELEMENT_TYPES}"
            )
        if "?" in dims:
            from graphfuse.dialects.graph.shape_rules import DYNAMIC_DIMENSIONS

            return f"{match.group(0)} has a dynamic dimension: {DYNAMIC_DIMENSIONS}"
    return None


_TENSOR_TYPE = re.compile(r"tensor<([^<>]*)>")
_ELEMENT_NAMES = frozenset(
    {"f32", "f16", "bf16", "f64", "i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"}
)
_OP_NAME = re.compile(r"\b([a-z_][a-z0-9_]*\.[a-z0-9_.]+)\b")


def location_of(op: Operation) -> str:
    """`file:line:col` of an op parsed by `LocatedParser`, else `<unknown>`."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    return "<unknown>"


def op_error(op: Operation, message: str) -> GraphfuseError:
    """A diagnostic naming the op and its location: `f.mlir:3:5: 'graph.add' op <msg>`."""
    first_line = message.strip().splitlines()[0] if message.strip() else "is invalid"
    name = op.op_name.data if isinstance(op, UnregisteredOp) else op.name
    return GraphfuseError(f"{location_of(op)}: '{name}' op {first_line}")


def option_error(pass_name: str, field: str, allowed: str, value: object) -> PassFailedException:
    """A pass option out of range, named as a pipeline spells it, in the one shape every
    graphfuse pass uses: `graph-fuse: option max-depth must be >= 1, got 0`. Raised at the
    start of `apply`, before any IR changes; graphfuse and `xdsl-opt --verify-diagnostics`
    print it as one line (plain xdsl-opt re-raises every exception: docs/cli.md)."""
    option = field.replace("_", "-")
    return PassFailedException(f"{pass_name}: option {option} must be {allowed}, got {value}")


def check_at_least(pass_name: str, field: str, value: int, least: int) -> None:
    """The option held in `field` (`max_depth`) is at least `least`."""
    if value < least:
        raise option_error(pass_name, field, f">= {least}", value)


def check_one_of(pass_name: str, field: str, value: int, choices: Sequence[int]) -> None:
    """The option held in `field` is one of `choices` (`lanes`: 8 or 16)."""
    if value not in choices:
        *most, last = (str(c) for c in choices)
        allowed = f"{', '.join(most)} or {last}" if most else last
        raise option_error(pass_name, field, allowed, value)


def parse_text(
    text: str, name: str = "<input>", ctx: Context | None = None, folder: Path | None = None
) -> ModuleOp:
    """Parse and verify a module; any problem becomes a one-line `GraphfuseError`.
    Weights held outside the text (`dense_resource`) are read from the weights file the
    module names, in `folder` (see graphfuse.weights)."""
    if not _COMMENT.sub("", text).strip():
        raise GraphfuseError(f"{name}: no function: the file is empty or holds only comments")
    from graphfuse.weights import WEIGHTS_ATTR, named_weights_file

    try:
        # The parser lexes its first token as it is made: that too may fail.
        parser = LocatedParser(ctx or make_context(), text, name)
        parser.weights = named_weights_file(text, folder)
        module = parser.parse_module()
    except ParseError as error:
        # Lexed again only now, to name an unbalanced brace where it is.
        raise GraphfuseError(_parse_error_line(error, _tokens(text, name))) from None
    parser.check_resolved()
    module.attributes.pop(WEIGHTS_ATTR, None)  # the weights are in the module now
    verify(module)
    return module


_COMMENT = re.compile(r"//[^\n]*")


def _tokens(text: str, name: str) -> list[MLIRToken] | None:
    """The text's tokens up to end of file, comments dropped; None where it does not lex
    (the parser then says where)."""
    lexer = MLIRLexer(Input(text, name))
    tokens: list[MLIRToken] = []
    try:
        while (token := lexer.lex()).kind is not MLIRTokenKind.EOF:
            tokens.append(token)
    except ParseError:
        return None
    return tokens


def _parse_error_line(error: ParseError, tokens: list[MLIRToken] | None) -> str:
    """One line for a parse error. Where xDSL's message says only that the input ended or
    went on (an unbalanced brace, noticed at the end of the file), the brace is named
    where it opens or closes instead."""
    unbalanced = _unbalanced_brace(tokens or [])
    if unbalanced is not None and error.msg.strip() in _GENERIC_PARSE_ERRORS:
        token, problem = unbalanced
        return f"{token.span.get_location()}: {problem}"
    message = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in error.msg)
    message = " ".join(message.split()) or "cannot parse"
    return f"{error.span.get_location()}: {message}"


_GENERIC_PARSE_ERRORS = frozenset({"", "in block definition", "Could not parse entire input!"})


def _unbalanced_brace(tokens: list[MLIRToken]) -> tuple[MLIRToken, str] | None:
    open_braces: list[MLIRToken] = []
    for token in tokens:
        if token.kind is MLIRTokenKind.L_BRACE:
            open_braces.append(token)
        elif token.kind is MLIRTokenKind.R_BRACE:
            if not open_braces:
                return token, "'}' closes no '{'"
            open_braces.pop()
    if open_braces:
        return open_braces[-1], "'{' is never closed (the file ends first)"
    return None


def parse_type(text: str) -> Attribute:
    """A type written as text (`memref<4x128xf32>`), e.g. from a cache entry."""
    return Parser(_types_context(), text).parse_type()


@cache
def _types_context() -> Context:
    return make_context()


def parse_file(path: str | Path, ctx: Context | None = None) -> ModuleOp:
    """Read, parse and verify a `.mlir` file."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise GraphfuseError(f"{path}: cannot read: {error}") from None
    return parse_text(text, str(path), ctx, Path(path).parent)


def verify(module: ModuleOp) -> None:
    """Verify a module; on failure name the innermost failing op and its location.
    Every value must also be defined before it is used: xDSL's parser resolves forward
    references and its verifier does not check dominance."""
    try:
        module.verify()
        check_definitions_precede_uses(module)
        return
    except VerifyException as error:
        whole_module_error = error
    # Children before parents, so the op reported is the one whose own rule failed.
    for op in module.walk(region_first=True):
        try:
            op.verify()
        except VerifyException as error:
            raise op_error(op, str(error)) from None
    raise op_error(module, str(whole_module_error)) from None


def check_definitions_precede_uses(module: ModuleOp) -> None:
    """Raise a diagnostic for the first operand whose definition does not come before its
    use: an op result must be defined earlier in the user's block or in an enclosing block
    before the op holding the user (uses across the blocks of a CFG region are left to
    dominance, which graph and loop functions never need). Linear in the module's size."""
    position: dict[Operation, int] = {}
    for op in module.walk():
        block = op.parent_block()
        if block is not None and block.first_op is op:
            for index, sibling in enumerate(block.ops):
                position[sibling] = index
        for number, operand in enumerate(op.operands):
            if not _defined_before(operand, op, position):
                raise op_error(op, f"operand #{number} is used before it is defined")


def _defined_before(value: SSAValue, user: Operation, position: dict[Operation, int]) -> bool:
    if not isinstance(value, OpResult):
        return True  # block arguments: xDSL checks they belong to an enclosing block
    definer = value.op
    block = definer.parent_block()
    holder: Operation | None = user
    while holder is not None and holder.parent_block() is not block:
        holder = holder.parent_op()
    if holder is None:
        # Across the blocks of one CFG region only dominance decides: not checked here.
        region = definer.parent_region()
        return region is not None and len(region.blocks) > 1
    return position[definer] < position[holder]
