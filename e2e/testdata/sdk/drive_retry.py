"""Retry scenario: a task that fails recoverably twice then succeeds, and one
that raises NonRecoverableError. Reports each run's phase, output and the
attempt history (with phase transitions) from GetActionDetails.

A third task raises a SYSTEM error of its own four times, then succeeds.

Usage: drive_retry.py <endpoint> <counter dir for flaky> <counter dir for doomed> <counter dir for shaky>
"""

import asyncio
import sys

import _drive
import flyte.remote
import wf_retry


async def describe(run, phase: str) -> dict:
    details = await flyte.remote.ActionDetails.get.aio(run_name=run.name, name="a0")
    entry = {
        "run": run.name,
        "phase": phase,
        "status_attempts": details.attempts,
        "attempts": _drive.attempts_of(details),
        "error": details.error_info.message if details.error_info else "",
        # ListActions filtered by phase, as Action.listall and Run.first_failure send it.
        "failed_actions": [a.name async for a in flyte.remote.Action.listall.aio(for_run_name=run.name, in_phase=("failed",))],
        "succeeded_actions": [
            a.name async for a in flyte.remote.Action.listall.aio(for_run_name=run.name, in_phase=("succeeded", "aborted"))
        ],
    }
    failure = await run.first_failure.aio()
    entry["first_failure"] = failure.name if failure else None
    if phase == "SUCCEEDED":
        entry["output"] = (await run.outputs.aio())[0]
    return entry


async def scenario(endpoint: str, flaky_dir: str, doomed_dir: str, shaky_dir: str) -> dict:
    _drive.init(endpoint)
    flaky = await _drive.runner().run.aio(wf_retry.flaky, counter_dir=flaky_dir)
    doomed = await _drive.runner().run.aio(wf_retry.doomed, counter_dir=doomed_dir)
    shaky = await _drive.runner().run.aio(wf_retry.shaky, counter_dir=shaky_dir)
    # shaky runs five real attempts one after another, each waiting for one of
    # the executor's slots: under a loaded machine that takes minutes. The Go
    # side bounds the whole scenario at 8 minutes.
    budget = 420
    phases = await asyncio.gather(_drive.wait(flaky, budget), _drive.wait(doomed, budget), _drive.wait(shaky, budget))
    return {
        "flaky": await describe(flaky, phases[0]),
        "doomed": await describe(doomed, phases[1]),
        "shaky": await describe(shaky, phases[2]),
    }


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]))
