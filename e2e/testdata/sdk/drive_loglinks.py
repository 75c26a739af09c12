"""Log links scenario: runs wf_loglinks.speak (fails once, then succeeds)
and reports, from the SDK's remote Action.details(), every attempt's
log_info (name and URI) and logs_available; the Go test opens each link.

Usage: drive_loglinks.py <endpoint> <marker>
"""

import sys

import _drive
import flyte.remote
import wf_loglinks


async def scenario(endpoint: str, marker: str) -> dict:
    _drive.init(endpoint)
    run = await _drive.runner().run.aio(wf_loglinks.speak, marker=marker)
    phase = await _drive.wait(run, 300)
    run = await flyte.remote.Run.get.aio(name=run.name)
    details = await run.action.details()
    attempts = [
        {
            "attempt": att.attempt,
            "logs_available": att.logs_available,
            "links": [{"name": log.name, "uri": log.uri} for log in att.log_info],
        }
        for att in details.pb2.attempts
    ]
    # A task's own links (links=), on the child that declares them.
    linked = await _drive.runner().run.aio(wf_loglinks.linked_parent)
    linked_phase = await _drive.wait(linked, 300)
    child_links = []
    for a in await _drive.actions(linked.name):
        if a["parent"]:
            child = await flyte.remote.ActionDetails.get.aio(run_name=linked.name, name=a["name"])
            child_links = [
                {"name": log.name, "uri": log.uri, "action": a["name"]} for log in child.pb2.attempts[-1].log_info
            ]
    return {
        "run": run.name,
        "phase": phase,
        "attempts": attempts,
        "linked_run": linked.name,
        "linked_phase": linked_phase,
        "child_links": child_links,
    }


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2]))
