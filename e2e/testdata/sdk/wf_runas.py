"""Tasks for the run-as scenario (issue #21): two attempts of two projects
run at once, each as the uid the manager gave it. Each leaves a note in a
shared directory (its pid, its working directory, where its secret file is),
waits for the other's, then tries to read what belongs to the other
attempt and to the manager, and reports for each "refused" or "read" (never
a value: outputs are stored). It reads its own secret and its own
/proc/<pid>/environ too, which must work, or the refusals prove nothing."""

import asyncio
import hashlib
import json
import os
import pathlib

import flyte

SECRETS_DIR = "/etc/flyte/secrets"

env = flyte.TaskEnvironment(
    name="e2e_runas",
    secrets=[flyte.Secret(key="e2e-runas-secret", mount=pathlib.Path(SECRETS_DIR))],
)


def _try(fn) -> str:
    try:
        fn()
        return "read"
    except PermissionError:
        return "refused"
    except FileNotFoundError:
        return "absent"
    except OSError as e:
        return "error: %s" % e.strerror


async def _await_file(path: pathlib.Path, timeout: float = 240) -> None:
    for _ in range(int(timeout / 0.1)):
        if path.exists():
            return
        await asyncio.sleep(0.1)
    raise TimeoutError("no %s after %.0fs" % (path, timeout))


@env.task
async def peek(shared: str, me: str, other: str, home: str, db: str, digest: str) -> str:
    box = pathlib.Path(shared)
    secret = pathlib.Path(os.environ.get("FLYTE_SECRETS_DEFAULT_DIR", SECRETS_DIR)) / "e2e-runas-secret"
    note = {"pid": os.getpid(), "cwd": os.getcwd(), "secret": str(secret), "uid": os.getuid()}
    tmp = box / (me + ".tmp")
    tmp.write_text(json.dumps(note))
    tmp.rename(box / (me + ".json"))
    await _await_file(box / (other + ".json"))
    theirs = json.loads((box / (other + ".json")).read_text())
    got = {
        "uid": "root" if os.getuid() == 0 else ("same" if os.getuid() == theirs["uid"] else "own"),
        "own_secret": "matches" if secret.exists() and hashlib.sha256(secret.read_bytes()).hexdigest() == digest else "missing",
        "own_environ": _try(lambda: pathlib.Path("/proc/%d/environ" % os.getpid()).read_bytes()),
        "other_secret": _try(lambda: pathlib.Path(theirs["secret"]).read_bytes()),
        "other_secret_dir": _try(lambda: os.listdir(pathlib.Path(theirs["secret"]).parent)),
        "other_environ": _try(lambda: pathlib.Path("/proc/%d/environ" % theirs["pid"]).read_bytes()),
        "other_cwd": _try(lambda: os.listdir(theirs["cwd"])),
        "database": _try(lambda: pathlib.Path(db).read_bytes()) if db else "n/a",
        "signing_key": _try(lambda: pathlib.Path(home, "signing.key").read_bytes()),
        "keyring": _try(lambda: pathlib.Path(home, "secrets.keyring").read_bytes()),
    }
    (box / (me + ".done")).touch()
    await _await_file(box / (other + ".done"))  # both ran side by side to the end
    return json.dumps(got, sort_keys=True)
