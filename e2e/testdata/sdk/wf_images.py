"""Tasks for the images scenario: environments whose images add a package
the manager's own environment lacks (humanize), in two conflicting versions,
one from a requirements file (uploaded in the build's context), and one whose
image needs an apt layer."""

import pathlib
import sys

import flyte

base = flyte.Image.from_debian_base()

env_new = flyte.TaskEnvironment(name="e2e_images_new", image=base.with_pip_packages("humanize==4.9.0"))
env_old = flyte.TaskEnvironment(name="e2e_images_old", image=base.with_pip_packages("humanize==4.8.0"))
env_req = flyte.TaskEnvironment(
    name="e2e_images_req", image=base.with_requirements(pathlib.Path(__file__).parent / "images_requirements.txt")
)
env_apt = flyte.TaskEnvironment(
    name="e2e_images_apt", image=base.with_apt_packages("cowsay").with_pip_packages("humanize==4.9.0")
)


def _report() -> dict[str, str]:
    import humanize  # only in the image's environment

    return {"humanize": humanize.__version__, "words": humanize.intword(1234567), "prefix": sys.prefix}


@env_new.task
async def with_new() -> dict[str, str]:
    return _report()


@env_old.task
async def with_old() -> dict[str, str]:
    return _report()


@env_req.task
async def with_req() -> dict[str, str]:
    return _report()


@env_apt.task
async def with_apt() -> dict[str, str]:
    return _report()
