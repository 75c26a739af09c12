"""Plumbing shared by the end-to-end driver scripts in this directory.

A driver connects the real flyte SDK to the manager under test, submits runs
(with the client-side code-bundle cache off, so a fresh manager is never handed
a bundle path that only an earlier manager had), waits with a deadline, and
reports one result line: RESULT_PREFIX followed by JSON. The Go test parses that
line, so a failure names the value that was wrong instead of a traceback.

Usage from a driver:  main(lambda: scenario(...)) with scenario an async function
returning a JSON-able dict.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pathlib
import sys
import time
import traceback
from typing import Any, Awaitable, Callable

import flyte
import flyte.errors
import flyte.remote
from flyteidl2.common import phase_pb2

HERE = pathlib.Path(__file__).resolve().parent
PROJECT = "flytesnacks"
DOMAIN = "development"
RESULT_PREFIX = "@@result "

TERMINAL = {"SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT", "RECOVERED"}


class Failure(Exception):
    """A scenario step that did not happen as the driver expected."""


def init(endpoint: str, project: str = PROJECT, domain: str = DOMAIN) -> None:
    """Point the SDK at the manager: plain HTTP (insecure), the test project
    and domain unless a scenario names others, and this directory as the
    code-bundle root so task modules are imported by their bare names in the
    task process. A scenario may call it again to move to another project."""
    flyte.init(
        endpoint=endpoint,
        insecure=True,
        project=project,
        domain=domain,
        root_dir=HERE,
    )


def runner(**kwargs: Any):
    """A remote run context with the bundle cache off."""
    return flyte.with_runcontext(mode="remote", disable_run_cache=True, **kwargs)


def phase_name(raw: int) -> str:
    return phase_pb2.ActionPhase.Name(raw).removeprefix("ACTION_PHASE_")


async def wait(run: flyte.remote.Run, timeout: float) -> str:
    """Wait until run is terminal and return its phase name. Run.wait swallows
    cancellation, so the phase is checked afterwards rather than trusting
    wait_for to raise."""
    try:
        await asyncio.wait_for(run.wait.aio(quiet=True), timeout)
    except asyncio.TimeoutError:
        pass
    phase = phase_name(run.raw_phase)
    if phase not in TERMINAL:
        raise Failure(f"run {run.name} is still {phase} after waiting {timeout:.0f}s")
    return phase


async def error_of(run_name: str) -> str:
    """The root action's error message ("" if none), for reports on runs that
    did not succeed."""
    details = await flyte.remote.ActionDetails.get.aio(run_name=run_name, name="a0")
    return details.error_info.message if details.error_info else ""


async def outcome(run_name: str, timeout: float = 600) -> dict:
    """How a run ended: its phase, and its first output when it succeeded,
    else its error message."""
    run = await flyte.remote.Run.get.aio(name=run_name)
    phase = await wait(run, timeout)
    entry: dict = {"phase": phase}
    if phase == "SUCCEEDED":
        entry["output"] = (await run.outputs.aio())[0]
    else:
        entry["error"] = await error_of(run_name)
    return entry


async def run_or_build_failure(task, timeout: float = 600) -> dict:
    """Runs task to its end; a run whose image fails to build is
    BUILD_FAILED, with the image build's run and its error."""
    try:
        r = await runner().run.aio(task)
    except flyte.errors.ImageBuildError as e:
        # "... Build failed in 0:00:03 at http://.../runs/<build run>"
        build_run = str(e).rstrip().rsplit("/", 1)[-1]
        return {"phase": "BUILD_FAILED", "build_run": build_run, "error": await error_of(build_run)}
    return {"run": r.name, **await outcome(r.name, timeout)}


async def actions(run_name: str) -> list[dict]:
    """Every action of a run, as ListActions reports it."""
    out = []
    async for a in flyte.remote.Action.listall.aio(for_run_name=run_name):
        out.append(
            {
                "name": a.name,
                "parent": a.parent_name or "",
                "phase": phase_name(a.raw_phase),
                "task": a.task_name or "",
            }
        )
    return out


async def wait_actions_terminal(run_name: str, timeout: float) -> list[dict]:
    """Poll ListActions until every action of the run is terminal."""
    deadline = time.monotonic() + timeout
    while True:
        acts = await actions(run_name)
        if acts and all(a["phase"] in TERMINAL for a in acts):
            return acts
        if time.monotonic() > deadline:
            raise Failure(f"run {run_name}: actions not all terminal after {timeout:.0f}s: {acts}")
        await asyncio.sleep(1)


def _seconds(msg: Any, field: str) -> float | None:
    """A Timestamp field as Unix seconds, None when unset."""
    return getattr(msg, field).ToMicroseconds() / 1e6 if msg.HasField(field) else None


def attempts_of(details: flyte.remote.ActionDetails) -> list[dict]:
    """The attempt history of an action, with each attempt's phase transitions."""
    out = []
    for att in details.pb2.attempts:
        out.append(
            {
                "attempt": att.attempt,
                "phase": phase_name(att.phase),
                "error": att.error_info.message if att.HasField("error_info") else "",
                "start": _seconds(att, "start_time"),
                "end": _seconds(att, "end_time"),
                "transitions": [
                    {
                        "phase": phase_name(pt.phase),
                        "start": _seconds(pt, "start_time"),
                        "end": _seconds(pt, "end_time"),
                    }
                    for pt in att.phase_transitions
                ],
            }
        )
    return out


def jsonable(v: Any) -> Any:
    """Python values as JSON: dataclasses as objects, Files by path."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {k: jsonable(x) for k, x in dataclasses.asdict(v).items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if hasattr(v, "path"):
        return {"path": str(v.path)}
    return repr(v)


def emit(result: dict) -> None:
    print(RESULT_PREFIX + json.dumps(result, default=str), flush=True)


def main(scenario: Callable[[], Awaitable[dict]]) -> None:
    """Run the scenario; print its result line, or on failure a one-line
    summary on stderr (after the traceback) and exit 1."""
    try:
        result = asyncio.run(scenario())
    except Exception as e:  # noqa: BLE001 - report every failure the same way
        traceback.print_exc()
        print(f"DRIVER FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    emit(result)
