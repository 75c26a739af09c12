"""Tasks for the two-managers scenario (e2e/lease_test.go).

Every attempt takes a non-blocking flock on <lock_dir>/<run>.<action>.lock for
as long as it runs (from its start to the end of its process): a second copy of the same action running at the same time
cannot take it and appends a line to <lock_dir>/overlap. Each attempt appends
"start <run> <action> <attempt> <pid>" to <lock_dir>/starts, then waits until
<lock_dir>/release exists, so the test decides when the work may finish."""

import asyncio
import fcntl
import os
import pathlib

import flyte

env = flyte.TaskEnvironment(name="e2e_lease")


def _append(path: pathlib.Path, line: str) -> None:
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(line + "\n")
        f.flush()


_held = []  # the lock files stay open (and locked) until the process ends


def _start(lock_dir: str) -> None:
    d = pathlib.Path(lock_dir)
    ctx = flyte.ctx()
    run, action = ctx.action.run_name, ctx.action.name
    attempt = os.environ.get("FLYTE_ATTEMPT_NUMBER", "?")
    lock = (d / f"{run}.{action}.lock").open("a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        _append(d / "overlap", f"{run} {action} attempt {attempt} pid {os.getpid()} found another copy running")
        raise
    _held.append(lock)
    _append(d / "starts", f"start {run} {action} {attempt} {os.getpid()}")


async def _hold(lock_dir: str) -> None:
    release = pathlib.Path(lock_dir) / "release"
    while not release.exists():
        await asyncio.sleep(0.1)


@env.task
async def leaf(i: int, lock_dir: str) -> int:
    _start(lock_dir)
    await _hold(lock_dir)
    return i * 10


@env.task
async def fanout(n: int, lock_dir: str) -> int:
    _start(lock_dir)
    total = sum(await asyncio.gather(*(leaf(i, lock_dir) for i in range(1, n + 1))))
    await _hold(lock_dir)
    return total
