"""Tasks for the queues scenario. The queues they name are declared in the
manager's configuration by the e2e harness (queues_test.go).

Overlap is observed, not timed: a step that runs creates <dir>/running/<id>
and removes it when it ends, and it records the largest number of running
files it saw. A step that may share its queue with others waits (up to a
generous bound) until it sees a partner, so a queue that allows overlap is
seen to; one that must not is seen not to."""

import asyncio
import os
import pathlib
import time

import flyte

env = flyte.TaskEnvironment(name="e2e_queues")


async def _occupy(dir: str, ident: str, total: int, partner_wait: float, want: int = 2) -> int:
    """Run as one of total steps sharing dir; return the most steps seen
    running at once. It holds until it has seen want steps running (itself
    included) for a moment, every other step ended, or partner_wait
    passed."""
    root = pathlib.Path(dir)
    running, ended = root / "running", root / "ended"
    running.mkdir(parents=True, exist_ok=True)
    ended.mkdir(parents=True, exist_ok=True)
    mine = running / ident
    mine.touch()
    most, seen_partner_at = 1, None
    start = time.monotonic()
    try:
        while True:
            n = len(list(running.iterdir()))
            most = max(most, n)
            now = time.monotonic()
            if n >= want and seen_partner_at is None:
                seen_partner_at = now
            if seen_partner_at is not None and now - seen_partner_at >= 1:
                break
            if len(list(ended.iterdir())) >= total - 1 or now - start >= partner_wait:
                break
            await asyncio.sleep(0.1)
    finally:
        mine.unlink()
        (ended / ident).touch()
    with (root / "steps").open("a") as f:
        f.write(f"{ident} most={most} pid={os.getpid()} action={os.environ.get('ACTION_NAME', '?')}\n")
    return most


@env.task(queue="e2e-serial-1")
async def serial_step(i: int, dir: str, total: int) -> int:
    """On a capacity-1 queue: holds 4 s unless it sees a partner, which it
    must never do."""
    return await _occupy(dir, f"step{i}", total, 4)


@env.task
async def shared_step(i: int, dir: str, total: int) -> int:
    """Routed with override(queue=...) to a capacity-3 queue by its caller:
    holds until it sees three running (or the others ended)."""
    return await _occupy(dir, f"step{i}", total, 120, want=3)


@env.task
async def serial_fanout(n: int, dir: str) -> list[int]:
    return list(await asyncio.gather(*(serial_step(i, dir, n) for i in range(n))))


@env.task
async def small_fanout(n: int, dir: str) -> list[int]:
    step = shared_step.override(queue="e2e-small-3")
    return list(await asyncio.gather(*(step(i, dir, n) for i in range(n))))


@env.task(queue="e2e-depth-5")
async def held_step(i: int, dir: str, release: str) -> int:
    """On a depth-5 queue: counts itself running and holds until release."""
    root = pathlib.Path(dir)
    (root / "admitted").mkdir(parents=True, exist_ok=True)
    (root / "admitted" / f"step{i}").touch()
    path = pathlib.Path(release)
    for _ in range(6000):  # 20 minutes at most
        if path.exists():
            break
        await asyncio.sleep(0.2)
    return i


@env.task
async def depth_fanout(n: int, dir: str, release: str) -> list[int]:
    """Submits n held steps at once: the SDK retries the refused ones
    (RESOURCE_EXHAUSTED is backpressure) until the queue has room."""
    return list(await asyncio.gather(*(held_step(i, dir, release) for i in range(n))))


@env.task
async def run_child(i: int, dir: str) -> int:
    return await _occupy(dir, f"child{i}", 2, 120)


@env.task
async def serial_run(tag: str, dir: str, children_dir: str) -> int:
    """The root of a run on a maxRunConcurrency=1 queue (with_runcontext):
    holds 5 s unless it sees another run's root, which it must never do;
    then fans out two children, which are not capped and see each other.
    It first holds until the driver has submitted both runs (dir/submitted),
    so the other run is created while this one is in flight, however slow
    the submissions are."""
    submitted, deadline = pathlib.Path(dir) / "submitted", time.monotonic() + 300
    while not submitted.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    most = await _occupy(dir, tag, 2, 5)
    kids = await asyncio.gather(*(run_child(i, children_dir) for i in range(2)))
    return most * 100 + min(kids)


@env.task
async def plain(x: int) -> int:
    return x


@env.task
async def unknown_child(x: int) -> int:
    return await plain.override(queue="e2e-no-such-queue")(x)
