"""Tasks for the conditions scenario: tasks that wait for a human.

approve waits on a bool and an int condition and returns what it was given;
expire waits on a condition with a short timeout nobody signals; forever waits
on a condition without a timeout until its run is aborted."""

import flyte
import flyte.errors

env = flyte.TaskEnvironment(name="e2e_conditions")


@env.task
async def approve(n: int) -> str:
    ok = await flyte.new_condition.aio("approve", prompt="Ship it?", data_type=bool, timeout=900)
    count = await flyte.new_condition.aio(
        "count", prompt="**How many?**", prompt_type="markdown", data_type=int, description="a number"
    )
    approved = await ok.wait.aio()
    extra = await count.wait.aio()
    return f"{approved}:{extra + n}"


@env.task
async def expire() -> str:
    cond = await flyte.new_condition.aio("expire", data_type=bool, timeout=2)
    try:
        await cond.wait.aio()
    except flyte.errors.ConditionTimedoutError:
        return "timed out"
    return "signalled"


@env.task
async def forever() -> bool:
    cond = await flyte.new_condition.aio("forever", data_type=bool)
    return await cond.wait.aio()
