"""The layout the README describes: imports point down the layers, folders and classes stay small.

Read from the source with `ast`, so a change that makes a dialect import a pass, a conversion
import a target, or a class grow past the house limit fails here, not in review.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"dialects": "graphfuse.dialects", "passes": "graphfuse.passes"}
FOLDERS |= {"lowering": "graphfuse.lowering", "graphfuse": "graphfuse"}

BASE = (
    "graphfuse.parsing",
    "graphfuse.graph_inputs",
    "graphfuse.outputs",
    "graphfuse.toolchain",
    "graphfuse.timing",
    "graphfuse.weights",
    "graphfuse.resources",
)
"""Diagnostics, input checks, tool finding, stage timing, weights files and where
`dense_resource` data is found: used by every layer, importing none above."""
CONVERSIONS = ("graphfuse.lowering.graph_to_loop", "graphfuse.lowering.loop_to_upstream")

ALLOWED: list[tuple[str, tuple[str, ...]]] = [
    ("graphfuse.dialects", ("graphfuse.dialects", *BASE)),
    ("graphfuse.passes", ("graphfuse.dialects", "graphfuse.passes", *BASE)),
    ("graphfuse.lowering.graph_to_loop", ("graphfuse.dialects", *CONVERSIONS, *BASE)),
    ("graphfuse.lowering.loop_to_upstream", ("graphfuse.dialects", *CONVERSIONS, *BASE)),
    (
        "graphfuse.lowering.gpu",
        ("graphfuse.dialects", *CONVERSIONS, "graphfuse.lowering.gpu", *BASE),
    ),
    (
        "graphfuse.lowering.cpu",
        ("graphfuse.dialects", *CONVERSIONS, "graphfuse.lowering.cpu", *BASE),
    ),
    ("graphfuse.frontend", ("graphfuse.dialects", "graphfuse.frontend", *BASE)),
    ("graphfuse.runtime", ("graphfuse.runtime", *BASE)),
]
"""Each layer (by module prefix) and the prefixes it may import; cli, compiler, pipelines,
universe and testing sit on top and may import anything."""

MAX_MODULES = 15
MAX_CLASS_LINES = 250


def _modules() -> Iterator[tuple[str, Path]]:
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join([package, *parts]), path


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _violations() -> list[str]:
    found: list[str] = []
    for module, path in _modules():
        rule = next((allowed for layer, allowed in ALLOWED if _within(module, layer)), None)
        if rule is None:
            continue
        for target in _imports(path):
            if not _within(target, "graphfuse") or target == "graphfuse":
                continue
            if not any(_within(target, prefix) for prefix in rule):
                found.append(f"{module} imports {target}")
    return sorted(set(found))


def test_layout_imports_point_down() -> None:
    assert _violations() == []


def test_layout_rule_catches_an_upward_import(tmp_path: Path) -> None:
    """The rule itself can fail: a dialect module importing a pass is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from graphfuse.passes.fusion.graph_fuse import GraphFusePass\n")
    rule = dict(ALLOWED)["graphfuse.dialects"]
    assert [t for t in _imports(bad) if not any(_within(t, p) for p in rule)]


@pytest.mark.parametrize("folder", list(FOLDERS))
def test_layout_folders_hold_at_most_15_modules(folder: str) -> None:
    crowded = {
        str(d.relative_to(ROOT)): n
        for d in [ROOT / folder, *(ROOT / folder).rglob("*")]
        if d.is_dir()
        and (n := len([p for p in d.glob("*.py") if p.name != "__init__.py"])) > MAX_MODULES
    }
    assert crowded == {}


def test_layout_classes_stay_under_250_lines() -> None:
    large = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)"
        for _, path in _modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        and (lines := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_CLASS_LINES
    ]
    assert large == []
