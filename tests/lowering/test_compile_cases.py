"""Every lit fusion case and bundled example, compiled and run, equals the reference."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects import func

from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare

ROOT = Path(__file__).resolve().parents[2]
CASE_FILES = sorted((ROOT / "lit_tests" / "passes").rglob("*.mlir")) + sorted(
    (ROOT / "examples").glob("*.mlir")
)
NOT_COMPUTABLE = {"non_graph_op_is_opaque", "external_kept", "short_blob"}
"""Cases whose functions hold ops with no meaning to compile: an arith op on tensors, an
external kernel nobody registered (compiling them is refused with a diagnostic, tested in
test_runtime), a weight whose blob is too short for its type (the diagnostic is the case)."""


def _cases() -> list[tuple[str, str, str]]:
    cases: list[tuple[str, str, str]] = []
    for path in CASE_FILES:
        for index, text in enumerate(path.read_text().split("// -----")):
            for line in text.splitlines():
                if line.startswith("func.func @"):
                    name = line.split("@", 1)[1].split("(", 1)[0]
                    if name not in NOT_COMPUTABLE:
                        cases.append((f"{path.name}#{index}", text, name))
    return cases


CASES = _cases()


def test_cases_found() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize(("where", "text", "name"), CASES, ids=[f"{c[0]}@{c[2]}" for c in CASES])
def test_compiled_case_matches_reference(where: str, text: str, name: str) -> None:
    module = parse_text(text, where)
    assert any(isinstance(op, func.FuncOp) for op in module.ops)
    compile_and_compare(module, name, seed=1)
