"""Tasks whose resource requests a GPU-less test host cannot satisfy (an
A100, 64 TiB of memory), each allowed five seconds in the queue, and one that
requests nothing. Each task touches a file when its code runs, so the test
can tell that the unsatisfiable ones never ran."""

from __future__ import annotations

import os
import pathlib
from datetime import timedelta

import flyte

queued = flyte.Timeout(max_queued_time=timedelta(seconds=5))

gpu_env = flyte.TaskEnvironment(name="e2e_res_gpu", resources=flyte.Resources(cpu=1, memory="250Mi", gpu="A100:1"))
mem_env = flyte.TaskEnvironment(name="e2e_res_mem", resources=flyte.Resources(memory="64Ti"))
plain_env = flyte.TaskEnvironment(name="e2e_res_plain")


def _ran(marks: str, name: str) -> None:
    pathlib.Path(marks, name).write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))


@gpu_env.task(timeout=queued)
async def needs_a100(marks: str) -> str:
    _ran(marks, "needs_a100")
    return "ran on a host without the GPU"


@mem_env.task(timeout=queued)
async def needs_memory(marks: str) -> str:
    _ran(marks, "needs_memory")
    return "ran on a host without the memory"


@plain_env.task
async def ordinary(marks: str) -> str:
    _ran(marks, "ordinary")
    return "ran"
