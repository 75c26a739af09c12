"""Recover scenario: a fan-out whose odd children fail while a marker file
exists, then flyte.rerun(recover=True) after the marker is gone, then
recoveries of that recovery (one forcing a succeeded child, one reusing
everything, one with another input), and a recovery of a run that does not
exist.

Usage: drive_recover.py <endpoint> <counter dir> <marker file>

Reports, per run: its phase, output (when it has one), what the SDK's
Run.raise_for_status says of it ("" when it counts the run a success),
relation and actions (name, phase, task, recovered_from).
"""

import pathlib
import sys

import _drive
import flyte
import flyte.remote
import wf_recover


async def describe(run_name: str) -> dict:
    run = await flyte.remote.Run.get.aio(name=run_name)
    phase = await _drive.wait(run, 600)
    root = await flyte.remote.ActionDetails.get.aio(run_name=run_name, name="a0")
    entry: dict = {"name": run_name, "phase": phase, "actions": {}, "status_error": ""}
    if phase in ("SUCCEEDED", "RECOVERED"):
        entry["output"] = (await run.outputs.aio())[0]
    try:
        await run.raise_for_status.aio()
    except Exception as e:  # noqa: BLE001 - the message is what the test checks
        entry["status_error"] = f"{type(e).__name__}: {e}"
    rel = root.pb2.metadata.relation
    if root.pb2.metadata.HasField("relation"):
        entry["relation"] = {"type": rel.relation_type, "to": rel.related_to.name}
    for a in await _drive.wait_actions_terminal(run_name, 600):
        d = await flyte.remote.ActionDetails.get.aio(run_name=run_name, name=a["name"])
        src = d.pb2.metadata.recovered_from
        entry["actions"][a["name"]] = {
            "phase": a["phase"],
            "task": a["task"],
            "recovered_from": f"{src.run.name}/{src.name}" if d.pb2.metadata.HasField("recovered_from") else "",
            "output_uri": d.pb2.attempts[-1].outputs.output_uri if d.pb2.attempts else "",
        }
    return entry


async def scenario(endpoint: str, counter_dir: str, marker: str) -> dict:
    _drive.init(endpoint)
    pathlib.Path(marker).touch()
    source = await _drive.runner().run.aio(wf_recover.fan, n=4, counter_dir=counter_dir, marker=marker)
    await _drive.wait(source, 600)
    first = await describe(source.name)
    pathlib.Path(marker).unlink()

    recovered = await _drive.runner().rerun.aio(source.name, recover=True)
    second = await describe(recovered.name)

    forced_name = ""
    for name, a in second["actions"].items():
        if a["task"].endswith(".leaf") and a["phase"] == "RECOVERED":
            forced_name = name
            break
    forced = await _drive.runner().rerun.aio(
        recovered.name, recover=True, force_rerun_actions=[forced_name, "no-such-action"]
    )
    third = await describe(forced.name)
    whole = await _drive.runner().rerun.aio(recovered.name, recover=True)
    fourth = await describe(whole.name)
    fewer = await _drive.runner().rerun.aio(recovered.name, recover=True, n=3)
    fifth = await describe(fewer.name)

    missing = ""
    try:
        await _drive.runner().rerun.aio("rnosuchrun0000000000", recover=True)
    except Exception as e:  # noqa: BLE001 - the message is what the test checks
        missing = f"{type(e).__name__}: {e}"
    return {
        "runs": [first, second, third, fourth, fifth],
        "forced": forced_name,
        "source_after": await describe(source.name),
        "recovered_after": await describe(recovered.name),
        "missing": missing,
    }


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2], sys.argv[3]))
