"""Tasks under auth.mode required: a parent fanning out children (which the
parent can only enqueue and watch with the credential its attempt is given),
and a probe that tries, with that credential, what it must not do."""

import asyncio
import json
import os

import flyte
import flyte.remote

env = flyte.TaskEnvironment(name="e2e_taskcreds")


@env.task
async def square(i: int) -> int:
    return i * i


@env.task
async def fanout(n: int) -> int:
    squares = await asyncio.gather(*(square(i) for i in range(n)))
    return sum(squares)


async def _attempt(call) -> str:
    """"ok", or the refusal's gRPC code name (the exception's code when it has
    one, else its class name)."""
    try:
        await call()
    except Exception as e:  # noqa: BLE001 - report whatever the SDK raised
        code = getattr(e, "code", None)
        name = getattr(code, "name", None) or type(e).__name__
        return f"{name}: {e}"[:300]
    return "ok"


@env.task
async def probe(other_run: str, other_project: str) -> str:
    own = os.environ["RUN_NAME"]

    async def read_own():
        await flyte.remote.Run.get.aio(name=own)

    async def read_other():
        await flyte.remote.Run.get.aio(name=other_run)

    async def list_runs():
        async for _ in flyte.remote.Run.listall.aio(limit=5):
            pass

    async def other_project_tasks():
        async for _ in flyte.remote.Task.listall.aio(project=other_project, domain="development"):
            pass

    results = {
        "own run": await _attempt(read_own),
        "other run": await _attempt(read_other),
        "list runs": await _attempt(list_runs),
        "other project": await _attempt(other_project_tasks),
    }
    return json.dumps(results, sort_keys=True)
