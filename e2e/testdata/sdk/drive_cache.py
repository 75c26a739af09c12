"""Cache scenarios.

  drive_cache.py repeat <endpoint> <counter dir>
      Runs square(6) twice as a run (the second with another, ignored, note)
      and then as the child of square_child(6): the first executes, the
      others are cache hits. Reports each run and its cached action.
  drive_cache.py serial <endpoint> <counter dir> <release file> <n>
      Starts n identical runs of slow_square at once, waits until one
      executes and the others wait (WAITING_FOR_RESOURCES), releases the
      holder, and reports every run.
  drive_cache.py start <endpoint> <counter dir> <release file> <n>
      As serial, without the release: reports the runs while they hold.
  drive_cache.py scoped <endpoint> <counter dir> <project>/<domain>...
      Runs where(5) once in each project/domain in turn (the SDK's default
      cache lookup scope, global), waiting for each, and reports every run
      in that order.
  drive_cache.py finish <endpoint> <run>...
      Waits for the runs and reports them.

A run's report: {"run", "phase", "output", "error", "cache_status",
"attempts", "action"} for its cached action (a0, or the child of square_child), and its "project" and "domain".
"""

import asyncio
import pathlib
import sys
import time

import _drive
import flyte.remote
import wf_cache
from flyteidl2.core import catalog_pb2


async def cached_action(run_name: str) -> str:
    acts = await _drive.actions(run_name)
    for a in acts:
        if a["task"] in ("e2e_cache.square", "e2e_cache.slow_square", "e2e_cache.where"):
            return a["name"]
    raise _drive.Failure(f"run {run_name} has no cached action: {acts}")


async def report(run_name: str, timeout: float = 600) -> dict:
    entry = await _drive.outcome(run_name, timeout)
    name = await cached_action(run_name)
    details = await flyte.remote.ActionDetails.get.aio(run_name=run_name, name=name)
    entry.update(
        {
            "run": run_name,
            "action": name,
            "action_phase": _drive.phase_name(details.pb2.status.phase),
            "cache_status": catalog_pb2.CatalogCacheStatus.Name(details.pb2.status.cache_status),
            "attempts": _drive.attempts_of(details),
        }
    )
    return entry


async def repeat(endpoint: str, counter_dir: str) -> dict:
    _drive.init(endpoint)
    out = {}
    for key, note in (("first", "one"), ("second", "two")):
        run = await _drive.runner().run.aio(wf_cache.square, x=6, counter_dir=counter_dir, note=note)
        out[key] = await report(run.name)
    run = await _drive.runner().run.aio(wf_cache.square_child, x=6, counter_dir=counter_dir)
    out["child"] = await report(run.name)
    return out


async def scoped(endpoint: str, counter_dir: str, scopes: list[str]) -> dict:
    out = []
    for scope in scopes:
        project, domain = scope.split("/")
        _drive.init(endpoint, project=project, domain=domain)
        run = await _drive.runner().run.aio(wf_cache.where, x=5, counter_dir=counter_dir)
        entry = await report(run.name)
        entry.update({"project": project, "domain": domain})
        out.append(entry)
    return {"runs": out}


async def phases(runs) -> list[str]:
    out = []
    for r in runs:
        d = await flyte.remote.ActionDetails.get.aio(run_name=r.name, name="a0")
        out.append(_drive.phase_name(d.pb2.status.phase))
    return out


async def start(endpoint: str, counter_dir: str, release: str, n: int) -> list:
    """n identical runs at once; returns them once one executes and the
    others wait for it."""
    _drive.init(endpoint)
    runs = await asyncio.gather(
        *(_drive.runner().run.aio(wf_cache.slow_square, x=9, counter_dir=counter_dir, release=release) for _ in range(n))
    )
    executions = pathlib.Path(counter_dir) / "executions"
    deadline = time.monotonic() + 300
    while True:
        ps = await phases(runs)
        ran = len(executions.read_text().splitlines()) if executions.exists() else 0
        if ran >= 1 and ps.count("WAITING_FOR_RESOURCES") == n - 1:
            return runs
        if time.monotonic() > deadline:
            raise _drive.Failure(f"after 300s: {ran} executions, phases {ps}; want 1 executing and {n - 1} waiting")
        await asyncio.sleep(0.5)


async def serial(endpoint: str, counter_dir: str, release_file: str, n: int) -> dict:
    runs = await start(endpoint, counter_dir, release_file, n)
    waiting = await phases(runs)
    pathlib.Path(release_file).touch()
    reports = await asyncio.gather(*(report(r.name) for r in runs))
    return {"waiting": waiting, "runs": list(reports)}


async def hold(endpoint: str, counter_dir: str, release_file: str, n: int) -> dict:
    runs = await start(endpoint, counter_dir, release_file, n)
    return {"runs": [r.name for r in runs], "phases": await phases(runs)}


async def finish(endpoint: str, names: list[str]) -> dict:
    _drive.init(endpoint)
    return {"runs": list(await asyncio.gather(*(report(name) for name in names)))}


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "repeat":
        _drive.main(lambda: repeat(sys.argv[2], sys.argv[3]))
    elif mode == "serial":
        _drive.main(lambda: serial(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
    elif mode == "start":
        _drive.main(lambda: hold(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
    elif mode == "scoped":
        _drive.main(lambda: scoped(sys.argv[2], sys.argv[3], sys.argv[4:]))
    elif mode == "finish":
        _drive.main(lambda: finish(sys.argv[2], sys.argv[3:]))
    else:
        raise SystemExit(f"unknown mode {mode}")
