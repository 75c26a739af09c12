"""A task that outlives its timeout."""

import asyncio
import os
import pathlib

import flyte

env = flyte.TaskEnvironment(name="e2e_timeout")


@env.task(timeout=2)
async def sleepy(seconds: int, pid_dir: str) -> int:
    """Records its pid (so the test can tell the process was stopped), then
    sleeps far longer than its 2 s timeout allows."""
    (pathlib.Path(pid_dir) / f"pid-{os.getpid()}").touch()
    await asyncio.sleep(seconds)
    return seconds
