"""Root filesystem images scenario, with the SDK's remote builder: an image
with apt and commands layers builds and its task runs in it; an image whose
apt package does not exist fails its build naming the layer.

Usage: drive_rootfs.py <endpoint>
"""

import sys

import _drive
import drive_images
import wf_rootfs


async def scenario(endpoint: str) -> dict:
    drive_images.init(endpoint)
    return {"apt": await drive_images.run(wf_rootfs.moo), "bad": await drive_images.run(wf_rootfs.bad)}


if __name__ == "__main__":
    _drive.main(lambda: scenario(sys.argv[1]))
