"""Where each op of a fused kernel came from: the ONNX node or the `.mlir` op it lowers.

Graph values carry name hints that rewrites keep or derive (`base_suffix`), so an op's
result hint names the original op it implements. But xDSL drops a `_<digits>` suffix from
every hint (`mul_3` and `mul_4` are both `mul`), and torch.onnx names most outputs that
way. So, for `--by-op` only, each original op's results get a fresh token as their hint
before fusion (`gfo12x0`: node 12, output 0; `gfo7`: the .mlir entry's op 7): for ONNX by
renaming the node outputs in the model before it is imported, for .mlir by re-hinting the
parsed entry's ops. Hints never reach the lowered code (its values are numbered), so the
kernels built are the ones an untagged import gives. An op the importer made without a
hint (a helper of a node's conversion) takes the token of its first tagged user.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from graphfuse.dialects import graph

_TOKEN = re.compile(r"gfo\d+(?:x\d+)?(?=_|$)")
UNATTRIBUTED = "(unattributed)"


@dataclass(frozen=True)
class Origin:
    """An op of the user's model: its label (ONNX node name, or `%name` in .mlir) and type."""

    label: str
    op_type: str


def tokens_of(hint: str | None) -> list[str]:
    """Every origin token in a hint: an op standing for several of the model's ops (the
    one GEMM of merged Q/K/V projections, named after all of them) carries one each."""
    return re.findall(r"gfo\d+(?:x\d+)?(?=_|$)", hint or "")


def token_of(hint: str | None) -> str | None:
    """The origin token a (possibly derived) hint starts with."""
    found = _TOKEN.match(hint or "")
    return found.group(0) if found else None


def tag_onnx(path: str | Path) -> tuple[Any, dict[str, Origin]]:
    """The model at `path` with every node output renamed to a token, and the tokens."""
    from graphfuse.frontend.onnx_checks import load_model

    model = load_model(path)
    renamed: dict[str, str] = {}
    origins: dict[str, Origin] = {}
    for index, node in enumerate(model.graph.node):
        for position, name in enumerate(node.output):
            if name:
                token = f"gfo{index}x{position}"
                renamed[name] = token
                origins[token] = Origin(node.name or f"{node.op_type}:{name}", node.op_type)
    _rename_uses(model.graph, renamed)
    for value in [*model.graph.output, *model.graph.value_info]:
        value.name = renamed.get(value.name, value.name)
    return model, origins


def _rename_uses(graph_proto: Any, renamed: Mapping[str, str]) -> None:
    """Rename the node outputs and every use of them, in subgraphs too (a subgraph reads
    the outer graph's values by name)."""
    for node in graph_proto.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
        node.output[:] = [renamed.get(name, name) for name in node.output]
        for attribute in node.attribute:
            for body in [*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs]:
                _rename_uses(body, renamed)


def tag_mlir(module: ModuleOp, entry: str) -> dict[str, Origin]:
    """Re-hint the entry's ops with tokens; each keeps its `%name` (as xDSL holds it) and
    op name as its origin."""
    origins: dict[str, Origin] = {}
    labels: dict[str, int] = {}
    for index, op in enumerate(_entry_ops(module, entry)):
        if isinstance(op, graph.ConstantOp) or not op.results:
            continue
        hint = op.results[0].name_hint
        label = f"%{hint}" if hint else f"{op.name} #{index}"
        labels[label] = labels.get(label, 0) + 1
        if labels[label] > 1:
            label = f"{label} ({labels[label]})"  # xDSL keeps %h_1 and %h_2 as `h`
        token = f"gfo{index}"
        origins[token] = Origin(label, op.name)
        for result in op.results:
            result.name_hint = token
    return origins


def adopt_users_tokens(module: ModuleOp, entry: str) -> None:
    """Give each untagged op the token of its first tagged user (in reverse IR order, so a
    chain of helpers takes the token of the op they all feed)."""
    for op in reversed(list(_entry_ops(module, entry))):
        if not op.results or any(token_of(r.name_hint) for r in op.results):
            continue
        users = [use.operation for r in op.results for use in r.uses]
        tokens = [t for user in users for r in user.results if (t := token_of(r.name_hint))]
        if tokens:
            for result in op.results:
                result.name_hint = f"{tokens[0]}_part"


def _entry_ops(module: ModuleOp, entry: str) -> Sequence[Any]:
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == entry:
            return list(op.body.block.ops)
    return []
