"""Run-as scenario: `peek` in two projects at once (see wf_runas.py);
reports each run's phase and output.

Usage: drive_runas.py <endpoint> <shared dir> <home> <database file or ""> <project A> <digest A> <project B> <digest B>
"""

import asyncio
import sys

import _drive
import wf_runas


async def scenario(endpoint, shared, home, db, project_a, digest_a, project_b, digest_b) -> dict:
    runs = {}
    for me, other, project, digest in ((project_a, project_b, project_a, digest_a), (project_b, project_a, project_b, digest_b)):
        _drive.init(endpoint, project=project)
        r = await _drive.runner().run.aio(wf_runas.peek, shared=shared, me=me, other=other,
                                          home=home, db=db, digest=digest)
        runs[project] = r.name
    out = {}
    for project, name in runs.items():
        _drive.init(endpoint, project=project)
        out[project] = {"run": name, **(await _drive.outcome(name, 300))}
    return out


if __name__ == "__main__":
    _drive.main(lambda: scenario(*sys.argv[1:9]))
