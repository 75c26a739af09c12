"""Kubernetes images scenario, with the SDK's remote builder: the manager
builds the image as an OCI image in a Pod and pushes it to the test's
registry; the task then runs with that image.

Usage: drive_kube_images.py <endpoint> all|again
  all:   in_image (its image is built), then in_apt_image (whose build fails)
  again: in_image once more, from a fresh SDK process
Reports each run's phase and output or error; for a build that failed, the
build run's error.
"""

import sys

import _drive
import flyte
import wf_kube_images


run = _drive.run_or_build_failure


async def scenario(endpoint: str, mode: str) -> dict:
    flyte.init(
        endpoint=endpoint,
        insecure=True,
        project=_drive.PROJECT,
        domain=_drive.DOMAIN,
        root_dir=_drive.HERE,
        image_builder="remote",
    )
    if mode == "again":
        return {"built": await run(wf_kube_images.in_image)}
    return {"built": await run(wf_kube_images.in_image), "apt": await run(wf_kube_images.in_apt_image)}


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1], sys.argv[2]))
