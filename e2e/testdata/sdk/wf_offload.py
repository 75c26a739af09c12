"""Tasks that return a Dir and a File made in a temporary directory they
remove before returning: the data must have been uploaded by the time the
task ends, as it is on S3, or downstream tasks and the client find nothing.
On the manager's default storage the tasks get s3:// locations through its
S3 endpoint, so the SDK uploads them. `snapshot` is cached: a second run is
a cache hit whose File is read back through the endpoint too."""

from __future__ import annotations

import pathlib
import shutil
import tempfile
from typing import List, Tuple

import flyte
from flyte.io import Dir, File

env = flyte.TaskEnvironment(name="e2e_offload")


@env.task
async def scratch_dir(text: str) -> Dir:
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="offload-"))
    try:
        (tmp / "nested" / "deeper").mkdir(parents=True)
        (tmp / "a.txt").write_text(text + " a")
        (tmp / "nested" / "b.txt").write_text(text + " b")
        (tmp / "nested" / "deeper" / "c.bin").write_bytes(bytes(range(256)) * 4096)
        return await Dir.from_local(str(tmp))
    finally:
        shutil.rmtree(tmp)


@env.task
async def scratch_file(text: str) -> File:
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="offload-"))
    try:
        p = tmp / "note.txt"
        p.write_text(text + " note")
        return await File.from_local(str(p))
    finally:
        shutil.rmtree(tmp)


@env.task(cache="auto")
async def snapshot(text: str) -> File:
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="offload-"))
    try:
        p = tmp / "snapshot.txt"
        p.write_text(text + " snapshot")
        return await File.from_local(str(p))
    finally:
        shutil.rmtree(tmp)


def listing(root: pathlib.Path) -> List[str]:
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            shown = data.decode() if p.suffix == ".txt" else f"{len(data)} bytes, sum {sum(data)}"
            out.append(f"{p.relative_to(root)}={shown}")
    return out


@env.task
async def read_dir(d: Dir) -> List[str]:
    return listing(pathlib.Path(await d.download()))


@env.task
async def read_file(f: File) -> str:
    return pathlib.Path(await f.download()).read_text()


@env.task
async def pipeline(text: str) -> Tuple[Dir, File, File, List[str], str, str]:
    d = await scratch_dir(text)
    f = await scratch_file(text)
    s = await snapshot(text)
    return d, f, s, await read_dir(d), await read_file(f), await read_file(s)
