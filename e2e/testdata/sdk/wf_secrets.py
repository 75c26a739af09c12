"""Tasks for the secrets scenario. They report digests of what they read,
never the values: outputs are stored and returned by the API, and the test
checks that no value appears anywhere but in the task."""

import hashlib
import os
import pathlib

import flyte

SECRETS_DIR = "/etc/flyte/secrets"

env = flyte.TaskEnvironment(
    name="e2e_secrets",
    secrets=[
        flyte.Secret(key="e2e-token", as_env_var="E2E_TOKEN"),
        flyte.Secret(key="e2e-cert", mount=pathlib.Path(SECRETS_DIR)),
    ],
)

missing_env = flyte.TaskEnvironment(name="e2e_secrets_missing", secrets="e2e-missing-secret")


def _digest(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@env.task
async def read_secrets() -> dict[str, str]:
    """The environment variable and the mounted file, where the platform
    says files are (FLYTE_SECRETS_DEFAULT_DIR; /etc/flyte/secrets in a Pod)."""
    secrets_dir = pathlib.Path(os.environ.get("FLYTE_SECRETS_DEFAULT_DIR", SECRETS_DIR))
    cert = secrets_dir / "e2e-cert"
    return {
        "token": _digest(os.environ.get("E2E_TOKEN", "").encode()),
        "cert": _digest(cert.read_bytes()) if cert.exists() else "no file at " + str(cert),
    }


@missing_env.task(retries=3)
async def needs_missing(counter_dir: str) -> str:
    """Must never run: the secret it requests does not exist."""
    (pathlib.Path(counter_dir) / "ran").touch()
    return "ran"
