"""Triggers: a task that runs on a schedule, and one with a saved launch
configuration that runs by name.

Deploy both tasks with their triggers (see README.md in this folder for the
setup):

    flyte deploy examples/triggers.py env

`report` then runs every hour on the hour, London time, with the hour as its
`at` input; `report`'s second trigger, `every_minute`, is deployed inactive:
turn it on and off with

    flyte update trigger every_minute triggers_example.report --activate
    flyte update trigger every_minute triggers_example.report --deactivate

and see the triggers with `flyte get trigger`. `greet`'s trigger has no
schedule: it is a named set of inputs, run by name. From Python, which
deploys, runs `greet`'s trigger with one input changed, waits and prints the
result:

    python examples/triggers.py
"""

from datetime import datetime

import flyte
import flyte.remote

env = flyte.TaskEnvironment(name="triggers_example")

hourly = flyte.Trigger(
    name="hourly",
    automation=flyte.Cron("0 * * * *", timezone="Europe/London"),
    inputs={"at": flyte.TriggerTime, "source": "hourly"},
    description="every hour on the hour, London time",
)

every_minute = flyte.Trigger(
    name="every_minute",
    automation=flyte.FixedRate(1),
    inputs={"at": flyte.TriggerTime, "source": "every minute"},
    auto_activate=False,
)

on_demand = flyte.Trigger(
    name="on_demand",
    inputs={"name": "trigger", "times": 1},
    description="no schedule: runs only by name",
)


@env.task(triggers=[hourly, every_minute])
async def report(at: datetime, source: str) -> str:
    line = f"{source}: report for {at.isoformat()}"
    print(line, flush=True)
    return line


@env.task(triggers=on_demand)
async def greet(name: str, times: int) -> str:
    return " ".join([f"Hello, {name}!"] * times)


if __name__ == "__main__":
    flyte.init_from_config()  # ./.flyte/config.yaml, written by `flyte create config`
    flyte.deploy(env)
    trigger = flyte.remote.Trigger.get(name="on_demand", task_name="triggers_example.greet")
    run = flyte.run(trigger, times=2)  # the trigger's inputs, with times changed
    print(f"run {run.name}: {run.url}")
    run.wait()
    print(run.outputs()[0])
