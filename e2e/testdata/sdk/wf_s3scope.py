"""Tasks for the storage-isolation scenario: produce returns a string (its
outputs.pb lands in its run's base); probe tries, with the storage key the
manager gave its attempt, to read and overwrite other runs' outputs through
flyte.storage, and reports what happened instead of failing."""

from __future__ import annotations

from typing import Dict

import flyte
import flyte.storage

env = flyte.TaskEnvironment(name="e2e_s3scope")


@env.task
async def produce(text: str) -> str:
    return text


def _refused(e: Exception) -> str:
    return f"refused: {type(e).__name__}: {str(e)[:400]}"


async def _read(uri: str) -> str:
    try:
        data = b""
        async for chunk in flyte.storage.get_stream(uri):
            data += chunk
        return f"read {len(data)} bytes"
    except Exception as e:  # noqa: BLE001 - the scenario reports every refusal
        return _refused(e)


async def _write(uri: str) -> str:
    try:
        await flyte.storage.put_stream(b"overwritten by another run", to_path=uri)
        return "written"
    except Exception as e:  # noqa: BLE001
        return _refused(e)


@env.task
async def probe(other_project: str, other_run: str) -> Dict[str, str]:
    return {
        "read_other_project": await _read(other_project),
        "overwrite_other_project": await _write(other_project),
        "overwrite_other_run": await _write(other_run),
        "read_same_project": await _read(other_run),
    }
