"""Submits one run of add_one and reports its name without waiting.

Usage: drive_submit.py <endpoint>
"""

import sys

import _drive
import wf_values


async def scenario(endpoint: str) -> dict:
    _drive.init(endpoint)
    run = await _drive.runner().run.aio(wf_values.add_one, x=1)
    return {"run": run.name}


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1]))
