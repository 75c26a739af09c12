"""Apps of the e2e apps tests: each serves on $PORT, on 127.0.0.1 only (as
uvicorn does by default) or on $POD_IP, its Pod's own address, on the test
Kubernetes cluster (where every Pod shares the host), and names itself and
its process in every answer."""

import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import flyte
import flyte.app


def serve_forever(tag: str):
    port = int(os.environ["PORT"])
    host = os.environ.get("POD_IP") or "127.0.0.1"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = f"{tag} pid={os.getpid()} path={self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    print(f"{tag} listening on {host}:{port}", flush=True)
    ThreadingHTTPServer((host, port), Handler).serve_forever()


web = flyte.app.AppEnvironment(name="e2e-web", scaling=flyte.app.Scaling(replicas=2), requires_auth=False)


@web.server
def serve_web():
    serve_forever("web")


lazy = flyte.app.AppEnvironment(
    name="e2e-lazy", scaling=flyte.app.Scaling(replicas=(0, 1), scaledown_after=2), requires_auth=False
)


@lazy.server
def serve_lazy():
    serve_forever("lazy")


crashy = flyte.app.AppEnvironment(
    name="e2e-crashy",
    command=["sh", "-c", "echo crashy-boom: no config file >&2; exit 3"],
    scaling=flyte.app.Scaling(replicas=1),
    requires_auth=False,
)
