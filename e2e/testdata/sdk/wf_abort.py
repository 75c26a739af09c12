"""Tasks for the abort scenario. Every process records its pid (and the pid of
a helper subprocess) under work_dir, so the test can check that an abort
stopped the whole process tree; children then wait for a release file, and
only a child that is still alive after the abort would write after-* files."""

import asyncio
import os
import pathlib
import subprocess

import flyte

env = flyte.TaskEnvironment(name="e2e_abort")


def _mark(work_dir: pathlib.Path, name: str) -> None:
    (work_dir / name).touch()


@env.task
async def hold(i: int, work_dir: str) -> int:
    d = pathlib.Path(work_dir)
    me = flyte.ctx().action.name
    # A grandchild process: an abort must stop it too, not only the task process.
    helper = subprocess.Popen(["sleep", "600"])
    _mark(d, f"pid-{os.getpid()}")
    _mark(d, f"pid-{helper.pid}")
    _mark(d, f"started-{me}-{os.getpid()}")
    for _ in range(3000):  # 10 minutes at most
        if (d / "release").exists():
            break
        await asyncio.sleep(0.2)
    _mark(d, f"after-{me}-{os.getpid()}")
    helper.kill()
    return i


@env.task
async def hold_parent(n: int, work_dir: str) -> int:
    _mark(pathlib.Path(work_dir), f"pid-{os.getpid()}")
    return sum(await asyncio.gather(*(hold(i, work_dir) for i in range(n))))
