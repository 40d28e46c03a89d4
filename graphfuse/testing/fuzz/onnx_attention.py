"""Attention-shaped recipes for the ONNX generator: the Attention op and the same by hand.

Fused attention kernels read heads at strides (a query [B, S, H x D] is read at column
D h + k), repeat grouped key heads and mask scores, so both forms are built over one
random head layout (`Heads`): ONNX's Attention (opset 23 and 24) on 3-D inputs split by
q_num_heads/kv_num_heads or on 4-D [B, H, S, D] ones, with grouped-query and multi-query
heads, boolean and float masks of rank 2 to 4, causal and band (sliding-window) masks,
softcap, scale, a past key and value, and the qk_matmul_output of every mode; and the
MatMul/Transpose/Reshape/Softmax graph exporters write for it, heads split from a 3-D
tensor and grouped key heads repeated by Unsqueeze/Expand/Reshape. Masks keep to what
onnxruntime (the oracle) runs: the last two dimensions are the query and key lengths,
the others 1 or the full size; a model it refuses anyway is generated again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from graphfuse.testing.fuzz.onnx_graphs import Array, GraphBuilder, Tensor
from graphfuse.testing.fuzz.onnx_recipes import BOOL, F32, I64, _flip, _int

SEQUENCE = 24
"""Longest query or key sequence."""
HEAD_SIZES = (32, 64)
"""Head sizes past the small ones (1 to 16), taken now and then."""
NEGATIVE = (-np.inf, -1e4)
"""What a float mask adds where a key is masked out."""


@dataclass(frozen=True)
class Heads:
    """One attention's sizes: batch, query and key lengths, query and key/value heads
    (kv_heads divides q_heads), head size of Q and K, head size of V, past length."""

    batch: int
    q_len: int
    kv_len: int
    q_heads: int
    kv_heads: int
    size: int
    value_size: int
    past: int = 0

    @property
    def total(self) -> int:
        """Keys attended: the past ones and the new ones."""
        return self.past + self.kv_len

    @property
    def scores(self) -> tuple[int, int, int, int]:
        return (self.batch, self.q_heads, self.q_len, self.total)


def random_heads(b: GraphBuilder, batch: int | None = None, q_len: int | None = None) -> Heads:
    """Small random sizes; kv heads equal to the query heads, 1 (multi-query) or another
    divisor (grouped-query)."""
    q_heads = _int(b, 1, 9)
    divisors = [d for d in range(1, q_heads + 1) if q_heads % d == 0]
    kind = _int(b, 0, 2)
    kv_heads = (q_heads, 1, int(b.rng.choice(divisors)))[kind]
    size = _head_size(b)
    value_size = size if _flip(b, 0.75) else _head_size(b)
    q_len = q_len if q_len is not None else _int(b, 1, SEQUENCE)
    kv_len = q_len if _flip(b, 0.6) else _int(b, 1, SEQUENCE)
    batch = batch if batch is not None else _int(b, 1, 2)
    return Heads(batch, q_len, kv_len, q_heads, kv_heads, size, value_size)


def _head_size(b: GraphBuilder) -> int:
    return int(b.rng.choice(HEAD_SIZES)) if _flip(b, 0.15) else _int(b, 1, 16)


def _weights(b: GraphBuilder, rows: int, columns: int) -> str:
    """A projection scaled by fan-in, so projected values stay near 1."""
    return b.const((b.rng.standard_normal((rows, columns)) / np.sqrt(rows)).astype(F32))


def _hidden(b: GraphBuilder) -> Tensor | None:
    """A float [B, S, E] value that attention may project its Q, K and V from."""
    return b.pick(
        lambda t: t.dtype == F32 and t.rank == 3 and t.shape[0] <= 3 and t.shape[1] <= SEQUENCE
    )


@dataclass(frozen=True)
class Sources:
    """Q, K and V in one layout, and the hidden value they were projected from, if any."""

    q: str
    k: str
    v: str
    hidden: Tensor | None = None


def flat_sources(b: GraphBuilder) -> tuple[Heads, Sources] | None:
    """Q, K, V as [B, S, H x D]: projections of a value already built (self-attention),
    or new inputs."""
    hidden = _hidden(b) if _flip(b, 0.6) else None
    if hidden is None:
        heads = random_heads(b)
        q = b.input(F32, (heads.batch, heads.q_len, heads.q_heads * heads.size))
        k = b.input(F32, (heads.batch, heads.kv_len, heads.kv_heads * heads.size))
        v = b.input(F32, (heads.batch, heads.kv_len, heads.kv_heads * heads.value_size))
        return heads, Sources(q.name, k.name, v.name)
    heads = random_heads(b, hidden.shape[0], hidden.shape[1])
    heads = replace(heads, kv_len=heads.q_len)
    width = hidden.shape[2]
    names: list[str] = []
    for columns in (heads.q_heads * heads.size, heads.kv_heads * heads.size):
        projected = b.node("MatMul", [hidden.name, _weights(b, width, columns)])
        if projected is None:
            return None
        names.append(projected[0].name)
    value = b.node("MatMul", [hidden.name, _weights(b, width, heads.kv_heads * heads.value_size)])
    if value is None:
        return None
    return heads, Sources(names[0], names[1], value[0].name, hidden)


def head_sources(b: GraphBuilder, heads: Heads) -> Sources:
    """Q, K, V as new [B, H, S, D] inputs."""
    q = b.input(F32, (heads.batch, heads.q_heads, heads.q_len, heads.size))
    k = b.input(F32, (heads.batch, heads.kv_heads, heads.kv_len, heads.size))
    v = b.input(F32, (heads.batch, heads.kv_heads, heads.kv_len, heads.value_size))
    return Sources(q.name, k.name, v.name)


# ---- masks ------------------------------------------------------------------------------


def allowed(b: GraphBuilder, heads: Heads, kind: str, shape: tuple[int, ...]) -> Array:
    """Which keys each query sees, of `shape` (ending [Sq, T]): all, a random pattern,
    causal, or a band of the last few keys (a sliding window, as onnx's
    test_attention_3d_local_window builds it), a query's own position counted after the
    past keys."""
    rows = np.arange(heads.q_len)[:, None] + heads.past
    columns = np.arange(heads.total)[None, :]
    if kind == "random":
        return b.rng.random(shape) < 0.7
    if kind == "causal":
        pattern = columns <= rows
    elif kind == "window":
        pattern = (columns <= rows) & (columns > rows - _int(b, 1, 4))
    else:
        pattern = np.ones((heads.q_len, heads.total), np.bool_)
    return np.broadcast_to(pattern, shape).copy()


def mask_shape(b: GraphBuilder, heads: Heads) -> tuple[int, ...]:
    """[Sq, T] with 0 to 2 leading dimensions, each 1 or the size of the scores'."""
    leading = [d if _flip(b) else 1 for d in heads.scores[:2]]
    rank = _int(b, 2, 4)
    return (*leading[4 - rank :], heads.q_len, heads.total)


@dataclass(frozen=True)
class Mask:
    name: str
    boolean: bool


def attention_mask(b: GraphBuilder, heads: Heads, keep_a_key: bool) -> Mask:
    """A boolean or float mask: a constant pattern (random, causal, band), a boolean
    graph input, or a float input of random biases. With `keep_a_key` each query sees
    at least one key (a row masked whole is NaN in a softmax by hand; ONNX's Attention
    defines it as zeros)."""
    shape = mask_shape(b, heads)
    if _flip(b, 0.25):
        boolean = _flip(b) and not keep_a_key
        return Mask(b.input(BOOL if boolean else F32, shape).name, boolean)
    pattern = allowed(b, heads, str(b.rng.choice(["random", "causal", "window", "all"])), shape)
    if keep_a_key:
        pattern[..., 0] |= ~pattern.any(axis=-1)
    if _flip(b):
        return Mask(b.const(pattern, BOOL), True)
    masked = float(b.rng.choice(NEGATIVE))
    return Mask(b.const(np.where(pattern, 0.0, masked).astype(F32)), False)


# ---- the Attention op -------------------------------------------------------------------


def attention_op(b: GraphBuilder) -> None:
    """ONNX Attention (opset 23 or 24) on 3-D or 4-D inputs with its optional inputs,
    attributes and outputs drawn at random."""
    if b.opset < 23:
        return
    flat = _flip(b)
    found = flat_sources(b) if flat else None
    if flat and found is None:
        return
    heads, sources = found if found is not None else _head_layout(b)
    if _flip(b, 0.2):
        heads = replace(heads, past=_int(b, 1, 8))
    inputs = [sources.q, sources.k, sources.v, *_optional_inputs(b, heads)]
    attrs = _attributes(b, heads, flat)
    outputs = [True, heads.past > 0, heads.past > 0, "qk_matmul_output_mode" in attrs]
    while not outputs[-1]:
        outputs.pop()
    result = b.node("Attention", inputs, outputs, **attrs)
    if result is not None and sources.hidden is not None and _flip(b, 0.5):
        _project_back(b, result[0], sources.hidden)


def _head_layout(b: GraphBuilder) -> tuple[Heads, Sources]:
    heads = random_heads(b)
    return heads, head_sources(b, heads)


def _optional_inputs(b: GraphBuilder, heads: Heads) -> list[str]:
    """attn_mask (or '' before a past key and value), past_key, past_value."""
    mask = attention_mask(b, heads, keep_a_key=False).name if _flip(b, 0.6) else ""
    if heads.past == 0:
        return [mask] if mask else []
    past = (heads.batch, heads.kv_heads, heads.past)
    key = b.input(F32, (*past, heads.size))
    value = b.input(F32, (*past, heads.value_size))
    return [mask, key.name, value.name]


def _attributes(b: GraphBuilder, heads: Heads, flat: bool) -> dict[str, float | int]:
    attrs: dict[str, float | int] = {}
    if flat:
        attrs |= {"q_num_heads": heads.q_heads, "kv_num_heads": heads.kv_heads}
    if _flip(b, 0.35):
        attrs["is_causal"] = 1
    if _flip(b, 0.3):
        attrs["softcap"] = float(b.rng.choice([0.5, 1.0, 2.5, 5.0, 30.0]))
    if _flip(b, 0.3):
        attrs["scale"] = float(b.rng.uniform(0.05, 1.0))
    if _flip(b, 0.15):
        attrs["softmax_precision"] = 1  # FLOAT: the inputs' own type
    if _flip(b, 0.15):
        attrs["qk_matmul_output_mode"] = _int(b, 0, 3)
    return attrs


def _project_back(b: GraphBuilder, y: Tensor, hidden: Tensor) -> None:
    """The output projection back to the hidden width and the residual add."""
    projected = b.node("MatMul", [y.name, _weights(b, y.shape[-1], hidden.shape[-1])])
    if projected is not None:
        b.node("Add", [projected[0].name, hidden.name])


# ---- the same by hand -------------------------------------------------------------------


def attention_by_hand(b: GraphBuilder) -> None:
    """softmax(Q K^T scale + mask) V from primitives, as exporters write it: heads split
    from [B, S, H x D] by Reshape and Transpose (or 4-D inputs), grouped key heads
    repeated (or one key head broadcast by MatMul), softcap by Div/Tanh/Mul, boolean
    masks by Where and float ones by Add, heads merged back to [B, S, H x Dv]."""
    flat = _flip(b, 0.8)
    found = flat_sources(b) if flat else _head_layout(b)
    if found is None:
        return
    heads, sources = found
    q, k, v = (sources.q, sources.k, sources.v)
    if flat:
        q = _split_heads(b, q, heads.q_heads, heads.size)
        k = _split_heads(b, k, heads.kv_heads, heads.size)
        v = _split_heads(b, v, heads.kv_heads, heads.value_size)
    if q is None or k is None or v is None:
        return
    k, v = _repeat_heads(b, k, heads, heads.size), _repeat_heads(b, v, heads, heads.value_size)
    probabilities = _probabilities(b, heads, q, k)
    if probabilities is None or k is None or v is None:
        return
    out = b.node("MatMul", [probabilities, v])
    if out is not None and flat:
        _merge_heads(b, out[0].name, heads)


def _split_heads(b: GraphBuilder, x: str, count: int, size: int) -> str | None:
    """[B, S, H x D] -> [B, H, S, D]: Reshape (with 0 and -1 now and then), Transpose."""
    target = [0, 0, count, -1] if _flip(b, 0.3) else [-1 if _flip(b, 0.2) else 0, 0, count, size]
    split = b.node("Reshape", [x, b.const(target, I64)])
    if split is None:
        return None
    moved = b.node("Transpose", [split[0].name], perm=[0, 2, 1, 3])
    return moved[0].name if moved else None


def _repeat_heads(b: GraphBuilder, x: str | None, heads: Heads, size: int) -> str | None:
    """[B, Hkv, S, D] -> [B, Hq, S, D] by Unsqueeze, Expand, Reshape; a single key head
    is sometimes left to MatMul's broadcasting."""
    repeats = heads.q_heads // heads.kv_heads
    if x is None or repeats == 1 or (heads.kv_heads == 1 and _flip(b, 0.3)):
        return x
    lifted = b.node("Unsqueeze", [x, b.const([2], I64)])
    if lifted is None:
        return None
    shape = [heads.batch, heads.kv_heads, repeats, heads.kv_len, size]
    expanded = b.node("Expand", [lifted[0].name, b.const(shape, I64)])
    if expanded is None:
        return None
    target = [heads.batch, heads.q_heads, heads.kv_len, size]
    merged = b.node("Reshape", [expanded[0].name, b.const(target, I64)])
    return merged[0].name if merged else None


def _probabilities(b: GraphBuilder, heads: Heads, q: str, k: str | None) -> str | None:
    """softmax over keys of the scaled, softcapped, masked scores."""
    scores = _scores(b, heads, q, k)
    if scores is not None and _flip(b, 0.3):
        scores = _softcap(b, scores, float(b.rng.choice([1.0, 2.5, 5.0, 30.0])))
    if scores is not None and _flip(b, 0.6):
        scores = _masked(b, heads, scores)
    if scores is None:
        return None
    softmax = b.node("Softmax", [scores], axis=-1 if _flip(b) else 3)
    return softmax[0].name if softmax else None


def _scores(b: GraphBuilder, heads: Heads, q: str, k: str | None) -> str | None:
    """Q K^T scaled after the product (Mul, or Div by sqrt(D)) or before it (Q and K^T
    each by sqrt(scale), as ONNX's own Attention body does)."""
    if k is None:
        return None
    transposed = b.node("Transpose", [k], perm=[0, 1, 3, 2])
    if transposed is None:
        return None
    scale = float(b.rng.uniform(0.05, 1.0)) if _flip(b, 0.3) else 1 / np.sqrt(heads.size)
    kt = transposed[0].name
    if _flip(b, 0.3):
        root = b.const(np.sqrt(scale), F32)
        scaled = [b.node("Mul", [q, root]), b.node("Mul", [kt, root])]
        if scaled[0] is None or scaled[1] is None:
            return None
        product = b.node("MatMul", [scaled[0][0].name, scaled[1][0].name])
        return product[0].name if product else None
    product = b.node("MatMul", [q, kt])
    if product is None:
        return None
    if _flip(b):
        done = b.node("Div", [product[0].name, b.const(1 / scale, F32)])
    else:
        done = b.node("Mul", [product[0].name, b.const(scale, F32)])
    return done[0].name if done else None


def _softcap(b: GraphBuilder, scores: str, cap: float) -> str | None:
    """cap * tanh(scores / cap)."""
    divided = b.node("Div", [scores, b.const(cap, F32)])
    bent = b.node("Tanh", [divided[0].name]) if divided else None
    capped = b.node("Mul", [bent[0].name, b.const(cap, F32)]) if bent else None
    return capped[0].name if capped else None


def _masked(b: GraphBuilder, heads: Heads, scores: str) -> str | None:
    """A float mask added, or a boolean one selecting the scores or a large negative."""
    mask = attention_mask(b, heads, keep_a_key=True)
    if not mask.boolean:
        added = b.node("Add", [scores, mask.name])
        return added[0].name if added else None
    fill = b.const(float(b.rng.choice(NEGATIVE)), F32)
    chosen = b.node("Where", [mask.name, scores, fill])
    return chosen[0].name if chosen else None


def _merge_heads(b: GraphBuilder, x: str, heads: Heads) -> None:
    """[B, H, S, Dv] -> [B, S, H x Dv]."""
    moved = b.node("Transpose", [x], perm=[0, 2, 1, 3])
    if moved is None:
        return
    width = heads.q_heads * heads.value_size
    target = [0, 0, -1] if _flip(b, 0.3) else [heads.batch, heads.q_len, width]
    b.node("Reshape", [moved[0].name, b.const(target, I64)])


ATTENTION_RECIPES: dict[Callable[[GraphBuilder], None], float] = {
    attention_op: 4,
    attention_by_hand: 3,
}
