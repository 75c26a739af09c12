"""What the test apps share: an HTTP server whose GETs answer
respond(path), on $PORT at $POD_IP on Kubernetes and at loopback locally,
unless told where."""

import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


def serve_http(tag: str, respond: Callable[[str], bytes], host: str = "", port: int = 0) -> None:
    port = port or int(os.environ["PORT"])
    host = host or os.environ.get("POD_IP") or "127.0.0.1"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = respond(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    print(f"{tag} listening on {host}:{port}", flush=True)
    ThreadingHTTPServer((host, port), Handler).serve_forever()
