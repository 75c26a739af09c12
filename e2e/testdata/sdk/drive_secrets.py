"""Secrets scenario: a task that reads a secret from its environment and one
from a mounted file (reporting digests), and a task requesting a secret that
does not exist. Reports each run's phase, output or error, and attempts.

Usage: drive_secrets.py <endpoint> <counter dir> [read-only]
"""

import sys

import _drive
import flyte.remote
import wf_secrets


async def describe(run, phase: str) -> dict:
    details = await flyte.remote.ActionDetails.get.aio(run_name=run.name, name="a0")
    entry = {
        "run": run.name,
        "phase": phase,
        "status_attempts": details.attempts,
        "attempts": _drive.attempts_of(details),
        "error": details.error_info.message if details.error_info else "",
    }
    if phase == "SUCCEEDED":
        entry["output"] = (await run.outputs.aio())[0]
    return entry


async def scenario(endpoint: str, counter_dir: str, read_only: bool) -> dict:
    _drive.init(endpoint)
    reader = await _drive.runner().run.aio(wf_secrets.read_secrets)
    result = {"read": await describe(reader, await _drive.wait(reader, 300))}
    if not read_only:
        missing = await _drive.runner().run.aio(wf_secrets.needs_missing, counter_dir=counter_dir)
        result["missing"] = await describe(missing, await _drive.wait(missing, 300))
    return result


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2], len(sys.argv) > 3 and sys.argv[3] == "read-only"))
