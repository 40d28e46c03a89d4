"""graph.constant's text form: every float survives printing and parsing, by graphfuse's
parser and by xDSL's own (plain xdsl-opt); hex elements of a float literal are bits."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseIntOrFPElementsAttr,
    ModuleOp,
    TensorType,
    bf16,
    f16,
    f32,
    f64,
)
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

import graphfuse
from graphfuse.dialects import graph
from graphfuse.dialects.graph import interpreter
from graphfuse.errors import GraphfuseError
from graphfuse.parsing import make_context
from tests.conftest import parse

INF, NAN = math.inf, math.nan

VALUES = [
    [-INF, 1.0],
    [INF, NAN, -0.0],
    [-INF, -INF, -INF],
    [NAN, NAN],
    [0.0, -0.0],
    [-0.0, 0.0],
    [1.5, -2.5],
]


def _constant(element: AnyFloat, values: list[float]) -> graph.ConstantOp:
    typ = TensorType(element, [len(values)])
    return graph.ConstantOp(DenseIntOrFPElementsAttr.from_list(typ, values))


def _module(value: str) -> str:
    """A function returning `graph.constant <value>`."""
    typ = value.rsplit(" : ", 1)[1]
    return f"func.func @main() -> {typ} {{\n  %c = graph.constant {value}\n  func.return %c : {typ}\n}}\n"


def _constant_in(module: ModuleOp) -> graph.ConstantOp:
    return next(op for op in module.walk() if isinstance(op, graph.ConstantOp))


def _by_xdsl(text: str) -> graph.ConstantOp:
    """`text` as plain xdsl-opt reads it: xDSL's own parser, graphfuse's dialects."""
    module = Parser(make_context(), text).parse_module()
    return _constant_in(module)


def _by_graphfuse(value: str) -> graph.ConstantOp:
    return _constant_in(parse(_module(value)))


@pytest.mark.parametrize("element", [f32, f16, bf16, f64], ids=str)
@pytest.mark.parametrize("values", VALUES, ids=str)
def test_constant_format_round_trip_keeps_every_bit(element: AnyFloat, values: list[float]):
    op = _constant(element, values)
    value = str(op).split(" = graph.constant ", 1)[1]
    assert _by_xdsl(_module(value)).value.data == op.value.data
    assert _by_graphfuse(value).value.data == op.value.data


def test_constant_format_writes_non_finite_values_as_a_blob():
    op = _constant(f32, [-INF, 1.0])
    assert str(op).endswith('graph.constant dense<"0x000080FF0000803F"> : tensor<2xf32>')


def test_constant_format_writes_a_splat_blob_as_one_element():
    op = _constant(f16, [-INF] * 4)
    assert str(op).endswith('graph.constant dense<"0x00FC"> : tensor<4xf16>')


def test_constant_format_keeps_finite_values_readable():
    op = _constant(f32, [1.5, -0.0])
    assert str(op).endswith("graph.constant dense<[1.500000e+00, -0.000000e+00]> : tensor<2xf32>")


@pytest.mark.parametrize(
    "value, expected",
    [
        ("dense<[0xFF800000, 1.0]> : tensor<2xf32>", [-INF, 1.0]),
        ("dense<[[0x7F800000], [-0.0]]> : tensor<2x1xf32>", [INF, -0.0]),
        ("dense<0xFF800000> : tensor<3xf32>", [-INF] * 3),
        ("dense<[0xFC00, 0x7C00, 1.0]> : tensor<3xf16>", [-INF, INF, 1.0]),
        ("dense<[0xFF80, 2.0]> : tensor<2xbf16>", [-INF, 2.0]),
        ("dense<[0xFFF0000000000000, 0.5]> : tensor<2xf64>", [-INF, 0.5]),
    ],
    ids=["f32", "nested", "splat", "f16", "bf16", "f64"],
)
def test_constant_format_reads_hex_elements_as_bits(value: str, expected: list[float]):
    """What xDSL's printer (and graphfuse before it printed blobs) writes reads right."""
    for op in (_by_graphfuse(value), _by_xdsl(_module(value))):
        assert list(op.value.get_values()) == expected


def test_constant_format_reads_hex_nan_as_nan():
    (nan,) = _by_xdsl(_module("dense<[0x7FC00000]> : tensor<1xf32>")).value.get_values()
    assert math.isnan(nan)


def test_constant_format_reads_f16_bits_beyond_xdsls_reading():
    """0xFFFF (a NaN) is 65535 as an integer, which no f16 holds: graphfuse reads the bits,
    xDSL's parser fails, and the constant is named in a parse error, not a traceback."""
    assert _by_graphfuse("dense<[0xFFFF]> : tensor<1xf16>").value.data.data == b"\xff\xff"
    with pytest.raises(ParseError, match="a hex element does not fit its float type"):
        _by_xdsl(_module("dense<[0xFFFF]> : tensor<1xf16>"))


def test_constant_format_reads_hex_integers_as_values():
    op = _by_graphfuse("dense<[0x10, -1]> : tensor<2xi32>")
    assert list(op.value.get_values()) == [16, -1]


@pytest.mark.parametrize(
    "value, message",
    [
        (
            "dense<[-0xFF800000]> : tensor<1xf32>",
            "hexadecimal float literal should not have a leading minus",
        ),
        ("dense<[0x1FF800000]> : tensor<1xf32>", "hexadecimal float constant out of range for f32"),
        ("dense<0x10000> : tensor<2xf16>", "hexadecimal float constant out of range for f16"),
    ],
    ids=["negative", "too-wide", "too-wide-splat"],
)
def test_constant_format_refuses_what_mlir_refuses(value: str, message: str):
    with pytest.raises(GraphfuseError, match=f"test.mlir:2:.*{message}"):
        _by_graphfuse(value)


def test_float_bits_apply_to_any_dense_literal():
    """graphfuse's parser reads MLIR's meaning outside graph.constant too (arith.constant)."""
    module = parse(
        "func.func @main() -> tensor<2xf32> {\n"
        "  %c = arith.constant dense<[0xFF800000, 1.0]> : tensor<2xf32>\n"
        "  func.return %c : tensor<2xf32>\n}\n"
    )
    (value,) = (op.value for op in module.walk() if op.name == "arith.constant")
    assert isinstance(value, DenseIntOrFPElementsAttr)
    assert list(value.get_values()) == [-INF, 1.0]


MASKED_SOFTMAX = """func.func @main(%s: tensor<3x3x{t}>) -> tensor<3x3x{t}> {{
  %m = graph.constant dense<{mask}> : tensor<3x3x{t}>
  %a = graph.add %s, %m : (tensor<3x3x{t}>, tensor<3x3x{t}>) -> tensor<3x3x{t}>
  %p = graph.softmax %a axis = -1 : tensor<3x3x{t}>
  func.return %p : tensor<3x3x{t}>
}}
"""
CAUSAL_HEX = {
    "f32": "[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]",
    "f16": "[[0.0, 0xFC00, 0xFC00], [0.0, 0.0, 0xFC00], [0.0, 0.0, 0.0]]",
}


@pytest.mark.parametrize("element", ["f32", "f16"])
@pytest.mark.parametrize("form", ["hex elements", "as graphfuse prints it"])
def test_compiled_causal_mask_from_text_matches_reference(element: str, form: str, tmp_path: Path):
    """A causal mask (-inf above the diagonal) compiled from a file: the masked
    probabilities are 0, as in the NumPy reference interpreter."""
    text = MASKED_SOFTMAX.format(t=element, mask=CAUSAL_HEX[element])
    if form != "hex elements":
        text = str(parse(text))
        assert 'graph.constant dense<"0x' in text
    path = tmp_path / "masked.mlir"
    path.write_text(text)
    dtype = np.dtype(np.float32 if element == "f32" else np.float16)
    scores = np.random.default_rng(3).standard_normal((3, 3)).astype(dtype)
    (expected,) = interpreter.run(parse(text), "main", scores)
    got = graphfuse.compile(path)(scores)
    np.testing.assert_array_equal(np.triu(expected, 1), np.zeros((3, 3), dtype))
    np.testing.assert_array_equal(np.triu(got, 1), np.zeros((3, 3), dtype))
    np.testing.assert_allclose(got, expected, rtol=1e-3 if element == "f16" else 1e-6)
