"""Driver of the crash matrix and the database-outage suite (tasks in
wf_fault.py; plumbing from ../sdk/_drive.py).

  drive_fault.py submit <endpoint> <state dir> <runs> <children> <seconds> <release> [abort]
      Submits <runs> fan-out runs one after another, stopping at the first
      CreateRun that fails (the manager may die under it). With "abort" it then
      submits one more run whose leaves wait for a release file that never
      comes, waits until one of them runs, and aborts that run. Always reports
      {"accepted": [run names CreateRun answered], "victim": name or "",
       "errors": [what failed]}; the manager dying is expected here.
  drive_fault.py wait <endpoint> <run name>...
      Waits until every named run, and every other run ListRuns shows, is
      terminal and reports {"runs": {name: {"phase", "output"}},
      "listed": [run names ListRuns shows]}.
"""

import asyncio
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "sdk"))

import _drive  # noqa: E402
import flyte  # noqa: E402
import flyte.remote  # noqa: E402
import wf_fault  # noqa: E402


def init(endpoint: str) -> None:
    """As _drive.init, with this directory as the code-bundle root."""
    flyte.init(endpoint=endpoint, insecure=True, project=_drive.PROJECT, domain=_drive.DOMAIN, root_dir=HERE)


async def submit(endpoint: str, state_dir: str, runs: int, children: int, seconds: float, release: str, abort: bool) -> dict:
    init(endpoint)
    accepted, errors, victim = [], [], ""

    async def create(seconds: float, release: str) -> str:
        run = await asyncio.wait_for(
            _drive.runner().run.aio(wf_fault.fanout, n=children, state_dir=state_dir, seconds=seconds, release=release),
            120,
        )
        accepted.append(run.name)
        return run.name

    try:
        for _ in range(runs):
            await create(seconds, release)
        if abort:
            never = str(pathlib.Path(state_dir) / "never-released")
            victim = await create(0.0, never)
            deadline = time.monotonic() + 300
            while not any(p.name != f"{victim}.a0.exec" for p in pathlib.Path(state_dir).glob(f"{victim}.*.exec")):
                if time.monotonic() > deadline:
                    raise _drive.Failure(f"no leaf of run {victim} started within 300s")
                await asyncio.sleep(0.5)
            run = await flyte.remote.Run.get.aio(name=victim)
            await asyncio.wait_for(run.abort.aio(reason="fault test abort"), 60)
    except Exception as e:  # noqa: BLE001 - the manager may die under any call
        errors.append(f"{type(e).__name__}: {e}")
    return {"accepted": accepted, "victim": victim, "errors": errors}


async def wait(endpoint: str, names: list[str]) -> dict:
    init(endpoint)
    listed = [r.name async for r in flyte.remote.Run.listall.aio(limit=1000)]

    every = list(dict.fromkeys(names + listed))
    results = await asyncio.gather(*(_drive.outcome(n) for n in every))
    return {"runs": dict(zip(every, results)), "listed": listed}


if __name__ == "__main__":
    if sys.argv[1] == "submit":
        a = sys.argv
        _drive.main(lambda: submit(a[2], a[3], int(a[4]), int(a[5]), float(a[6]), a[7], len(a) > 8 and a[8] == "abort"))
    else:
        _drive.main(lambda: wait(sys.argv[2], sys.argv[3:]))
