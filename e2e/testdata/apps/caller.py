"""An app whose code calls the API with the credential its replicas get
under auth.mode required (flyte.init_in_cluster reads it as a task does):
GET /run?x=N runs the deployed task e2e_cli.double in the app's project and
domain and answers its run, phase and output; GET /other tries the same in
another domain and answers what the manager said."""

import json
import urllib.parse

import flyte
import flyte.app
import flyte.remote
from _serve import serve_http

caller = flyte.app.AppEnvironment(name="e2e-caller", scaling=flyte.app.Scaling(replicas=1), requires_auth=False)


def _run(domain: str | None, x: int) -> dict:
    flyte.init_in_cluster()
    task = flyte.remote.Task.get(name="e2e_cli.double", auto_version="latest")
    ctx = flyte.with_runcontext(domain=domain) if domain else flyte.with_runcontext()
    run = ctx.run(task, x=x)
    run.wait(quiet=True)
    out = {"run": run.name, "phase": run.phase}
    try:
        out["output"] = run.outputs()[0]
    except Exception as e:  # noqa: BLE001 - report it
        out["output_error"] = str(e)[:300]
    return out


def answer(path: str) -> dict:
    u = urllib.parse.urlparse(path)
    q = urllib.parse.parse_qs(u.query)
    try:
        if u.path == "/run":
            return _run(None, int(q["x"][0]))
        if u.path == "/other":
            return _run("production", 1)
        return {"error": "unknown path " + u.path}
    except Exception as e:  # noqa: BLE001 - the test reads what happened
        code = getattr(e, "code", None)
        return {"error": f"{getattr(code, 'name', None) or type(e).__name__}: {e}"[:500]}


@caller.server
def serve_caller():
    serve_http("caller", lambda path: json.dumps(answer(path), default=str).encode())
