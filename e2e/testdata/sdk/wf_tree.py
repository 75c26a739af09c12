"""Tasks that call tasks: a wide fan-out, a three-level chain, and a parent
that catches its child's failure."""

import asyncio

import flyte

env = flyte.TaskEnvironment(name="e2e_tree")


@env.task
async def square(i: int) -> int:
    return i * i


@env.task
async def fanout(n: int) -> int:
    squares = await asyncio.gather(*(square(i) for i in range(n)))
    return sum(squares)


@env.task
async def grandchild(x: int) -> str:
    return f"grandchild({x})"


@env.task
async def child(x: int) -> str:
    return f"child({await grandchild(x + 1)})"


@env.task
async def chain(x: int) -> str:
    return f"parent({await child(x + 1)})"


@env.task
async def fail(message: str) -> int:
    raise ValueError(message)


@env.task
async def catch(message: str) -> str:
    try:
        await fail(message)
    except Exception as e:  # noqa: BLE001 - the child's failure, whatever the SDK wraps it in
        return f"caught {type(e).__name__}: {e}"
    return "the child did not fail"
