"""Call every method of the given services with the official generated Python
Connect clients from the flyteidl2 wheel, each with an empty request.

Prints one JSON line per method: {"procedure", "code", "message"}, code "ok"
when the call succeeded. The Go test decides what is acceptable.
Usage: probe_services.py <base-url> <service full name>...
"""

import importlib
import json
import os
import sys

import flyteidl2
import pyqwest
from connectrpc.errors import ConnectError
from google.protobuf import descriptor_pool, message_factory


def import_all_pb2():
    root = os.path.dirname(flyteidl2.__file__)
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name.endswith("_pb2.py"):
                rel = os.path.relpath(os.path.join(dirpath, name[:-3]), os.path.dirname(root))
                importlib.import_module(rel.replace(os.sep, "."))


def snake(name):
    return "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(name))


def main():
    base, services = sys.argv[1], sys.argv[2:]
    import_all_pb2()
    for service in services:
        desc = descriptor_pool.Default().FindServiceByName(service)
        module = importlib.import_module(desc.file.name[: -len(".proto")].replace("/", ".") + "_connect")
        client_class = getattr(module, desc.name + "ClientSync")
        client = client_class(base, timeout_ms=10000)
        # Full-duplex streams need HTTP/2: connect to the server's h2c with
        # prior knowledge, as gRPC clients do.
        h2 = pyqwest.SyncClient(pyqwest.SyncHTTPTransport(http_version=pyqwest.HTTPVersion.HTTP2))
        duplex_client = client_class(base, timeout_ms=10000, http_client=h2)
        for method in desc.methods:
            request = message_factory.GetMessageClass(method.input_type)()
            procedure = "/%s/%s" % (service, method.name)
            try:
                if method.client_streaming:
                    result = getattr(duplex_client, snake(method.name))(iter([request]))
                else:
                    result = getattr(client, snake(method.name))(request)
                if method.server_streaming:
                    for _ in result:
                        break
                code, message = "ok", ""
            except ConnectError as e:
                code, message = e.code.name.lower(), e.message
            print(json.dumps({"procedure": procedure, "code": code, "message": message}), flush=True)


if __name__ == "__main__":
    main()
