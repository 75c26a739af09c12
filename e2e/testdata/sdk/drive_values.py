"""Values scenario: run tasks with ints, strings, lists, dicts, a dataclass and
a flyte.io.File, wait, and report inputs and outputs as the SDK reads them back.

Usage: drive_values.py <endpoint> <scratch dir>
"""

import asyncio
import pathlib
import sys

import _drive
import wf_values


async def scenario(endpoint: str, scratch: pathlib.Path) -> dict:
    _drive.init(endpoint)
    point = wf_values.Point(x=1, y=2.5, label="p", tags=["t"])
    add = await _drive.runner().run.aio(wf_values.add_one, x=41)
    tr = await _drive.runner().run.aio(
        wf_values.transform, n=7, s="flyte", items=[3, 1, 2], mapping={"a": 1, "b": 2}, p=point
    )
    wf = await _drive.runner().run.aio(wf_values.write_file, text="hello from a task\n")

    runs = {"add_one": add, "transform": tr, "write_file": wf}
    phases = await asyncio.gather(*(_drive.wait(r, 300) for r in runs.values()))
    result: dict = {"phases": dict(zip(runs, phases)), "errors": {}}
    for key, phase in zip(runs, phases):
        if phase != "SUCCEEDED":
            result["errors"][key] = await _drive.error_of(runs[key].name)
    if result["errors"]:
        return result

    result["add_one"] = _drive.jsonable(list(await add.outputs.aio()))
    result["transform_inputs"] = _drive.jsonable(dict(await tr.inputs.aio()))
    result["transform"] = _drive.jsonable(list(await tr.outputs.aio()))

    f = (await wf.outputs.aio())[0]
    local = await f.download(str(scratch / "downloaded.txt"))
    result["file"] = {"path": str(f.path), "text": pathlib.Path(local).read_text()}
    return result


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], pathlib.Path(sys.argv[2])))
