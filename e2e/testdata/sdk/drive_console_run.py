"""Submits the console test's runs without waiting for them and reports their
names and the links the SDK prints for them (run.url).

Usage: drive_console_run.py <endpoint> <gate file> <hold file> <note>
  fanout: fanout(n=12); gated: gated(<gate file>, <note>, ...), which
  finishes once the test creates the gate file; held: the same task at a
  gate that is never opened (the test aborts it).
"""

import sys

import _drive
import wf_console_run as wf_console


async def scenario(endpoint: str, gate: str, hold: str, note: str) -> dict:
    _drive.init(endpoint)
    point = wf_console.Point(x=7, label="seven")
    fan = await _drive.runner().run.aio(wf_console.fanout, n=12)
    gated = await _drive.runner().run.aio(wf_console.gated, gate=gate, note=note, point=point, items=[1, 2, 3])
    held = await _drive.runner().run.aio(wf_console.gated, gate=hold, note="held", point=point, items=[])
    reported = await _drive.runner().run.aio(wf_console.reported, line="a line of the report")
    return {
        "fanout": fan.name,
        "gated": gated.name,
        "held": held.name,
        "reported": reported.name,
        "urls": {"fanout": fan.url, "gated": gated.url},
    }


if __name__ == "__main__":
    _drive.main(lambda: scenario(*sys.argv[1:5]))
