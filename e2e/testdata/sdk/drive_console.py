"""Deploys wf_console's environment, then starts a run of each of its tasks:
add and fails are waited for, hold is left running (until <marker> exists).

Usage: drive_console.py <endpoint> <marker>
"""

import sys

import flyte

import _drive
import wf_console


async def scenario(endpoint: str, marker: str) -> dict:
    _drive.init(endpoint)
    await flyte.deploy.aio(wf_console.env)
    ok = await _drive.runner().run.aio(wf_console.add, x=1)
    bad = await _drive.runner().run.aio(wf_console.fails)
    held = await _drive.runner().run.aio(wf_console.hold, marker=marker)
    return {
        "ok": ok.name,
        "ok_phase": await _drive.wait(ok, 600),
        "bad": bad.name,
        "bad_phase": await _drive.wait(bad, 600),
        "held": held.name,
    }


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2]))
