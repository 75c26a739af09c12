"""Task for the log links scenario: every attempt prints a line naming the
marker and its attempt, so the test can tell which attempt a log is of;
the first attempt then fails (retries=1), so there are two logs."""

import os

import flyte

env = flyte.TaskEnvironment(name="e2e_loglinks")


@env.task(retries=1)
async def speak(marker: str) -> str:
    attempt = int(os.environ.get("FLYTE_ATTEMPT_NUMBER", "0")) + 1
    print(f"loglinks {marker} attempt {attempt}", flush=True)
    if attempt == 1:
        raise ValueError(f"loglinks {marker}: failing attempt 1 on purpose")
    return marker
