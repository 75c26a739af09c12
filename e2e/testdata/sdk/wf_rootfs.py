"""Tasks for the root filesystem images scenario: an image with an apt layer
and a commands layer (built as a Debian root filesystem, run in runc), and one
whose apt package does not exist."""

import os
import pathlib
import subprocess
import sys

import flyte

base = flyte.Image.from_debian_base()

env_apt = flyte.TaskEnvironment(
    name="e2e_rootfs_apt",
    image=base.with_apt_packages("cowsay")
    .with_commands(["echo made-by-commands > /opt/made-by-commands"])
    .with_pip_packages("humanize==4.9.0"),
)
env_bad = flyte.TaskEnvironment(name="e2e_rootfs_bad", image=base.with_apt_packages("fm-no-such-package"))


@env_apt.task
async def moo() -> dict[str, str]:
    import humanize  # the image's pip layer

    cow = subprocess.run(["/usr/games/cowsay", "moo"], capture_output=True, text=True, check=True).stdout
    return {
        "cowsay": cow,
        "made": pathlib.Path("/opt/made-by-commands").read_text().strip(),
        "humanize": humanize.__version__,
        "prefix": sys.prefix,
        "uid": str(os.getuid()),
        "os": pathlib.Path("/etc/debian_version").read_text().strip(),
    }


@env_bad.task
async def bad() -> str:
    return "unreachable"
