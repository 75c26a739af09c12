"""Tasks whose outputs the values scenario checks: every kind of value the SDK
moves between client, manager and task process."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Tuple

import flyte
from flyte.io import File

env = flyte.TaskEnvironment(name="e2e_values")


@dataclasses.dataclass
class Point:
    x: int
    y: float
    label: str
    tags: List[str]


@env.task
async def add_one(x: int) -> int:
    return x + 1


@env.task
async def transform(
    n: int, s: str, items: List[int], mapping: Dict[str, int], p: Point
) -> Tuple[int, str, List[int], Dict[str, int], Point]:
    """Each output is derived from its input, so a value that only made the
    round trip unchanged (or got swapped with another) shows."""
    total = dict(mapping)
    total["total"] = sum(mapping.values())
    return (
        n * 6,
        s.upper() + "!",
        sorted(items) + [sum(items)],
        total,
        Point(x=p.x + 1, y=p.y * 2, label=p.label.upper(), tags=p.tags + ["moved"]),
    )


@env.task
async def write_file(text: str) -> File:
    """Writes text into a new file in the run's raw-data storage and returns
    it; the driver reads it back from there."""
    f = File.new_remote(file_name="greeting.txt")
    async with f.open("wb") as out:
        await out.write(text.encode())
    return f
