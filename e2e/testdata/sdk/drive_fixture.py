"""The flyte-sdk integration tests' client fixture, as its CI runs it against
a hosted backend (flyte-sdk examples/integration_tests.py, flyte_client and
_run_and_wait): with GITHUB_ACTIONS=true it calls flyte.init with
FLYTE_ENDPOINT, FLYTE_API_KEY, insecure=False and the remote image builder;
no config file, the certificate trusted through the environment only. Then a
run whose parent enqueues children completes, its root action's details
(and log links) are read, and its outputs.

Usage: drive_fixture.py <fan-out width>   (run from a directory holding
this directory's files, which is the code bundle's root as the fixture's
cwd is)
"""

import os
import sys

import flyte
import flyte.remote

import _drive
import wf_taskcreds


def flyte_client() -> None:
    # The fixture's GITHUB_ACTIONS branch, verbatim but for the defaults.
    if os.getenv("GITHUB_ACTIONS", "") != "true":
        raise _drive.Failure("GITHUB_ACTIONS is not true: the fixture would sign in with Pkce")
    flyte.init(
        endpoint=os.getenv("FLYTE_ENDPOINT"),
        api_key=os.getenv("FLYTE_API_KEY"),
        insecure=False,
        image_builder="remote",
        project=os.getenv("FLYTE_PROJECT", "flyte-sdk"),
        domain=os.getenv("FLYTE_DOMAIN", "development"),
    )


async def scenario(width: int) -> dict:
    flyte_client()
    run = await flyte.with_runcontext().run.aio(wf_taskcreds.fanout, n=width)
    out = {"run": run.name, "url": run.url}
    out["phase"] = await _drive.wait(run, 600)
    detail = await run.action.details()  # as _run_and_wait calls it
    out["error"] = detail.error_info.message if detail.error_info else ""
    attempts = detail.pb2.attempts
    out["logs"] = [{"name": log.name, "uri": log.uri} for log in (attempts[-1].log_info if attempts else [])]
    if out["phase"] == "SUCCEEDED":
        out["output"] = _drive.jsonable((await run.outputs.aio())[0])
    out["actions"] = await _drive.wait_actions_terminal(run.name, 120)
    return out


if __name__ == "__main__":
    _drive.main(lambda: scenario(int(sys.argv[1])))
