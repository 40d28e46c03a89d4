"""When a GEMM's tasks end on a team of threads: the finish of a split, for choosing one.

The parallel runtime hands a loop's tasks out in order by a guided schedule
(parallel_runtime.c): a thread that is free takes max(1, left / (2 x team)) of the tasks
left. Equal tasks whose count the team does not divide leave threads idle at the GEMM's
end, each GEMM, every call: Whisper-base's second feed-forward GEMM (1500 x 1536 @ 1536 x
384, 2 threads) was cut into 3 row blocks and 3 panel blocks, 9 equal tasks, 5 on one
thread and 4 on the other, and took 3864 us; cut into 10 or 8 tasks, 3476 us. ResNet-50's
1x1 convolutions 64 -> 256 on 56x56 were 9 tasks too. Here the schedule is simulated on a
model of each task's work, so tile_plan.py can cut rows and panels for the team.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def finish(costs: Sequence[float], workers: int) -> float:
    """When the last of `workers` threads is done with the tasks of `costs` (in task
    order), handed out as the guided schedule does, every thread starting at 0."""
    free = [0.0] * workers
    start = 0
    while start < len(costs):
        at = heapq.heappop(free)
        size = max(1, (len(costs) - start) // (2 * workers))
        heapq.heappush(free, at + sum(costs[start : start + size]))
        start += size
    return max(free)


def task_costs(
    points: int, block_rows: Sequence[int], block_vectors: Sequence[float], pack_rows: int
) -> list[float]:
    """The work of each task of a split, in task order (batch point, row block, panel
    block, row-major): its rows times its panels' vectors of columns, with `pack_rows`
    more rows for a task that packs its own panels (the packing reads and writes each of
    its panels' columns once, about what a row tile's multiply-adds take per column)."""
    return [
        (rows + pack_rows) * vectors
        for _ in range(points)
        for rows in block_rows
        for vectors in block_vectors
    ]
