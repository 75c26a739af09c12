"""An app whose code calls the API with the credential its replicas get
under auth.mode required (flyte.init_in_cluster reads it as a task does):
GET /run?x=N runs the deployed task e2e_cli.double in the app's project and
domain and answers its run, phase and output; GET /other tries the same in
another domain and answers what the manager said."""

import json
import os
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

import flyte
import flyte.app
import flyte.remote

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
    port = int(os.environ["PORT"])
    host = os.environ.get("POD_IP") or "127.0.0.1"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(answer(self.path), default=str).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    print(f"caller listening on {host}:{port}", flush=True)
    HTTPServer((host, port), Handler).serve_forever()
