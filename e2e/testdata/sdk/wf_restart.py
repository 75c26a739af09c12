"""Tasks for the restart scenario. Every attempt appends
    start <action> <attempt> <pid> <unix time> [concurrent=<pid>,...]
    end <action> <attempt> <pid> <unix time>
to <log_dir>/<run name>.log. On start it also looks for earlier attempts of the
same action that never wrote `end` and whose process is still alive: such a
process running now means two attempts of one action overlap, and the start
line names it.

Each task holds, after `start`, until the file `release` exists: the test
creates it only after it killed and restarted the manager, so the kill always
hits tasks that are running."""

import asyncio
import fcntl
import os
import pathlib
import time

import flyte

env = flyte.TaskEnvironment(name="e2e_restart")


def _alive_attempt(pid: int, run: str, action: str) -> bool:
    """Whether pid is a live process of this run's action (not a recycled pid)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError):
        return False
    return f"RUN_NAME={run}".encode() in env and f"ACTION_NAME={action}".encode() in env


def _record(log_dir: str, event: str) -> None:
    ctx = flyte.ctx()
    run, action = ctx.action.run_name, ctx.action.name
    attempt = os.environ.get("FLYTE_ATTEMPT_NUMBER", "?")
    path = pathlib.Path(log_dir) / f"{run}.log"
    with path.open("a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        line = f"{event} {action} {attempt} {os.getpid()} {time.time():.6f}"
        if event == "start":
            f.seek(0)
            open_pids = set()
            for prev in f.read().splitlines():
                fields = prev.split()
                if len(fields) >= 4 and fields[1] == action:
                    pid = int(fields[3])
                    if fields[0] == "start":
                        open_pids.add(pid)
                    elif fields[0] == "end":
                        open_pids.discard(pid)
            concurrent = sorted(p for p in open_pids if p != os.getpid() and _alive_attempt(p, run, action))
            if concurrent:
                line += " concurrent=" + ",".join(map(str, concurrent))
        f.write(line + "\n")
        f.flush()


async def _hold(release: str) -> None:
    while not os.path.exists(release):
        await asyncio.sleep(0.2)


@env.task
async def slow(i: int, log_dir: str, release: str) -> int:
    _record(log_dir, "start")
    await _hold(release)
    _record(log_dir, "end")
    return i


@env.task
async def slow_fanout(n: int, log_dir: str, release: str) -> int:
    _record(log_dir, "start")
    total = sum(await asyncio.gather(*(slow(i, log_dir, release) for i in range(n))))
    _record(log_dir, "end")
    return total
