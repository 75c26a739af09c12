"""The task the CLI scenario runs, deploys and runs again by name."""

import flyte

env = flyte.TaskEnvironment(name="e2e_cli")


@env.task
async def double(x: int) -> int:
    print(f"double got x={x}", flush=True)
    return 2 * x
