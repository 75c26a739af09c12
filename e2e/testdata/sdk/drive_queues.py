"""Queues scenario (the queues are declared by the e2e harness).

  drive_queues.py fanout <endpoint> <serial|small> <dir> <n>
      Runs serial_fanout or small_fanout with n steps and reports the run
      with the reasons its steps waited for the queue.
  drive_queues.py depth <endpoint> <dir> <release file> <n>
      Starts depth_fanout with n held steps, waits until the queue is full,
      submits one more run straight to the queue (which must be refused),
      releases the steps and reports what it saw and how the run ended.
  drive_queues.py runs <endpoint> <dir> <children dir a> <children dir b>
      Submits two runs of serial_run on the run-capped queue at once and
      reports both.
  drive_queues.py unknown <endpoint>
      Submits a run to an unknown queue, and a run whose child names one.
"""

import asyncio
import pathlib
import sys
import time

import _drive
import flyte.remote
import wf_queues


def described(e: BaseException) -> str:
    """An exception with the Connect code of the error it came from (the
    SDK wraps CreateRun's ConnectError)."""
    name, cause = None, e
    while cause is not None and name is None:
        name = getattr(getattr(cause, "code", None), "name", None)  # connectrpc's Code enum
        cause = cause.__cause__ or cause.__context__
    return f"{type(e).__name__} [code {name}]: {e}"


async def report(run_name: str) -> dict:
    entry = await _drive.outcome(run_name)
    entry["run"] = run_name
    return entry


async def fanout(endpoint: str, which: str, dir: str, n: int) -> dict:
    _drive.init(endpoint)
    task = {"serial": wf_queues.serial_fanout, "small": wf_queues.small_fanout}[which]
    run = await _drive.runner().run.aio(task, n=n, dir=dir)
    out = await report(run.name)
    out["waits"] = []
    for a in await _drive.actions(run.name):
        if a["name"] != "a0":
            out["waits"] += await queue_waits(run.name, a["name"])
    return out


async def queue_waits(run_name: str, action: str) -> list[str]:
    """Why the action waited for its queue, as its attempts' cluster events
    tell it."""
    details = await flyte.remote.ActionDetails.get.aio(run_name=run_name, name=action)
    return [ce.message for att in details.pb2.attempts for ce in att.cluster_events if "queue" in ce.message]


async def held_children(run_name: str) -> int:
    return sum(1 for a in await _drive.actions(run_name) if a["task"] == "e2e_queues.held_step")


async def depth(endpoint: str, dir: str, release: str, n: int) -> dict:
    _drive.init(endpoint)
    run = await _drive.runner().run.aio(wf_queues.depth_fanout, n=n, dir=dir, release=release)
    deadline = time.monotonic() + 600
    while (count := await held_children(run.name)) < 5:
        if time.monotonic() > deadline:
            raise _drive.Failure(f"run {run.name}: only {count} steps admitted after 600s")
        await asyncio.sleep(0.5)
    refused = ""
    try:
        extra = await _drive.runner(queue="e2e-depth-5").run.aio(wf_queues.held_step, i=99, dir=dir, release=release)
        refused = f"admitted as run {extra.name}"
    except Exception as e:  # noqa: BLE001 - the refusal is what is reported
        refused = described(e)
    when_full = await held_children(run.name)
    pathlib.Path(release).touch()
    out = await report(run.name)
    out.update({"when_full": when_full, "refused": refused, "after": await held_children(run.name)})
    return out


async def runs(endpoint: str, dir: str, kids_a: str, kids_b: str) -> dict:
    _drive.init(endpoint)
    submitted = await asyncio.gather(
        *(
            _drive.runner(queue="e2e-runs-1").run.aio(wf_queues.serial_run, tag=tag, dir=dir, children_dir=kids)
            for tag, kids in (("a", kids_a), ("b", kids_b))
        )
    )
    # The first root holds until both runs exist: the second then waits.
    pathlib.Path(dir, "submitted").touch()
    out = []
    for r in submitted:
        entry = await report(r.name)
        entry["waits"] = await queue_waits(r.name, "a0")
        out.append(entry)
    return {"runs": out}


async def unknown(endpoint: str) -> dict:
    _drive.init(endpoint)
    out = {}
    try:
        run = await _drive.runner(queue="e2e-no-such-queue").run.aio(wf_queues.plain, x=1)
        out["run_error"] = f"admitted as run {run.name}"
    except Exception as e:  # noqa: BLE001 - the refusal is what is reported
        out["run_error"] = described(e)
    run = await _drive.runner().run.aio(wf_queues.unknown_child, x=1)
    out["child"] = await report(run.name)
    return out


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "fanout":
        _drive.main(lambda: fanout(args[0], args[1], args[2], int(args[3])))
    elif cmd == "depth":
        _drive.main(lambda: depth(args[0], args[1], args[2], int(args[3])))
    elif cmd == "runs":
        _drive.main(lambda: runs(*args))
    elif cmd == "unknown":
        _drive.main(lambda: unknown(args[0]))
    else:
        sys.exit(f"unknown command {cmd}")
