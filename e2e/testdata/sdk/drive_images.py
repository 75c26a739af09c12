"""Images scenario, with the SDK's remote builder (image.builder: remote):
runs tasks whose images the manager builds as Python environments.

Usage: drive_images.py <endpoint> all|again
  all:   with_new and with_old at once, then with_req, then with_apt (whose
         build fails)
  again: with_new once more, from a fresh SDK process
Reports each run's phase and output or error; for a build that failed, the
build run's error.
"""

import asyncio
import sys

import _drive
import flyte
import wf_images


def init(endpoint: str) -> None:
    flyte.init(
        endpoint=endpoint,
        insecure=True,
        project=_drive.PROJECT,
        domain=_drive.DOMAIN,
        root_dir=_drive.HERE,
        image_builder="remote",
    )


run = _drive.run_or_build_failure


async def scenario(endpoint: str, mode: str) -> dict:
    init(endpoint)
    if mode == "again":
        return {"new": await run(wf_images.with_new)}
    new, old = await asyncio.gather(run(wf_images.with_new), run(wf_images.with_old))
    return {"new": new, "old": old, "req": await run(wf_images.with_req), "apt": await run(wf_images.with_apt)}


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2]))
