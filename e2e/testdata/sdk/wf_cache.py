"""Tasks for the cache scenarios. Every execution of task code appends one
line to <counter_dir>/executions, so the test sees how many times the work
really ran (a cache hit runs nothing)."""

import asyncio
import os
import pathlib

import flyte

env = flyte.TaskEnvironment(name="e2e_cache")


def _record(counter_dir: str, what: str) -> None:
    with (pathlib.Path(counter_dir) / "executions").open("a") as f:
        f.write(f"{what} pid={os.getpid()} run={os.environ.get('RUN_NAME', '?')} action={os.environ.get('ACTION_NAME', '?')}\n")


@env.task(cache=flyte.Cache(behavior="override", version_override="e2e-v1", ignored_inputs=("note",)))
async def square(x: int, counter_dir: str, note: str = "") -> int:
    """Cached; `note` is left out of the cache key (ignored_inputs)."""
    _record(counter_dir, "square")
    return x * x


@env.task
async def square_child(x: int, counter_dir: str) -> int:
    """Calls square as a child: the SDK computes the child's cache key, which
    must be the one the manager computed for a root run of square."""
    return await square(x=x, counter_dir=counter_dir, note="child")


@env.task(cache=flyte.Cache(behavior="override", version_override="e2e-serial-v1", serialize=True))
async def slow_square(x: int, counter_dir: str, release: str) -> int:
    """Cached and serialized: of identical concurrent runs one executes. It
    holds until the release file exists, so the others are seen waiting."""
    _record(counter_dir, "slow_square")
    path = pathlib.Path(release)
    for _ in range(6000):  # 20 minutes at most
        if path.exists():
            break
        await asyncio.sleep(0.2)
    return x * x


@env.task(cache=flyte.Cache(behavior="override", version_override="e2e-scope-v1"))
async def where(x: int, counter_dir: str) -> str:
    """Cached; its output names the project and domain that computed it,
    which its cache key leaves out: two projects' runs share the key, so a
    hit on the other's entry shows in the output."""
    _record(counter_dir, "where")
    return f"{x}@{os.environ['FLYTE_INTERNAL_EXECUTION_PROJECT']}/{os.environ['FLYTE_INTERNAL_EXECUTION_DOMAIN']}"
