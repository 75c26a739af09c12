"""Human in the loop: a task that waits for someone's approval.

Run it on the manager (see README.md in this folder for the setup):

    flyte run examples/approval.py release --version 1.2
    flyte get action <run name>     # the condition action, PAUSED; note its name
    flyte signal condition <run name> <action name> true

The run stays RUNNING, its condition PAUSED, until the signal arrives; then the
task carries on with the value. Or from Python, which starts the run, signals it
as a reviewer would once it waits, and prints the result:

    python examples/approval.py
"""

import time

import flyte
import flyte.errors
import flyte.remote

env = flyte.TaskEnvironment(name="approval")


@env.task
async def release(version: str) -> str:
    approve = await flyte.new_condition.aio(
        "approve",
        prompt=f"Release **{version}**?",
        prompt_type="markdown",
        data_type=bool,
        timeout=3600,  # seconds; without one it waits as long as it takes
    )
    try:
        ok = await approve.wait.aio()
    except flyte.errors.ConditionTimedoutError:
        return f"{version}: nobody answered within an hour"
    return f"{version}: released" if ok else f"{version}: rejected"


if __name__ == "__main__":
    flyte.init_from_config()  # ./.flyte/config.yaml, written by `flyte create config`
    run = flyte.run(release, version="1.2")
    print(f"run {run.name}: {run.url}")
    cond = None
    while cond is None or cond.phase != "ACTION_PHASE_PAUSED":
        time.sleep(1)
        cond = flyte.remote.Condition.get("approve", run_name=run.name)
    print(f"condition {cond.name} (action {cond.action_name}) is waiting; approving it")
    cond.signal(True)
    run.wait()
    print(run.outputs()[0])
