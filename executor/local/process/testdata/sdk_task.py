"""Prepare real Flyte tasks for the executor's integration test.

Writes a tiny task module, packs it into a code bundle with the SDK's own
packaging, serialises each task's TaskSpec the way a remote run does
(translate_task_to_wire with a --tgz code bundle), and writes each task's
inputs.pb with the SDK's converters. Prints a JSON index on stdout.

usage: python sdk_task.py --workdir DIR [--x 3 --y 4]
"""

import argparse
import asyncio
import json
import pathlib
import sys

MODULE = '''
import flyte
import flyte.errors

env = flyte.TaskEnvironment("t")


@env.task
def add(x: int, y: int) -> int:
    return x + y


@env.task(retries=2)
def boom(x: int, y: int) -> int:
    raise ValueError(f"boom goes the task with {x} and {y}")


@env.task(retries=2)
def fatal(x: int, y: int) -> int:
    raise flyte.errors.NonRecoverableError("cannot recover from this")


@env.task
def loopcheck(x: int, y: int) -> str:
    """"ok" if the SDK's background loop is this process's own and runs:
    its thread is alive, a syncified call runs on it, and neither its
    self-pipe nor its epoll is a descriptor the parent process holds (a warm
    child's parent is the warm server)."""
    import asyncio
    import ctypes
    import os
    import threading

    from flyte.syncify import syncify

    bg = syncify._bg_loop
    if not bg.thread.is_alive() or not bg.loop.is_running():
        return "the background loop's thread is not running it"

    @syncify
    async def on_loop() -> bool:
        return threading.current_thread() is bg.thread and asyncio.get_running_loop() is bg.loop

    if not on_loop():
        return "a syncified call did not run on the background loop"
    parent = os.getppid()
    links = {}
    for fd in os.listdir("/proc/%d/fd" % parent):
        try:
            links[int(fd)] = os.readlink("/proc/%d/fd/%s" % (parent, fd))
        except OSError:
            pass
    own = {fd: os.readlink("/proc/self/fd/%d" % fd) for fd in (bg.loop._ssock.fileno(), bg.loop._csock.fileno())}
    shared = [link for link in own.values() if link in links.values()]
    if shared:
        return "the loop's self-pipe %s is open in the parent" % shared
    epfd = bg.loop._selector.fileno()
    libc = ctypes.CDLL(None, use_errno=True)
    SYS_kcmp, KCMP_FILE = 312, 0  # x86_64
    for pfd, link in links.items():
        if link == "anon_inode:[eventpoll]":
            same = libc.syscall(SYS_kcmp, os.getpid(), parent, KCMP_FILE, epfd, pfd)
            if same == 0:
                return "the loop's epoll is the parent's fd %d" % pfd
            if same < 0:
                return "kcmp: %s" % os.strerror(ctypes.get_errno())
    return "ok"


@env.task
def memscan(x: int, y: int) -> str:
    """Which of the values MEMSCAN names this process's memory holds (every
    readable mapping, read through /proc/self/mem): "name=found" or
    "name=absent" for each, by name. MEMSCAN is {name: [head, tail]}: a
    value is only ever searched for as its head followed by its tail, so
    that the scan itself never puts the whole value in memory."""
    import json
    import os

    wanted = {k: (h.encode(), t.encode()) for k, (h, t) in json.loads(os.environ["MEMSCAN"]).items()}
    found = set()
    chunk, overlap = 16 << 20, 1024

    def holds(data, head, tail):
        i = data.find(head)
        while i >= 0:
            if data.startswith(tail, i + len(head)):
                return True
            i = data.find(head, i + 1)
        return False

    with open("/proc/self/maps") as f:
        maps = f.read().splitlines()
    with open("/proc/self/mem", "rb", buffering=0) as mem:
        for line in maps:
            fields = line.split()
            if fields[1][0] != "r" or fields[-1] in ("[vvar]", "[vvar_vclock]", "[vsyscall]"):
                continue
            start, end = (int(a, 16) for a in fields[0].split("-"))
            pos = start
            while pos < end:
                n = min(chunk, end - pos)
                try:
                    mem.seek(pos)
                    data = mem.read(n)
                except (OSError, ValueError, OverflowError):
                    break  # not readable after all (a guard page, I/O memory)
                for name, (head, tail) in wanted.items():
                    if name not in found and holds(data, head, tail):
                        found.add(name)
                if len(data) < n or pos + n >= end:
                    break  # the rest of the mapping cannot be read, or there is none
                pos += n - overlap  # a value may straddle two chunks
    return " ".join("%s=%s" % (k, "found" if k in found else "absent") for k in sorted(wanted))
'''

TASKS = ("add", "boom", "fatal", "loopcheck", "memscan")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workdir", required=True)
    p.add_argument("--x", type=int, default=3)
    p.add_argument("--y", type=int, default=4)
    a = p.parse_args()

    work = pathlib.Path(a.workdir).resolve()
    src = work / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "tmod.py").write_text(MODULE)
    sys.path.insert(0, str(src))

    import tmod
    from flyte._code_bundle._packaging import create_bundle
    from flyte._internal.runtime import convert
    from flyte._internal.runtime.task_serde import translate_task_to_wire
    from flyte.models import CodeBundle, SerializationContext

    bundle_dir = work / "bundle"
    bundle_dir.mkdir(exist_ok=True)
    tgz, _, _ = create_bundle(src, bundle_dir, [str(src / "tmod.py")], "itest", deref_symlinks=True)

    version = "v1"
    bundle = CodeBundle(tgz=str(tgz), destination=".", computed_version=version)
    sctx = SerializationContext(version=version, project="p", domain="d", org="", code_bundle=bundle, root_dir=src)

    index = {"bundle": str(tgz), "tasks": {}}
    for name in TASKS:
        task = getattr(tmod, name)
        spec = translate_task_to_wire(task, sctx)
        spec_path = work / f"{name}.taskspec.pb"
        spec_path.write_bytes(spec.SerializeToString())
        inputs = asyncio.run(convert.convert_from_native_to_inputs(task.native_interface, a.x, a.y))
        input_dir = work / "inputs" / name
        input_dir.mkdir(parents=True, exist_ok=True)
        (input_dir / "inputs.pb").write_bytes(inputs.proto_inputs.SerializeToString())
        index["tasks"][name] = {"spec": str(spec_path), "input_dir": str(input_dir)}
    json.dump(index, sys.stdout)


if __name__ == "__main__":
    main()
