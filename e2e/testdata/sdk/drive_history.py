"""History scenario: a task that fails twice and succeeds on attempt 3
(wf_retry.flaky). Reports, from the SDK's remote ActionDetails, every
attempt with its phase transitions (both as the details carry them and as
ActionDetails.get_phase_transitions computes them), cluster events, log
links and cluster.

Usage: drive_history.py <endpoint> <counter dir>
"""

import sys

import _drive
import flyte.remote
import wf_retry


async def scenario(endpoint: str, counter_dir: str) -> dict:
    _drive.init(endpoint)
    run = await _drive.runner().run.aio(wf_retry.flaky, counter_dir=counter_dir)
    phase = await _drive.wait(run, 300)
    details = await flyte.remote.ActionDetails.get.aio(run_name=run.name, name="a0")
    attempts = _drive.attempts_of(details)
    for entry, att in zip(attempts, details.pb2.attempts):
        entry["cluster_events"] = [ce.message for ce in att.cluster_events]
        entry["logs"] = [log.name for log in att.log_info]
        entry["cluster"] = att.cluster
        entry["sdk_transitions"] = [t.phase.name for t in details.get_phase_transitions(att.attempt)]
    return {"run": run.name, "phase": phase, "status_attempts": details.attempts, "attempts": attempts}


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2]))
