"""Tasks for the recover scenario. Every execution of task code appends one
line to <counter_dir>/executions, so the test sees which actions really ran
and which a recovery reused (a recovered action runs nothing).

fan(n) calls the trace offset, then leaf(i) for i < n, and sums their outputs; the odd leaves fail
while the marker file exists, so a first run leaves some children
SUCCEEDED and some FAILED, and removing the marker fixes the cause.
"""

import asyncio
import os
import pathlib

import flyte

env = flyte.TaskEnvironment(name="e2e_recover")


def _record(counter_dir: str, what: str) -> None:
    with (pathlib.Path(counter_dir) / "executions").open("a") as f:
        f.write(f"{what} run={os.environ.get('RUN_NAME', '?')} action={os.environ.get('ACTION_NAME', '?')}\n")


@env.task
async def leaf(i: int, counter_dir: str, marker: str) -> int:
    _record(counter_dir, f"leaf{i}")
    if i % 2 == 1 and os.path.exists(marker):
        raise ValueError(f"leaf {i} fails while {marker} exists")
    return i * 10


@flyte.trace
async def offset(counter_dir: str) -> int:
    """Runs in fan's process; a recovery replays its recorded result."""
    _record(counter_dir, "trace")
    return 5


@env.task
async def fan(n: int, counter_dir: str, marker: str) -> int:
    _record(counter_dir, "fan")
    base = await offset(counter_dir)
    # Every child ends before the parent decides, so the first run's children
    # are settled (SUCCEEDED or FAILED), none aborted half-way.
    results = await asyncio.gather(*[leaf(i, counter_dir, marker) for i in range(n)], return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise errors[0]
    return base + sum(results)
