"""Warm-start isolation scenario: `hold` in one project until a run of it
was warm-started (the first attempts of a fresh manager start plainly while
its warm server starts), then `scan` in another project. Reports each run's
phase and output.

Usage: drive_warm_secrets.py <endpoint> <holder project> <scanner project> <manager's process name> <probe JSON>
"""

import sys

import _drive
import wf_warm_secrets

HOLD_TRIES = 20


async def run(task, **inputs) -> dict:
    r = await _drive.runner().run.aio(task, **inputs)
    return {"run": r.name, **(await _drive.outcome(r.name, 300))}


async def scenario(endpoint: str, holder: str, scanner: str, manager: str, probe: str) -> dict:
    _drive.init(endpoint, project=holder)
    holds = []
    while len(holds) < HOLD_TRIES:
        holds.append(await run(wf_warm_secrets.hold))
        last = holds[-1]
        if last["phase"] != "SUCCEEDED" or last["output"] != manager:
            break  # warm-started (or failed: the test says so)
    _drive.init(endpoint, project=scanner)
    return {"holds": holds, "scan": await run(wf_warm_secrets.scan, probe=probe)}


if __name__ == "__main__":
    _drive.main(lambda: scenario(*sys.argv[1:6]))
