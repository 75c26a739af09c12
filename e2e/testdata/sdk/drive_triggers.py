"""Trigger scenario: run a deployed trigger without a schedule by name.

  drive_triggers.py run <endpoint> <trigger> <task> <n>
      flyte.run(trigger, n=<n>): the trigger's inputs with n overridden.
      Reports {"run": name, "phase", "output"}.
"""

import sys

import _drive
import flyte.remote


async def run(endpoint: str, trigger: str, task: str, n: int) -> dict:
    _drive.init(endpoint)
    details = await flyte.remote.Trigger.get.aio(name=trigger, task_name=task)
    r = await _drive.runner().run.aio(details, n=n)
    out = await _drive.outcome(r.name, timeout=300)
    out["run"] = r.name
    return out


if __name__ == "__main__":
    _drive.main(lambda: run(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
