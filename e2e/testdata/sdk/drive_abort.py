"""Abort scenario.

  drive_abort.py start <endpoint> <work dir> <marker> <children>
      Starts a parent that holds <children> running children and waits until
      all of them run (their started-* files exist). The marker goes into the
      run's environment so the test can find any process of the run.
  drive_abort.py abort <endpoint> <run name>
      Aborts the run and waits until every action is terminal.
  drive_abort.py inspect <endpoint> <run name>
      Reports the run again.
  drive_abort.py sentinel <endpoint> <work dir>
      Releases <work dir> and runs one `hold` task there to its end: once it
      is done, the manager has started, and a task has run past, a release
      that any live or restarted child of an earlier run would also see.

Every mode reports {"run", "phase", "actions", "abort_reason"}.
"""

import asyncio
import pathlib
import sys
import time

import _drive
import flyte.remote
import wf_abort


async def report(run_name: str) -> dict:
    details = await flyte.remote.ActionDetails.get.aio(run_name=run_name, name="a0")
    return {
        "run": run_name,
        "phase": _drive.phase_name(details.raw_phase),
        "actions": await _drive.actions(run_name),
        "abort_reason": details.abort_info.reason if details.abort_info else "",
    }


async def start(endpoint: str, work_dir: str, marker: str, children: int) -> dict:
    _drive.init(endpoint)
    run = await _drive.runner(env_vars={"FM_E2E_MARKER": marker}).run.aio(
        wf_abort.hold_parent, n=children, work_dir=work_dir
    )
    deadline = time.monotonic() + 300
    while len(list(pathlib.Path(work_dir).glob("started-*"))) < children:
        if time.monotonic() > deadline:
            acts = await _drive.actions(run.name)
            raise _drive.Failure(f"run {run.name}: children not all running after 300s: {acts}")
        await asyncio.sleep(0.5)
    return await report(run.name)


async def abort(endpoint: str, run_name: str) -> dict:
    _drive.init(endpoint)
    run = await flyte.remote.Run.get.aio(name=run_name)
    await run.abort.aio(reason="e2e abort test")
    await _drive.wait(run, 120)
    await _drive.wait_actions_terminal(run.name, 120)
    return await report(run.name)


async def sentinel(endpoint: str, work_dir: str) -> dict:
    _drive.init(endpoint)
    (pathlib.Path(work_dir) / "release").touch()
    run = await _drive.runner().run.aio(wf_abort.hold, i=7, work_dir=work_dir)
    await _drive.wait(run, 300)
    return await report(run.name)


async def inspect(endpoint: str, run_name: str) -> dict:
    _drive.init(endpoint)
    return await report(run_name)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "start":
        _drive.main(lambda: start(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
    elif mode == "abort":
        _drive.main(lambda: abort(sys.argv[2], sys.argv[3]))
    elif mode == "sentinel":
        _drive.main(lambda: sentinel(sys.argv[2], sys.argv[3]))
    else:
        _drive.main(lambda: inspect(sys.argv[2], sys.argv[3]))
