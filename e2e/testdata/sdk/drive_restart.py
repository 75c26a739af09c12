"""Restart scenario.

  drive_restart.py submit <endpoint> <log dir> <release file>
      Starts three `slow` runs (slow<i> returns i) and one `slow_fanout` run
      (3 children, returns 0+1+2) without waiting; every task holds until the
      release file exists. Reports {"runs": {key: run name}}.
  drive_restart.py wait <endpoint> <run name>...
      After the manager restarted: waits for every run and reports
      {"runs": {name: {"phase", "output"}}, "listed": [run names ListRuns shows]}.
"""

import asyncio
import sys

import _drive
import flyte.remote
import wf_restart


async def submit(endpoint: str, log_dir: str, release: str) -> dict:
    _drive.init(endpoint)
    runs = {}
    for i in range(3):
        run = await _drive.runner().run.aio(wf_restart.slow, i=i + 1, log_dir=log_dir, release=release)
        runs[f"slow{i + 1}"] = run.name
    run = await _drive.runner().run.aio(wf_restart.slow_fanout, n=3, log_dir=log_dir, release=release)
    runs["fanout"] = run.name
    return {"runs": runs}


async def wait(endpoint: str, names: list[str]) -> dict:
    _drive.init(endpoint)

    results = await asyncio.gather(*(_drive.outcome(n) for n in names))
    listed = []
    async for r in flyte.remote.Run.listall.aio(limit=1000):
        listed.append(r.name)
    return {"runs": dict(zip(names, results)), "listed": listed}


if __name__ == "__main__":
    if sys.argv[1] == "submit":
        _drive.main(lambda: submit(sys.argv[2], sys.argv[3], sys.argv[4]))
    else:
        _drive.main(lambda: wait(sys.argv[2], sys.argv[3:]))
