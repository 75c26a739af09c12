"""Hello, Flyte: the smallest program to run on flyte-manager.

Run it on the manager (see README.md in this folder for the setup):

    flyte run examples/hello.py hello --name World

or from Python, which also waits for the result and prints it:

    python examples/hello.py
"""

import flyte

env = flyte.TaskEnvironment(name="hello")


@env.task
async def hello(name: str) -> str:
    greeting = f"Hello, {name}!"
    print(greeting, flush=True)  # shows up in `flyte get logs <run>`
    return greeting


if __name__ == "__main__":
    flyte.init_from_config()  # ./.flyte/config.yaml, written by `flyte create config`
    run = flyte.run(hello, name="World")
    print(f"run {run.name}: {run.url}")
    run.wait()
    print(run.outputs()[0])
