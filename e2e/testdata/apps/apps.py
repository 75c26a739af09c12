"""Apps of the e2e apps tests: each serves on $PORT, on 127.0.0.1 only (as
uvicorn does by default) or on $POD_IP, its Pod's own address, on the test
Kubernetes cluster (where every Pod shares the host), and names itself and
its process in every answer."""

import os
import flyte
import flyte.app
from _serve import serve_http


def serve_forever(tag: str):
    serve_http(tag, lambda path: f"{tag} pid={os.getpid()} path={path}".encode())


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


# Two replicas that both bind 127.0.0.1:8080 (the SDK's default port), with
# a secret: each replica has a network of its own. It answers /secret with
# its secret, /put?key=K with whether its storage key may write K in the
# manager's bucket, and /reach?port=P with whether it reaches the host's
# 127.0.0.1:P.
iso = flyte.app.AppEnvironment(
    name="e2e-iso",
    scaling=flyte.app.Scaling(replicas=2),
    secrets=flyte.Secret(key="e2e-app-secret", as_env_var="E2E_APP_SECRET"),
    requires_auth=False,
)


def _iso_answer(path: str) -> str:
    import datetime
    import socket
    import urllib.parse

    u = urllib.parse.urlparse(path)
    q = urllib.parse.parse_qs(u.query)
    if u.path == "/secret":
        return "secret=" + os.environ.get("E2E_APP_SECRET", "")
    if u.path == "/reach":
        try:
            socket.create_connection(("127.0.0.1", int(q["port"][0])), timeout=2).close()
            return "reached"
        except OSError as e:
            return f"unreachable: {e}"
    if u.path == "/put":
        import obstore
        import obstore.store

        store = obstore.store.S3Store(
            "flyte",
            endpoint=os.environ["FLYTE_AWS_ENDPOINT"],
            access_key_id=os.environ["FLYTE_AWS_ACCESS_KEY_ID"],
            secret_access_key=os.environ["FLYTE_AWS_SECRET_ACCESS_KEY"],
            region=os.environ.get("AWS_REGION", "us-east-1"),
            virtual_hosted_style_request=False,
            client_options={"allow_http": True, "timeout": "10s"},
            retry_config={
                "max_retries": 0,
                "backoff": {
                    "init_backoff": datetime.timedelta(milliseconds=10),
                    "max_backoff": datetime.timedelta(milliseconds=10),
                    "base": 2,
                },
                "retry_timeout": datetime.timedelta(seconds=5),
            },
        )
        try:
            obstore.put(store, q["key"][0], b"from e2e-iso")
            return "put ok"
        except Exception as e:
            return f"put refused: {str(e).splitlines()[0]}"
    return f"iso pid={os.getpid()} path={path}"


@iso.server
def serve_iso():
    serve_http("iso", lambda path: _iso_answer(path).encode(), "127.0.0.1", 8080)
