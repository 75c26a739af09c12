"""Tasks that return what they wrote in their working directory: a File, a
Dir, and a File inside a dataclass, each made with from_local. With the
manager's file:// storage the SDK keeps the local path instead of copying, so
each value points into the producing attempt's working directory; the
consumers run as actions of their own, after the producer's process ended."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import List, Tuple

import flyte
from flyte.io import Dir, File

env = flyte.TaskEnvironment(name="e2e_files")


@dataclasses.dataclass
class Report:
    title: str
    data: File


@env.task
async def make_file(text: str) -> File:
    pathlib.Path("made.txt").write_text(text)
    return await File.from_local("made.txt")


@env.task
async def make_dir(text: str) -> Dir:
    root = pathlib.Path("made_dir")
    (root / "sub").mkdir(parents=True)
    (root / "top.txt").write_text(text + " (top)")
    (root / "sub" / "deep.txt").write_text(text + " (deep)")
    return await Dir.from_local("made_dir")


@env.task
async def make_report(text: str) -> Report:
    pathlib.Path("report.csv").write_text(text + " (report)")
    return Report(title="weekly", data=await File.from_local("report.csv"))


@env.task
async def read_file(f: File) -> str:
    return pathlib.Path(await f.download()).read_text()


@env.task
async def read_dir(d: Dir) -> List[str]:
    local = pathlib.Path(await d.download())
    return sorted(f"{p.relative_to(local)}={p.read_text()}" for p in local.rglob("*") if p.is_file())


@env.task
async def read_report(r: Report) -> str:
    return r.title + ": " + pathlib.Path(await r.data.download()).read_text()


@env.task
async def pipeline(text: str) -> Tuple[File, Dir, Report, str, List[str], str]:
    f = await make_file(text)
    d = await make_dir(text)
    r = await make_report(text)
    return f, d, r, await read_file(f), await read_dir(d), await read_report(r)
