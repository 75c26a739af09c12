"""Conditions scenario.

  drive_conditions.py start <endpoint>
      Starts approve(n=1), expire() and forever() and reports their run names
      as {"runs": {task: run}}.
  drive_conditions.py list <endpoint> <run>
      Reports the run's conditions as remote.Condition.listall finds them:
      {"conditions": [{"name", "action", "parent", "phase", "type"}]}.
  drive_conditions.py signal <endpoint> <run> <condition> <json value>
      Signals the condition found by remote.Condition.get and reports
      {"error": ""} or the error the manager answered.
  drive_conditions.py outcome <endpoint> <run>
      Waits for the run and reports how it ended (_drive.outcome).
  drive_conditions.py recover <endpoint> <run>
      Recovers the run (flyte.rerun(recover=True)), waits for the new run
      without signalling anything and reports its outcome and conditions:
      {"run", "phase", "output", "conditions"}.
"""

import json
import sys

import _drive
import flyte.remote
import wf_conditions


async def start(endpoint: str) -> dict:
    _drive.init(endpoint)
    runs = {}
    for name, task, kwargs in (
        ("approve", wf_conditions.approve, {"n": 1}),
        ("expire", wf_conditions.expire, {}),
        ("forever", wf_conditions.forever, {}),
    ):
        run = await _drive.runner().run.aio(task, **kwargs)
        runs[name] = run.name
    return {"runs": runs}


async def listall(endpoint: str, run_name: str) -> dict:
    _drive.init(endpoint)
    out = []
    async for c in flyte.remote.Condition.listall.aio(run_name=run_name):
        out.append(
            {
                "name": c.name,
                "action": c.action_name,
                "parent": c.pb2.metadata.parent,
                "phase": _drive.phase_name(c.pb2.status.phase),
                "type": c.expected_type.__name__ if c.expected_type else "",
            }
        )
    return {"conditions": sorted(out, key=lambda c: c["name"])}


async def signal(endpoint: str, run_name: str, name: str, value: str) -> dict:
    _drive.init(endpoint)
    cond = await flyte.remote.Condition.get.aio(name, run_name=run_name)
    if cond is None:
        raise _drive.Failure(f"run {run_name} has no condition {name}")
    try:
        await cond.signal.aio(json.loads(value))
    except Exception as e:  # noqa: BLE001 - the test checks which error
        return {"error": f"{type(e).__name__}: {e}"}
    return {"error": ""}


async def outcome(endpoint: str, run_name: str) -> dict:
    _drive.init(endpoint)
    return await _drive.outcome(run_name, 300)


async def recover(endpoint: str, run_name: str) -> dict:
    _drive.init(endpoint)
    run = await _drive.runner().rerun.aio(run_name, recover=True)
    result = {"run": run.name, **await _drive.outcome(run.name, 300)}
    result["conditions"] = (await listall(endpoint, run.name))["conditions"]
    return result


if __name__ == "__main__":
    mode, endpoint = sys.argv[1], sys.argv[2]
    if mode == "start":
        _drive.main(lambda: start(endpoint))
    elif mode == "list":
        _drive.main(lambda: listall(endpoint, sys.argv[3]))
    elif mode == "signal":
        _drive.main(lambda: signal(endpoint, sys.argv[3], sys.argv[4], sys.argv[5]))
    elif mode == "recover":
        _drive.main(lambda: recover(endpoint, sys.argv[3]))
    else:
        _drive.main(lambda: outcome(endpoint, sys.argv[3]))
