"""Tasks for the crash matrix and the database-outage suite.

Every execution of a task, in <state dir>:
  - appends "<pid> <attempt> <unix time>" to <run>.<action>.exec, so the test
    counts how often each action ran and which attempts did;
  - holds an exclusive lock on <run>.<action>.lock while it runs; when it
    cannot take it (another execution of the same action still runs), it
    appends a line to <run>.<action>.overlap and carries on.
A leaf sleeps for `seconds` or, with a release file, waits until that file
exists, so that a fault hits work that is really running.
"""

import asyncio
import contextlib
import fcntl
import os
import pathlib
import time

import flyte

env = flyte.TaskEnvironment(name="e2e_fault")


@contextlib.contextmanager
def _exclusive(state_dir: str):
    ctx = flyte.ctx()
    base = pathlib.Path(state_dir) / f"{ctx.action.run_name}.{ctx.action.name}"
    attempt = os.environ.get("FLYTE_ATTEMPT_NUMBER", "?")
    with open(f"{base}.exec", "a") as f:
        f.write(f"{os.getpid()} {attempt} {time.time():.6f}\n")
    with open(f"{base}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with open(f"{base}.overlap", "a") as f:
                f.write(f"{os.getpid()} {attempt} {time.time():.6f}\n")
        yield


async def _hold(seconds: float, release: str) -> None:
    if release:
        while not os.path.exists(release):
            await asyncio.sleep(0.2)
    else:
        await asyncio.sleep(seconds)


@env.task
async def leaf(i: int, state_dir: str, seconds: float, release: str) -> int:
    with _exclusive(state_dir):
        await _hold(seconds, release)
    return i


@env.task
async def fanout(n: int, state_dir: str, seconds: float, release: str) -> int:
    """Fans out n leaves and returns 0 + 1 + ... + (n-1)."""
    with _exclusive(state_dir):
        return sum(await asyncio.gather(*(leaf(i, state_dir, seconds, release) for i in range(n))))
