"""Raw containers scenario: a parent calling ContainerTasks with ints, one
with File inputs and a File output, a failing command and a command that
forgets its output. Reports each run's phase, output or error.

Usage: drive_containers.py <endpoint> <manager home>
"""

import sys

import _drive
import flyte.remote
import wf_containers


async def submit(task, **inputs):
    run = await _drive.runner().run.aio(task, **inputs)
    return run.name


async def scenario(endpoint: str, home: str) -> dict:
    _drive.init(endpoint)
    names = {
        "add": await submit(wf_containers.add_both, x=2, y=3),
        "files": await submit(wf_containers.inspect_files),
        "explode": await submit(wf_containers.explode, code=3),
        "forgetful": await submit(wf_containers.forgetful),
        "probe": await submit(wf_containers.probe, home=home),
    }
    result = {}
    for key, name in names.items():
        entry = await _drive.outcome(name, 300)
        entry["run"] = name
        details = await flyte.remote.ActionDetails.get.aio(run_name=name, name="a0")
        entry["events"] = [ev.message for att in details.pb2.attempts for ev in att.cluster_events]
        result[key] = entry
    return result


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2]))
