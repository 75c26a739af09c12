"""The real SDK's side of the launch-form round trip (launchform_sdk_test.go).

make:  print {"spec": <TaskSpec>, "inputs": {name: <Literal>}} (base64 protobuf)
       for a task whose inputs cover every kind a form handles, with the
       literals the SDK makes of sample values.
check: read {name: <Literal>} on stdin (literals the manager made from JSON)
       and print {name: "ok" or why not}: each must turn back, through the
       SDK, into the sample value.
"""

import asyncio
import base64
import dataclasses
import datetime
import enum
import json
import sys
from typing import Optional, Union

import pydantic
from flyteidl2.core import literals_pb2

import flyte
import flyte.extras
from flyte.io import Dir, File
from flyte.types import TypeEngine


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass
class Point:
    x: int
    y: float
    label: str = "p"


class Model(pydantic.BaseModel):
    name: str
    tags: list[str] = []


env = flyte.TaskEnvironment(name="forms")


@env.task
async def everything(
    i: int,
    f: float,
    s: str,
    b: bool,
    when: datetime.datetime,
    wait: datetime.timedelta,
    nums: list[int],
    scores: dict[str, float],
    point: Point,
    model: Model,
    color: Color,
    maybe: Optional[int],
    either: Union[int, str],
    doc: File,
    folder: Dir,
    n: int = 7,
    greeting: str = "hi",
) -> int:
    return i


SAMPLES = {
    "i": (int, 42),
    "f": (float, 2.5),
    "s": (str, "<b>hello</b>"),
    "b": (bool, True),
    "when": (datetime.datetime, datetime.datetime(2025, 1, 31, 12, 30, 5, 123000, tzinfo=datetime.timezone.utc)),
    "wait": (datetime.timedelta, datetime.timedelta(hours=1, minutes=30, seconds=2)),
    "nums": (list[int], [1, 2, 3]),
    "scores": (dict[str, float], {"a": 1.5, "b": -2.0}),
    "point": (Point, Point(x=3, y=4.5, label="q")),
    "model": (Model, Model(name="m", tags=["x", "y"])),
    "color": (Color, Color.GREEN),
    "maybe": (Optional[int], None),
    "either": (Union[int, str], "text"),
    "doc": (File, File(path="s3://bucket/data/report.csv")),
    "folder": (Dir, Dir(path="s3://bucket/data/tables")),
    "n": (int, 8),
    "greeting": (str, "hello"),
}


def b64(m):
    return base64.b64encode(m.SerializeToString()).decode()


async def make():
    spec = flyte.extras.serialize(everything)
    inputs = {}
    for name, (t, v) in SAMPLES.items():
        lit = await TypeEngine.to_literal(v, t, TypeEngine.to_literal_type(t))
        inputs[name] = b64(lit)
    print(json.dumps({"spec": b64(spec), "inputs": inputs}))


def same(t, got, want):
    if t in (File, Dir):
        return got.path == want.path
    return got == want


async def check():
    out = {}
    for name, raw in json.load(sys.stdin).items():
        t, want = SAMPLES[name]
        lit = literals_pb2.Literal()
        lit.ParseFromString(base64.b64decode(raw))
        try:
            got = await TypeEngine.to_python_value(lit, t)
            out[name] = "ok" if same(t, got, want) else f"got {got!r}, want {want!r}"
        except Exception as e:  # reported to the test, which names the input
            out[name] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))


asyncio.run(make() if sys.argv[1] == "make" else check())
