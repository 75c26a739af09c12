"""A task whose Pod cannot start its command: the test cluster's node has no
`a0` on PATH. Runs wf_retry.flaky (retries=2), which never gets to count an
attempt, and reports the run as drive_retry describes it, with the first
attempt's counter file's existence.

Usage: drive_nostart.py <endpoint> <counter dir>
"""

import pathlib
import sys

import _drive
import drive_retry
import wf_retry


async def scenario(endpoint: str, counter_dir: str) -> dict:
    _drive.init(endpoint)
    run = await _drive.runner().run.aio(wf_retry.flaky, counter_dir=counter_dir)
    phase = await _drive.wait(run, 300)
    entry = await drive_retry.describe(run, phase)
    entry["task_ran"] = (pathlib.Path(counter_dir) / "attempts").exists()
    return entry


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2]))
