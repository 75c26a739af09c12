"""Files scenario: a pipeline whose tasks return a File, a Dir and a File in
a dataclass made from their working directories, read by downstream tasks;
then the driver reads each of them itself from the run's outputs.

Usage: drive_files.py <endpoint> <scratch dir>
"""

import pathlib
import sys

import _drive
import wf_files


def tree(root: pathlib.Path) -> list:
    return sorted(f"{p.relative_to(root)}={p.read_text()}" for p in root.rglob("*") if p.is_file())


async def scenario(endpoint: str, scratch: pathlib.Path) -> dict:
    _drive.init(endpoint)
    run = await _drive.runner().run.aio(wf_files.pipeline, text="kept")
    phase = await _drive.wait(run, 480)
    result: dict = {"run": run.name, "phase": phase}
    if phase != "SUCCEEDED":
        result["error"] = await _drive.error_of(run.name)
        return result
    f, d, r, read_f, read_d, read_r = await run.outputs.aio()
    result["downstream"] = {"file": read_f, "dir": read_d, "report": read_r}
    result["paths"] = {"file": str(f.path), "dir": str(d.path), "report": str(r.data.path)}
    mine = {
        "file": pathlib.Path(await f.download(str(scratch / "file.txt"))).read_text(),
        "dir": tree(pathlib.Path(await d.download(str(scratch / "dir")))),
        "report": pathlib.Path(await r.data.download(str(scratch / "report.csv"))).read_text(),
    }
    result["client"] = mine
    return result


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], pathlib.Path(sys.argv[2])))
