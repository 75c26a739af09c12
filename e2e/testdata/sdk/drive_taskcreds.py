"""Runs under auth.mode required, submitted with an API key: a fan-out whose
parent enqueues its children with its attempt's credential, then a probe
whose task tries to read another run and another project with it.

Usage: drive_taskcreds.py <api key> <fan-out width> <other project>
"""

import json
import sys

import flyte
import flyte.remote

import _drive
import wf_taskcreds


async def scenario(api_key: str, width: int, other_project: str) -> dict:
    await flyte.init_from_api_key.aio(api_key=api_key, project=_drive.PROJECT, domain=_drive.DOMAIN, root_dir=_drive.HERE)
    fan = await _drive.runner().run.aio(wf_taskcreds.fanout, n=width)
    result = {"fanout": {"run": fan.name, "phase": await _drive.wait(fan, 600)}}
    if result["fanout"]["phase"] == "SUCCEEDED":
        result["fanout"]["output"] = _drive.jsonable((await fan.outputs.aio())[0])
    else:
        result["fanout"]["error"] = await _drive.error_of(fan.name)
    result["fanout"]["actions"] = await _drive.wait_actions_terminal(fan.name, 120)
    got = await flyte.remote.Run.get.aio(name=fan.name)
    result["fanout"]["executed_by"] = got.pb2.action.metadata.executed_by.user.id.subject
    probe = await _drive.runner().run.aio(wf_taskcreds.probe, other_run=fan.name, other_project=other_project)
    result["probe"] = {"phase": await _drive.wait(probe, 600)}
    if result["probe"]["phase"] == "SUCCEEDED":
        result["probe"]["output"] = json.loads((await probe.outputs.aio())[0])
    else:
        result["probe"]["error"] = await _drive.error_of(probe.name)
    return result


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
