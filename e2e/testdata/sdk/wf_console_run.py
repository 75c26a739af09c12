"""Tasks the console's run-page test drives: a fan-out, a task that logs a
line, waits at a gate the test opens, logs another and returns its note, and
a task with a dataclass and a list among its inputs."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import List

import flyte
import flyte.report

env = flyte.TaskEnvironment(name="e2e_console")


@dataclasses.dataclass
class Point:
    x: int
    label: str


@env.task
async def square(i: int) -> int:
    return i * i


@env.task
async def fanout(n: int) -> int:
    return sum(await asyncio.gather(*(square(i) for i in range(n))))


@env.task
async def gated(gate: str, note: str, point: Point, items: List[int]) -> str:
    print("before the gate", flush=True)
    while not os.path.exists(gate):
        await asyncio.sleep(0.2)
    print("after the gate", flush=True)
    return note


@env.task(report=True)
async def reported(line: str) -> str:
    await flyte.report.log.aio(f"<h2>{line}</h2>", do_flush=True)
    return line
