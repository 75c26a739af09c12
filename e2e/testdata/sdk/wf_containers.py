"""Tasks for the raw containers scenario: ContainerTasks (commands that know
nothing of Flyte, reading inputs under /var/inputs and leaving outputs under
/var/outputs) and the Python tasks that call them."""

import asyncio
import os
import pathlib
import tempfile

import flyte
from flyte.extras import ContainerTask
from flyte.io import File

# One Image object: an environment made from several tasks wants the same one.
# The test harness loads this busybox image (built from the host's
# busybox-static) into the manager's image store: no registry is used.
ALPINE = flyte.Image.from_base("localhost/fm-test/busybox:1")

# Two ints in, an int and a string out. The sum comes from the templates, the
# label from the input files, so both halves of the contract are exercised.
arith = ContainerTask(
    name="arith",
    image=ALPINE,
    inputs={"a": int, "b": int},
    outputs={"total": int, "label": str},
    command=[
        "/bin/sh",
        "-c",
        "echo $(( {{.inputs.a}} + {{.inputs.b}} )) > /var/outputs/total && "
        'printf "%s plus %s" "$(cat /var/inputs/a)" "$(cat /var/inputs/b)" > /var/outputs/label',
    ],
)

# A File input staged under its own name (NAMED_DIR), and a File output.
count_lines = ContainerTask(
    name="count_lines",
    image=ALPINE,
    inputs={"fasta": File},
    outputs={"name": str, "lines": int, "copy": File},
    file_input_layout="NAMED_DIR",
    command=[
        "/bin/sh",
        "-c",
        "set -eu; f=$(ls /var/inputs/fasta/* | head -n1); "
        'basename "$f" > /var/outputs/name; '
        'wc -l < "$f" > /var/outputs/lines; '
        '{ echo "copied:"; cat "$f"; } > /var/outputs/copy',
    ],
)

# A File input at its bare name (DIRECT, the default).
head_line = ContainerTask(
    name="head_line",
    image=ALPINE,
    inputs={"doc": File},
    outputs={"first": str},
    command=["/bin/sh", "-c", "head -n1 /var/inputs/doc > /var/outputs/first"],
)

# A command that fails, with a message on stderr.
explode = ContainerTask(
    name="explode",
    image=ALPINE,
    inputs={"code": int},
    command=["/bin/sh", "-c", "echo 'container exploded e2e-c41' >&2; exit {{.inputs.code}}"],
)

# A command that exits 0 without writing its declared output.
forgetful = ContainerTask(
    name="forgetful",
    image=ALPINE,
    outputs={"answer": int},
    command=["/bin/sh", "-c", "echo 'forgot to write the answer'"],
)

# What the container sees of itself and of the host, one key=value a line.
probe = ContainerTask(
    name="probe",
    image=ALPINE,
    inputs={"home": str},
    outputs={"report": str},
    command=[
        "/bin/sh",
        "-c",
        "{ echo uid=$(id -u); "
        "echo capeff=$(grep CapEff /proc/self/status | awk '{print $2}'); "
        "echo pid1=$(tr '\\0' ' ' < /proc/1/cmdline); "
        "echo ifaces=$(tail -n +3 /proc/net/dev | awk '{printf \"%s\", $1}'); "
        "if [ -e {{.inputs.home}} ]; then echo home=visible; else echo home=absent; fi; "
        "} > /var/outputs/report",
    ],
)

raw_env = flyte.TaskEnvironment.from_task("e2e_containers_raw", arith, count_lines, head_line, explode, forgetful, probe)
env = flyte.TaskEnvironment(name="e2e_containers", depends_on=[raw_env])


@env.task
async def add_both(x: int, y: int) -> str:
    """Two raw containers at once (their data directories must not collide),
    then one on their results."""
    (t1, l1), (t2, l2) = await asyncio.gather(arith(a=x, b=y), arith(a=x * 10, b=y * 10))
    t3, _ = await arith(a=t1, b=t2)
    return f"{l1}={t1}; {l2}={t2}; total={t3}"


@env.task
async def inspect_files() -> dict[str, str]:
    """Files made here reach the containers; the container's File comes back."""
    # In the task's own working directory: a raw container in runc is given
    # a local file (file:// storage keeps File.from_local's path) only from
    # the tasks' directories, never from anywhere on the host.
    d = pathlib.Path(tempfile.mkdtemp(dir=os.getcwd()))
    fasta = d / "genome.fasta"
    fasta.write_text(">seq1\nACGT\nTTGA\n")
    name, lines, copy = await count_lines(fasta=await File.from_local(str(fasta)))
    doc = d / "doc.txt"
    doc.write_text("first line\nsecond line\n")
    first = await head_line(doc=await File.from_local(str(doc)))
    copied = pathlib.Path(await copy.download()).read_text()
    return {"name": name, "lines": str(lines), "copy": copied, "first": first}
