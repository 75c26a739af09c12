"""Tasks for the warm-start isolation scenario. `hold` runs in one project
with that project's secrets in its environment; `scan`, in another project,
looks for a value in its own memory. Both report the name of their parent
process: a warm-started attempt is a child of the warm server (a Python),
a plain one of the manager."""

import json
import os

import flyte

holder_env = flyte.TaskEnvironment(
    name="e2e_warm_holder",
    # The bundle first: it puts the token past what later messages overwrite
    # of the old warm server's freed copies (see warm_secrets_test.go).
    secrets=[
        flyte.Secret(key="e2e-warm-bundle", as_env_var="E2E_WARM_BUNDLE"),
        flyte.Secret(key="e2e-warm-token", as_env_var="E2E_WARM_TOKEN"),
    ],
)

scanner_env = flyte.TaskEnvironment(
    name="e2e_warm_scanner",
    secrets=[flyte.Secret(key="e2e-warm-control", as_env_var="E2E_WARM_CONTROL")],
)


def _parent() -> str:
    with open("/proc/%d/comm" % os.getppid()) as f:
        return f.read().strip()


@holder_env.task
async def hold() -> str:
    """Its parent's name, once the secrets are in its environment."""
    if not os.environ.get("E2E_WARM_TOKEN") or not os.environ.get("E2E_WARM_BUNDLE"):
        return "the secrets are not in the environment"
    return _parent()


@scanner_env.task
async def scan(probe: str) -> str:
    """JSON {"parent": its parent's name, name: "found" or "absent"} for
    each value probe names: probe is JSON {name: [head, tail]}, and a value
    is only ever searched for as its head followed by its tail, so that the
    scan itself never puts the whole value in memory. Every readable
    mapping is read through /proc/self/mem."""
    wanted = {k: (h.encode(), t.encode()) for k, (h, t) in json.loads(probe).items()}
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
                    break
                pos += n - overlap  # a value may straddle two chunks
    report = {k: "found" if k in found else "absent" for k in wanted}
    report["parent"] = _parent()
    return json.dumps(report)
