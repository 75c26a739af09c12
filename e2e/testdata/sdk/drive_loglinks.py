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
    return {"run": run.name, "phase": phase, "attempts": attempts}


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2]))
