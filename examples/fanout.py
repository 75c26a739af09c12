"""Fan-out: a parent task starts one child task per item, all at once, and
adds up their results. Each child is its own action with its own process.

    flyte run examples/fanout.py fanout --n 10
"""

import asyncio

import flyte

env = flyte.TaskEnvironment(name="fanout")


@env.task
async def square(x: int) -> int:
    return x * x


@env.task
async def fanout(n: int = 10) -> int:
    # Calling a task from a task starts a child action; asyncio.gather runs
    # them concurrently and returns their results in order.
    squares = await asyncio.gather(*(square(i) for i in range(n)))
    total = sum(squares)
    print(f"the squares of 0..{n - 1} add up to {total}", flush=True)
    return total


if __name__ == "__main__":
    flyte.init_from_config()
    run = flyte.run(fanout, n=10)
    print(f"run {run.name}: {run.url}")
    run.wait()
    print(run.outputs()[0])
