"""Resources scenario: run tasks whose requests the host cannot satisfy and
one that requests nothing; report how each ended, with its error and the
phases its attempt went through.

Usage: drive_resources.py <endpoint> <marks dir>
"""

import asyncio
import sys

import flyte.remote

import _drive
import wf_resources


async def scenario(endpoint: str, marks: str) -> dict:
    _drive.init(endpoint)
    tasks = {"gpu": wf_resources.needs_a100, "memory": wf_resources.needs_memory, "ordinary": wf_resources.ordinary}
    runs = {k: await _drive.runner().run.aio(t, marks=marks) for k, t in tasks.items()}
    phases = await asyncio.gather(*(_drive.wait(r, 300) for r in runs.values()))
    out = {}
    for (key, run), phase in zip(runs.items(), phases):
        details = await flyte.remote.ActionDetails.get.aio(run_name=run.name, name="a0")
        out[key] = {
            "run": run.name,
            "phase": phase,
            "error": await _drive.error_of(run.name),
            "attempts": _drive.attempts_of(details),
        }
    return out


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2]))
