"""Two-managers scenario (e2e/lease_test.go).

  drive_lease.py submit <endpoint> <lock dir> <tag>
      Starts one `leaf` run (i=7) and one `fanout` run (n=2) without waiting;
      reports {"runs": {"<tag>-leaf": name, "<tag>-fanout": name}}.
  drive_lease.py wait <endpoint> <run name>...
      Waits for every run; reports {"runs": {name: {"phase", "output"}}}.
"""

import asyncio
import sys

import _drive
import flyte.remote
import wf_lease


async def submit(endpoint: str, lock_dir: str, tag: str) -> dict:
    _drive.init(endpoint)
    leaf = await _drive.runner().run.aio(wf_lease.leaf, i=7, lock_dir=lock_dir)
    fan = await _drive.runner().run.aio(wf_lease.fanout, n=2, lock_dir=lock_dir)
    return {"runs": {f"{tag}-leaf": leaf.name, f"{tag}-fanout": fan.name}}


async def wait(endpoint: str, names: list[str]) -> dict:
    _drive.init(endpoint)

    results = await asyncio.gather(*(_drive.outcome(n) for n in names))
    return {"runs": dict(zip(names, results))}


if __name__ == "__main__":
    if sys.argv[1] == "submit":
        _drive.main(lambda: submit(sys.argv[2], sys.argv[3], sys.argv[4]))
    else:
        _drive.main(lambda: wait(sys.argv[2], sys.argv[3:]))
