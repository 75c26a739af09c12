"""Tasks for the retry scenario. Each attempt appends one line to
<counter_dir>/attempts, so the test sees how many attempts really ran."""

import os
import pathlib

import flyte
import flyte.errors

env = flyte.TaskEnvironment(name="e2e_retry")


def _count_attempt(counter_dir: str) -> int:
    path = pathlib.Path(counter_dir) / "attempts"
    with path.open("a") as f:
        f.write(f"pid={os.getpid()} attempt={os.environ.get('FLYTE_ATTEMPT_NUMBER', '?')}\n")
    return len(path.read_text().splitlines())


@env.task(retries=2)
async def flaky(counter_dir: str) -> int:
    """Fails with an ordinary (recoverable) error on attempts 1 and 2; with
    retries=2 the third and last attempt succeeds."""
    n = _count_attempt(counter_dir)
    if n < 3:
        raise ValueError(f"flaky failure on attempt {n}")
    return n


@env.task(retries=5)
async def shaky(counter_dir: str) -> int:
    """Raises a SYSTEM error of its own on attempts 1 to 4: the task's
    retries=5 pay for them, not the platform's smaller system budget."""
    n = _count_attempt(counter_dir)
    if n < 5:
        raise flyte.errors.RuntimeSystemError("ShakyDependency", f"shaky on attempt {n}")
    return n


@env.task(retries=3)
async def doomed(counter_dir: str) -> int:
    """Raises NonRecoverableError: retries must not be used."""
    n = _count_attempt(counter_dir)
    raise flyte.errors.NonRecoverableError(f"doomed on attempt {n}: retrying cannot help")
