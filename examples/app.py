"""A tiny web app served by flyte-manager.

Deploy it (see README.md in this folder for the setup):

    flyte deploy examples/app.py env

The manager starts its replicas and serves it at
http://localhost:8090/apps/flytesnacks/development/hello-app/ (`flyte get app`
shows the URL, its status and its replicas). Stop and start it with

    flyte update app hello-app --deactivate
    flyte update app hello-app --activate

and read what it printed with `flyte get logs` on the app, or in Python
`flyte.remote.App.get("hello-app").show_logs()`.
"""

import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import flyte
import flyte.app

env = flyte.app.AppEnvironment(
    name="hello-app",
    # Two replicas while busy, none after a minute without requests: the next
    # request starts one again (and waits for it).
    scaling=flyte.app.Scaling(replicas=(0, 2), scaledown_after=60),
    requires_auth=False,
)


class Hello(BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"Hello from replica pid {os.getpid()}, you asked for {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@env.server
def serve():
    # The manager gives every replica a port of its own in PORT.
    port = int(os.environ.get("PORT", "8080"))
    print(f"hello-app listening on 127.0.0.1:{port}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), Hello).serve_forever()


if __name__ == "__main__":
    flyte.init_from_config()  # ./.flyte/config.yaml, written by `flyte create config`
    app = flyte.serve(env)
    print(f"{app.name} serves at {app.endpoint}")
