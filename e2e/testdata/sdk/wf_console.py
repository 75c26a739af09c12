"""Tasks the console's browser tests deploy and run: one that succeeds, one
that fails, one that holds until the test releases it, and a description
with markup in it that the console must show as text."""

from __future__ import annotations

import asyncio
import pathlib

import flyte

env = flyte.TaskEnvironment(name="console")


@env.task
async def add(x: int = 41, label: str = "<script>alert(1)</script>") -> int:
    """Adds one. <script>alert(1)</script>"""
    return x + 1


@env.task
async def fails() -> None:
    raise ValueError("fails on purpose")


@env.task
async def hold(marker: str) -> str:
    """Runs until the file marker exists, so the test sees it RUNNING first."""
    p = pathlib.Path(marker)
    for _ in range(6000):  # ten minutes at most: a test that died leaves no task behind for long
        if p.exists():
            return "released"
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{marker} never appeared")
