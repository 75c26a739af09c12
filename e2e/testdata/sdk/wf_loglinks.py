"""Task for the log links scenario: every attempt prints a line naming the
marker and its attempt, so the test can tell which attempt a log is of;
the first attempt then fails (retries=1), so there are two logs.

linked_parent calls linked, a task with links= of its own: the SDK writes
them into the child's metadata with {{.actionName}} and {{.podName}} left
for the executor to fill in."""

import os

import flyte

env = flyte.TaskEnvironment(name="e2e_loglinks")


@env.task(retries=1)
async def speak(marker: str) -> str:
    attempt = int(os.environ.get("FLYTE_ATTEMPT_NUMBER", "0")) + 1
    print(f"loglinks {marker} attempt {attempt}", flush=True)
    if attempt == 1:
        raise ValueError(f"loglinks {marker}: failing attempt 1 on purpose")
    return marker


class RunLink:
    """A flyte.Link: a log system's page of the action."""

    name = "run link"
    icon_uri = ""

    def get_link(self, run_name, project, domain, context, parent_action_name, action_name, pod_name, **kwargs):
        return f"https://links.example.com/{project}/{domain}/{run_name}/{action_name}?pod={pod_name}&parent={parent_action_name}"


@env.task(links=(RunLink(),))
async def linked() -> str:
    return "linked"


@env.task
async def linked_parent() -> str:
    return await linked()
