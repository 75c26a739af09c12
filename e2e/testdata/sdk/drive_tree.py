"""Tree scenario: a parent fanning out n children with asyncio.gather, a
parent -> child -> grandchild chain, and a parent that catches a failing
child. Reports each run's phase, output and action tree.

Usage: drive_tree.py <endpoint> <fan-out width>
"""

import asyncio
import sys

import _drive
import wf_tree


async def scenario(endpoint: str, width: int) -> dict:
    _drive.init(endpoint)
    runs = {
        "fanout": await _drive.runner().run.aio(wf_tree.fanout, n=width),
        "chain": await _drive.runner().run.aio(wf_tree.chain, x=1),
        "catch": await _drive.runner().run.aio(wf_tree.catch, message="child failure e2e-7f3a"),
    }
    phases = await asyncio.gather(*(_drive.wait(r, 600) for r in runs.values()))
    result = {}
    for (key, run), phase in zip(runs.items(), phases):
        entry = {"run": run.name, "phase": phase, "actions": await _drive.wait_actions_terminal(run.name, 120)}
        if phase == "SUCCEEDED":
            entry["output"] = _drive.jsonable((await run.outputs.aio())[0])
        else:
            entry["error"] = await _drive.error_of(run.name)
        result[key] = entry
    return result


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], int(sys.argv[2])))
