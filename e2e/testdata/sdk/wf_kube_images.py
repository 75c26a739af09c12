"""Tasks for the kubernetes images scenario: an image on a base of the test's
registry (FM_E2E_IMAGES_BASE, set where the SDK builds) with an env layer and a copied file, which the
manager builds as an OCI image and pushes; and one with an apt layer, which it
cannot build."""

import os
import pathlib

import flyte

base = (
    flyte.Image.from_base(os.environ.get("FM_E2E_IMAGES_BASE", "localhost/base:unset"))  # unset in the Pods
    .clone(name="e2e-kube-images", extendable=True)
    .with_env_vars({"E2E_IMAGE": "kube"})
)

env_built = flyte.TaskEnvironment(
    name="e2e_kube_images",
    image=base.with_source_file(pathlib.Path(__file__).parent / "images_requirements.txt", "/etc/e2e/"),
)
env_apt = flyte.TaskEnvironment(name="e2e_kube_images_apt", image=base.with_apt_packages("cowsay"))


@env_built.task
async def in_image() -> str:
    return "ran"


@env_apt.task
async def in_apt_image() -> str:
    return "ran"
