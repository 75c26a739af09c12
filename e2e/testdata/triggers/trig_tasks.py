"""Tasks with triggers, deployed with `flyte deploy trig_tasks.py env`.

`stamp` fires on a fixed rate (one "minute", which the test's manager makes
a few seconds long) with the firing's time as its `kickoff` input; `greet`
has a trigger without a schedule, run by name with overrides.
"""

from datetime import datetime

import flyte

env = flyte.TaskEnvironment(name="e2e_trig")

every = flyte.Trigger(
    name="every",
    automation=flyte.FixedRate(1),
    inputs={"kickoff": flyte.TriggerTime, "label": "rate"},
    description="fires every minute with its time",
)

manual = flyte.Trigger(
    name="manual",
    inputs={"name": "trigger", "n": 1},
    description="runs only by name",
)


@env.task(triggers=every)
async def stamp(kickoff: datetime, label: str) -> str:
    return f"{label}@{kickoff.isoformat()}"


@env.task(triggers=manual)
async def greet(name: str, n: int) -> str:
    return f"{name}:{n}"
