"""Timeout scenario: a task with a 2 s timeout that sleeps 60 s. Reports the
run's phase, the error and the attempt history.

Usage: drive_timeout.py <endpoint> <pid dir> <marker>

The marker goes into the run's environment so the test can tell the task's
process from a recycled pid.
"""

import sys
import time

import _drive
import flyte.remote
import wf_timeout


async def scenario(endpoint: str, pid_dir: str, marker: str) -> dict:
    _drive.init(endpoint)
    run = await _drive.runner(env_vars={"FM_E2E_MARKER": marker}).run.aio(
        wf_timeout.sleepy, seconds=60, pid_dir=pid_dir
    )
    created = time.time()
    phase = await _drive.wait(run, 300)
    observed = time.time()
    details = await flyte.remote.ActionDetails.get.aio(run_name=run.name, name="a0")
    return {
        "run": run.name,
        "phase": phase,
        "client_seconds": observed - created,
        "status_attempts": details.attempts,
        "attempts": _drive.attempts_of(details),
        "error": details.error_info.message if details.error_info else "",
    }


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2], sys.argv[3]))
