"""Rerun scenario: a run with an explicit run_base_dir prefix, then
flyte.rerun of it with another input. Reports both runs' outputs, read again
after the rerun, and each run's output location.

Usage: drive_rerun.py <endpoint> <run_base_dir prefix>
"""

import sys

import _drive
import flyte
import flyte.remote
import wf_values


async def output_dir(run_name: str) -> str:
    details = await flyte.remote.ActionDetails.get.aio(run_name=run_name, name="a0")
    attempts = details.pb2.attempts
    return attempts[-1].outputs.output_uri if attempts else ""


async def scenario(endpoint: str, prefix: str) -> dict:
    _drive.init(endpoint)
    source = await _drive.runner(run_base_dir=prefix).run.aio(wf_values.add_one, x=1)
    source_phase = await _drive.wait(source, 300)
    before = (await source.outputs.aio())[0]
    rerun = await flyte.rerun.aio(source.name, x=41)
    rerun_phase = await _drive.wait(rerun, 300)
    source_again = await flyte.remote.Run.get.aio(source.name)
    return {
        "phases": [source_phase, rerun_phase],
        "source_before": before,
        "source_after": (await source_again.outputs.aio())[0],
        "rerun": (await rerun.outputs.aio())[0],
        "dirs": [await output_dir(source.name), await output_dir(rerun.name)],
        "names": [source.name, rerun.name],
    }


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2]))
