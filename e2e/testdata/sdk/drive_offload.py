"""Offload scenario: wf_offload.pipeline twice. Each run's tasks return a
Dir and Files from temporary directories they removed, read by downstream
tasks; the driver then reads them itself from the run's outputs. The second
run's snapshot is a cache hit.

Usage: drive_offload.py <endpoint> <scratch dir>
"""

import pathlib
import sys

import _drive
import flyte.remote
import wf_offload
from flyteidl2.core import catalog_pb2


async def snapshot_cache(run_name: str) -> str:
    for a in await _drive.actions(run_name):
        if a["task"] == "e2e_offload.snapshot":
            details = await flyte.remote.ActionDetails.get.aio(run_name=run_name, name=a["name"])
            return catalog_pb2.CatalogCacheStatus.Name(details.pb2.status.cache_status)
    raise _drive.Failure(f"run {run_name} has no snapshot action")


async def one(scratch: pathlib.Path) -> dict:
    run = await _drive.runner().run.aio(wf_offload.pipeline, text="kept")
    phase = await _drive.wait(run, 480)
    result: dict = {"run": run.name, "phase": phase}
    if phase != "SUCCEEDED":
        result["error"] = await _drive.error_of(run.name)
        return result
    d, f, s, read_d, read_f, read_s = await run.outputs.aio()
    result["downstream"] = {"dir": read_d, "file": read_f, "snapshot": read_s}
    result["paths"] = {"dir": str(d.path), "file": str(f.path), "snapshot": str(s.path)}
    result["client"] = {
        "dir": wf_offload.listing(pathlib.Path(await d.download(str(scratch / "dir")))),
        "file": pathlib.Path(await f.download(str(scratch / "file.txt"))).read_text(),
        "snapshot": pathlib.Path(await s.download(str(scratch / "snapshot.txt"))).read_text(),
    }
    result["snapshot_cache"] = await snapshot_cache(run.name)
    return result


async def scenario(endpoint: str, scratch: pathlib.Path) -> dict:
    _drive.init(endpoint)
    return {"first": await one(scratch / "1"), "second": await one(scratch / "2")}


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], pathlib.Path(sys.argv[2])))
