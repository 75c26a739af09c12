"""The tasks the CLI scenarios run, deploy and run again by name."""

import asyncio
import pathlib

import flyte

env = flyte.TaskEnvironment(name="e2e_cli")


@env.task
async def double(x: int) -> int:
    print(f"double got x={x}", flush=True)
    return 2 * x


@env.task(retries=1)
async def second_try(dir: str) -> str:
    """Fails its first attempt; the second touches <dir>/second-started and
    holds until <dir>/release exists, so the test sees the action RUNNING
    with a FAILED attempt in its history."""
    d = pathlib.Path(dir)
    if not (d / "first-failed").exists():
        (d / "first-failed").touch()
        raise ValueError("the first attempt fails on purpose")
    (d / "second-started").touch()
    while not (d / "release").exists():
        await asyncio.sleep(0.2)
    return "second try"
