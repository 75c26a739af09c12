"""A manager that lost the code bundles the SDK's client cache still names.

The SDK remembers the bundles it uploaded (.flyte/local-cache/cache.db under
HOME, a day) and does not upload them again; the Go test keeps HOME across
the steps and deletes the bundles from the manager's storage in between, as a
wiped data directory would. Each step reports one result line:

  first:   add_one run from its spec, the environment deployed, add_one run
           by its deployed id; both runs' phases and the bundles they named.
  refused: the same three again (the bundles are gone): each one's error,
           and the number of runs before and after.
  purged:  `flyte delete local-cache`, as the refusal advises, then the same
           three: phases.

Usage: drive_bundle.py <endpoint> first|refused|purged
"""

import subprocess
import sys

import _drive
import flyte
import flyte.remote
import wf_values

TASK = "e2e_values.add_one"


def cached_runner():
    """A remote run context that uses the SDK's bundle cache, as users do."""
    return flyte.with_runcontext(mode="remote")


async def bundle_of(run_name: str) -> str:
    details = await flyte.remote.ActionDetails.get.aio(run_name=run_name, name="a0")
    args = list(details.pb2.task.task_template.container.args)
    return args[args.index("--tgz") + 1] if "--tgz" in args else ""


async def submit_all() -> dict:
    """Run from the spec, deploy, run the deployed task: what each returned
    (a run) or raised."""
    out = {}
    steps = {
        "inline": lambda: cached_runner().run.aio(wf_values.add_one, x=1),
        "deploy": lambda: flyte.deploy.aio(wf_values.env),
        "deployed": lambda: cached_runner().run.aio(flyte.remote.Task.get(TASK, auto_version="latest"), x=2),
    }
    for name, step in steps.items():
        try:
            result = await step()
            out[name] = {"run": result.name} if name != "deploy" else {}
        except Exception as e:  # noqa: BLE001 - report what the client sees
            out[name] = {"error": describe(e)}
    return out


def describe(e: BaseException) -> dict:
    """An exception and its causes: types, messages, and the Connect code."""
    chain, code = [], ""
    while e is not None:
        chain.append(f"{type(e).__name__}: {e}")
        c = getattr(e, "code", None)
        if c is not None and not code and hasattr(c, "name"):
            code = c.name
        e = e.__cause__ or e.__context__
    return {"code": code, "chain": chain}


async def count_runs() -> int:
    return len([r async for r in flyte.remote.Run.listall.aio(limit=1000)])


async def scenario(endpoint: str, step: str) -> dict:
    _drive.init(endpoint)
    if step == "refused":
        before = await count_runs()
        out = await submit_all()
        out["runs_before"], out["runs_after"] = before, await count_runs()
        return out
    if step == "purged":
        subprocess.run(["flyte", "delete", "local-cache"], check=True, capture_output=True)
    out = await submit_all()
    for name in ("inline", "deployed"):
        if "run" not in out[name]:
            raise _drive.Failure(f"{step}: {name} was not submitted: {out[name]}")
        run = await flyte.remote.Run.get.aio(name=out[name]["run"])
        out[name]["phase"] = await _drive.wait(run, 300)
        out[name]["bundle"] = await bundle_of(run.name)
    return out


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2]))
