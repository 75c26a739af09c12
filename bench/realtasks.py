"""Build the real tasks of `make bench` (runner a0) with the flyte SDK.

Writes a task module with a fan-out parent and its leaf (which squares an
int), packs it into a code
bundle with the SDK's own packaging, serialises the parent's TaskSpec the way
a remote run does (translate_task_to_wire with a --tgz code bundle), and
writes the parent's inputs (n = the fan-out, one file per fan-out asked for)
with the SDK's converters. The
Go bench submits that spec and those inputs inline with RunService.CreateRun;
the parent then runs in `a0` and fans out through the SDK's own controller.

Prints a JSON index on stdout: {"spec": path, "inputs": {"N": path, ...}}.

usage: python realtasks.py --workdir DIR --fanout N[,N...]
"""

import argparse
import asyncio
import json
import pathlib
import sys

MODULE = '''
import asyncio

import flyte

env = flyte.TaskEnvironment("bench")


@env.task
async def leaf(i: int) -> int:
    return i * i


@env.task
async def fanout(n: int) -> int:
    return sum(await asyncio.gather(*(leaf(i) for i in range(n))))
'''


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workdir", required=True)
    p.add_argument("--fanout", required=True, help="comma-separated fan-outs, one inputs file each")
    p.add_argument("--project", default="flytesnacks")
    p.add_argument("--domain", default="development")
    a = p.parse_args()

    work = pathlib.Path(a.workdir).resolve()
    src = work / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "benchtasks.py").write_text(MODULE)
    sys.path.insert(0, str(src))

    import benchtasks
    from flyte._code_bundle._packaging import create_bundle
    from flyte._internal.runtime import convert
    from flyte._internal.runtime.task_serde import translate_task_to_wire
    from flyte.models import CodeBundle, SerializationContext

    bundle_dir = work / "bundle"
    bundle_dir.mkdir(exist_ok=True)
    tgz, _, _ = create_bundle(src, bundle_dir, [str(src / "benchtasks.py")], "bench", deref_symlinks=True)

    version = "bench1"
    bundle = CodeBundle(tgz=str(tgz), destination=".", computed_version=version)
    sctx = SerializationContext(
        version=version, project=a.project, domain=a.domain, org="", code_bundle=bundle, root_dir=src
    )
    spec = translate_task_to_wire(benchtasks.fanout, sctx)
    spec_path = work / "fanout.taskspec.pb"
    spec_path.write_bytes(spec.SerializeToString())
    index = {}
    for n in sorted({int(f) for f in a.fanout.split(",") if f.strip()}):
        inputs = asyncio.run(convert.convert_from_native_to_inputs(benchtasks.fanout.native_interface, n))
        inputs_path = work / f"fanout-{n}.inputs.pb"
        inputs_path.write_bytes(inputs.proto_inputs.SerializeToString())
        index[str(n)] = str(inputs_path)
    json.dump({"spec": str(spec_path), "inputs": index}, sys.stdout)


if __name__ == "__main__":
    main()
