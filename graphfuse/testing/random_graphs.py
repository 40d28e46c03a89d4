"""Random graph-dialect functions for property tests and benchmarks.

The generator mimics the shape of real networks: each new op mostly reads recent values
(a sliding window, as layers do), sometimes an older one (skip connections), and mixes
every fusion kind: elementwise and broadcasting binary ops, reductions, transposes and
reshapes, matmuls, broadcasts, concats, gathers of constant indices, an opaque sort, small
constants, and compound ops (softmax, reduce_mean, gelu, silu) for the front end to open.
All values stay bounded (tanh, sigmoid, small fan-in), so results are finite and comparable.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

Shape = tuple[int, ...]

_A, _R, _V, _T, _S = (4, 8), (4, 1), (8,), (8, 4), (4, 4)
_BINARY_RESULT: dict[tuple[Shape, Shape], Shape] = {
    (_A, _A): _A, (_A, _R): _A, (_A, _V): _A, (_R, _V): _A, (_R, _A): _A, (_V, _A): _A,
    (_T, _T): _T, (_S, _S): _S, (_R, _R): _R, (_V, _V): _V,
}  # fmt: skip


def _type(shape: Shape) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>" if shape else "tensor<f32>"


@dataclass
class _Builder:
    rng: np.random.Generator
    shapes: list[Shape] = field(default_factory=list[Shape])
    lines: list[str] = field(default_factory=list[str])

    def pick(self, wanted: set[Shape] | None = None) -> int | None:
        """A value index, mostly from the last eight, of one of the wanted shapes."""
        candidates = [i for i, s in enumerate(self.shapes) if wanted is None or s in wanted]
        if not candidates:
            return None
        recent = [i for i in candidates if i >= len(self.shapes) - 8]
        pool = recent if recent and self.rng.random() < 0.8 else candidates
        return int(self.rng.choice(pool))

    def emit(self, text: str, shape: Shape) -> None:
        self.lines.append(f"  %v{len(self.shapes)} = {text}")
        self.shapes.append(shape)

    def unary(self) -> None:
        operand = self.pick()
        assert operand is not None
        op = self.rng.choice(["neg", "tanh", "sigmoid", "relu", "abs"])
        shape = self.shapes[operand]
        self.emit(f"graph.{op} %v{operand} : {_type(shape)}", shape)

    def binary(self) -> bool:
        lhs = self.pick()
        assert lhs is not None
        partners = {b for (a, b) in _BINARY_RESULT if a == self.shapes[lhs]}
        rhs = self.pick(partners)
        if rhs is None:
            return False
        a, b = self.shapes[lhs], self.shapes[rhs]
        out = _BINARY_RESULT[(a, b)]
        op = self.rng.choice(["add", "mul", "sub", "max"])
        self.emit(f"graph.{op} %v{lhs}, %v{rhs} : ({_type(a)}, {_type(b)}) -> {_type(out)}", out)
        return True

    def shaped(self, source: Shape, text: str, result: Shape) -> Callable[[], bool]:
        """A maker of a one-operand op `text` ({v}: the operand) from `source` to `result`."""

        def make() -> bool:
            operand = self.pick({source})
            if operand is None:
                return False
            types = _type(source) if source == result else f"{_type(source)} -> {_type(result)}"
            self.emit(f"{text.format(v=f'%v{operand}')} : {types}", result)
            return True

        return make

    def matmul(self) -> bool:
        lhs = self.pick({_A, _S})
        if lhs is None:
            return False
        rhs_shape = _T if self.shapes[lhs] == _A else _A
        rhs = self.pick({rhs_shape})
        if rhs is None:
            return False
        a, out = self.shapes[lhs], (_S if rhs_shape == _T else _A)
        self.emit(
            f"graph.matmul %v{lhs}, %v{rhs} : ({_type(a)}, {_type(rhs_shape)}) -> {_type(out)}",
            out,
        )
        return True

    def concat(self) -> bool:
        lhs, rhs = self.pick({_S}), self.pick({_S})
        if lhs is None or rhs is None:
            return False
        self.emit(
            f"graph.concat %v{lhs}, %v{rhs} axis = 1 : ({_type(_S)}, {_type(_S)}) -> {_type(_A)}",
            _A,
        )
        return True

    def gather(self) -> bool:
        """A gather keeping the shape, of constant indices that may be negative or out of
        range (clamped), so both index rules are exercised."""
        source, axis = [(_A, 0), (_A, 1), (_T, -1)][int(self.rng.integers(3))]
        operand = self.pick({source})
        if operand is None:
            return False
        dim = source[axis]
        indices = [int(i) for i in self.rng.integers(-dim - 1, dim + 1, size=dim)]
        index_type = f"tensor<{dim}x{self.rng.choice(['i32', 'i64'])}>"
        self.lines.append(
            f"  %c{len(self.shapes)} = graph.constant dense<{indices}> : {index_type}"
        )
        self.emit(
            f"graph.gather %v{operand}, %c{len(self.shapes)} axis = {axis} : "
            f"({_type(source)}, {index_type}) -> {_type(source)}",
            source,
        )
        return True

    def scaled(self) -> bool:
        operand = self.pick()
        assert operand is not None
        shape = self.shapes[operand]
        scale = float(self.rng.choice([0.5, 0.25, -0.5]))
        self.lines.append(f"  %c{len(self.shapes)} = graph.constant dense<{scale}> : tensor<f32>")
        self.emit(
            f"graph.mul %v{operand}, %c{len(self.shapes)} : ({_type(shape)}, tensor<f32>) -> "
            f"{_type(shape)}",
            shape,
        )
        return True

    def step(self) -> None:
        """Add one op, drawn with the weights of `_MENU`; a unary op when none fits."""
        menu = (
            (0.30, self.binary),
            (0.10, self.shaped(_A, "graph.reduce_sum {v} axes = [1] keepdims", _R)),
            (0.05, self.shaped(_A, "graph.reduce_max {v} axes = [0]", _V)),
            (0.07, self.shaped(_A, "graph.transpose {v} perm = [1, 0]", _T)),
            (0.05, self.shaped(_T, "graph.reshape {v}", _A)),
            (0.07, self.matmul),
            (0.04, self.shaped(_R, "graph.broadcast_to {v}", _A)),
            (0.03, self.shaped(_V, "graph.broadcast_to {v}", _A)),
            (0.03, self.shaped(_A, "graph.sort {v} axis = 1", _A)),
            (0.03, self.concat),
            (0.03, self.gather),
            (0.05, self.scaled),
            (0.02, self.shaped(_A, "graph.softmax {v} axis = 1", _A)),
            (0.02, self.shaped(_A, "graph.reduce_mean {v} axes = [1] keepdims", _R)),
            (0.01, self.shaped(_A, "graph.gelu {v}", _A)),
            (0.01, self.shaped(_V, "graph.silu {v}", _V)),
        )  # fmt: skip
        choice = self.rng.random()
        for weight, make in menu:
            if choice < weight:
                if not make():
                    self.unary()
                return
            choice -= weight
        self.unary()


def random_graph(ops: int, seed: int) -> str:
    """Text of `func.func @main(%v0: 4x8, %v1: 8)` with `ops` random ops (constants extra),
    returning every value no op reads."""
    builder = _Builder(np.random.default_rng(seed))
    builder.shapes = [_A, _V]
    for _ in range(ops):
        builder.step()
    # Every value nobody reads is returned, so no op is dead (DCE would shrink the graph);
    # a few used values are returned too, as real graphs return intermediates.
    used = {int(m) for line in builder.lines for m in re.findall(r"%v(\d+)", line.split("=", 1)[1])}
    results = [i for i in range(2, len(builder.shapes)) if i not in used] or [
        len(builder.shapes) - 1
    ]
    for _ in range(int(builder.rng.integers(0, 3))):
        extra = int(builder.rng.integers(2, len(builder.shapes)))
        if extra not in results:
            results.append(extra)
    types = ", ".join(_type(builder.shapes[i]) for i in results)
    values = ", ".join(f"%v{i}" for i in results)
    body = "\n".join(builder.lines)
    header = f"func.func @main(%v0: {_type(_A)}, %v1: {_type(_V)}) -> ({types}) {{"
    return f"{header}\n{body}\n  func.return {values} : {types}\n}}\n"
