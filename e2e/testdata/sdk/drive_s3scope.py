"""Storage-isolation scenario: a run in another project and another run in
the test project produce outputs; then a task of a third run tries to read
and overwrite them through the storage the manager gave it.

Usage: drive_s3scope.py <endpoint> <other project>
"""

import sys

import _drive
import wf_s3scope


def output_uri(project: str, run_name: str) -> str:
    return f"s3://flyte/runs/_/{project}/{_drive.DOMAIN}/{run_name}/a0/1/outputs.pb"


async def produce(text: str) -> str:
    run = await _drive.runner().run.aio(wf_s3scope.produce, text=text)
    phase = await _drive.wait(run, 300)
    if phase != "SUCCEEDED":
        raise _drive.Failure(f"run {run.name} producing {text!r} is {phase}: {await _drive.error_of(run.name)}")
    return run.name


async def scenario(endpoint: str, other: str) -> dict:
    _drive.init(endpoint, project=other)
    theirs = await produce("the other project's output")
    _drive.init(endpoint)
    mine = await produce("another run's output")
    run = await _drive.runner().run.aio(
        wf_s3scope.probe, other_project=output_uri(other, theirs), other_run=output_uri(_drive.PROJECT, mine)
    )
    phase = await _drive.wait(run, 300)
    result: dict = {"theirs": theirs, "mine": mine, "run": run.name, "phase": phase}
    if phase != "SUCCEEDED":
        result["error"] = await _drive.error_of(run.name)
        return result
    result["probe"] = (await run.outputs.aio())[0]
    try:
        result["mine_after"] = (await _drive.outcome(mine)).get("output")
    except Exception as e:  # noqa: BLE001 - an overwritten output is what the test reports
        result["mine_after"] = f"unreadable: {type(e).__name__}: {e}"
    return result


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2]))
