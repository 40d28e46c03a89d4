"""loop-tile-matmul cuts a threaded GEMM's rows and panels into tasks that end together on
the team the code is built for: the guided schedule is simulated (task_balance.py), a
split whose equal tasks leave a thread idle at the end is cut again, and the cut gives
the reference's results, row tails and narrow last panels included."""

from __future__ import annotations

from typing import Any

import pytest

from graphfuse.compiler import CompileOptions, Stage, lower_to
from graphfuse.lowering.cpu.gemm import tile_plan
from graphfuse.lowering.cpu.gemm.task_balance import finish, task_costs
from graphfuse.parsing import parse_text
from graphfuse.testing.compare import compile_and_compare
from tests.lowering.cpu.test_matmul_tiling import _matmul_bias_relu, _plans


def test_the_guided_schedule_is_simulated_as_the_runtime_hands_out_tasks() -> None:
    """A free thread takes max(1, left / (2 x team)) tasks: 9 equal tasks on 2 threads
    end after 5 (2, then 1 at a time), 10 after 5, 8 after 4; on 3 threads 9 end after 3.
    A long first task keeps its thread while the other takes the rest."""
    assert finish([1.0] * 9, 2) == 5
    assert finish([1.0] * 10, 2) == 5
    assert finish([1.0] * 8, 2) == 4
    assert finish([1.0] * 9, 3) == 3
    assert finish([5.0, 1.0, 1.0, 1.0], 2) == 5
    assert finish([1.0, 1.0, 1.0, 5.0], 2) == 6
    # A task that packs its panels costs MR rows more per vector of columns.
    assert task_costs(2, [12, 6], [4.0, 1.0], 6) == [72, 18, 48, 12] * 2


@pytest.mark.parametrize(("workers", "tasks"), [(2, 10), (3, 9), (4, 12)])
def test_equal_tasks_are_cut_for_the_team(workers: int, tasks: int, monkeypatch: Any) -> None:
    """1500 x 1536 @ 1536 x 384 (Whisper-base's second feed-forward GEMM): 3 row blocks
    (A's rows in 4 MiB) and 12 panels were 9 equal tasks whatever the team; on 2 threads
    one ran 5 and the other 4 (3864 us against 3476 in 10 tasks here). 3 threads keep the
    9; 2 and 4 get the fewest tasks past 9 that they divide. Without the balance the plan
    is the old one."""
    plans = _plans(monkeypatch)
    text = _matmul_bias_relu((), 1500, 1536, 384, True)
    lower_to(parse_text(text, "mm"), Stage.UPSTREAM, CompileOptions(threads=workers, lanes=16))
    monkeypatch.setattr(tile_plan, "BALANCE_GAIN", 2.0)
    lower_to(parse_text(text, "mm"), Stage.UPSTREAM, CompileOptions(threads=workers, lanes=16))
    balanced, unbalanced = plans
    assert (balanced.tasks, unbalanced.tasks) == (tasks, 9)
    assert balanced.row_blocks >= unbalanced.row_blocks == 3
    assert all(p.threads and not p.b_in_task for p in plans)


CASES = {
    # Swin-T's 3136 x 96 @ 96 x 96 (3 panels, one row block: 3 tasks, 2 on one thread),
    # with a row tail of 1: two row blocks.
    "3137x96x96": (3137, 96, 96),
    # A short K (the store-bound split of 16-tile blocks: 16, 16, 10 tiles, as ResNet-50's
    # 1x1 convolutions 64 -> 256 on 56x56) in 9 tasks, and a last panel of 17 columns
    # (16 + a dot column at AVX-512): 5 even row blocks.
    "256x64x3153": (256, 64, 3153),
}


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("case", list(CASES))
def test_cut_tasks_match_the_reference(case: str, threads: int, monkeypatch: Any) -> None:
    """The cuts balancing makes (rows in more, even blocks; panels in other blocks) give
    the reference's results, with row tails and narrow last panels."""
    monkeypatch.setattr(tile_plan, "MIN_THREADED_MACS", 0)
    plans = _plans(monkeypatch)
    text = _matmul_bias_relu((), *CASES[case], True)
    options = CompileOptions(threads=threads, lanes=16)
    compile_and_compare(parse_text(text, "mm"), options=options)
    monkeypatch.setattr(tile_plan, "BALANCE_GAIN", 2.0)
    lower_to(parse_text(text, "mm"), Stage.UPSTREAM, options)
    cut, old = plans[0], plans[-1]
    key = (cut.row_blocks, cut.per_task, cut.panel_blocks)
    if threads == 2:
        assert key != (old.row_blocks, old.per_task, old.panel_blocks)
    assert cut.tasks % threads == 0 or cut.tasks > 4 * threads
