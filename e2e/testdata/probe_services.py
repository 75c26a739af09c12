"""Call procedures of the manager with the official generated Python Connect
clients from the flyteidl2 wheel.

  probe_services.py <base-url> <cases.json> <service full name>...

Calls every method of each named service with an empty request, then each
case of cases.json ([{"name", "procedure": "/pkg.Service/Method", "request":
{protobuf JSON}}]). Prints one JSON line per call: {"case" ("" for the empty
request), "procedure", "code", "message"}, code "ok" when the call succeeded.
The Go test decides what each call must answer.
"""

import importlib
import json
import os
import sys

import flyteidl2
import pyqwest
from connectrpc.errors import ConnectError
from google.protobuf import descriptor_pool, json_format, message_factory


def import_all_pb2():
    root = os.path.dirname(flyteidl2.__file__)
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name.endswith("_pb2.py"):
                rel = os.path.relpath(os.path.join(dirpath, name[:-3]), os.path.dirname(root))
                importlib.import_module(rel.replace(os.sep, "."))


def snake(name):
    return "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(name))


class Prober:
    def __init__(self, base):
        self.base = base
        self.clients = {}

    def clients_for(self, desc):
        if desc.full_name not in self.clients:
            module = importlib.import_module(desc.file.name[: -len(".proto")].replace("/", ".") + "_connect")
            client_class = getattr(module, desc.name + "ClientSync")
            # Full-duplex streams need HTTP/2: connect to the server's h2c
            # with prior knowledge, as gRPC clients do.
            h2 = pyqwest.SyncClient(pyqwest.SyncHTTPTransport(http_version=pyqwest.HTTPVersion.HTTP2))
            self.clients[desc.full_name] = (
                client_class(self.base, timeout_ms=10000),
                client_class(self.base, timeout_ms=10000, http_client=h2),
            )
        return self.clients[desc.full_name]

    def call(self, case, method, request):
        client, duplex_client = self.clients_for(method.containing_service)
        procedure = "/%s/%s" % (method.containing_service.full_name, method.name)
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
        print(json.dumps({"case": case, "procedure": procedure, "code": code, "message": message}), flush=True)


def main():
    base, cases_file, services = sys.argv[1], sys.argv[2], sys.argv[3:]
    import_all_pb2()
    pool = descriptor_pool.Default()
    prober = Prober(base)
    for service in services:
        for method in pool.FindServiceByName(service).methods:
            prober.call("", method, message_factory.GetMessageClass(method.input_type)())
    with open(cases_file) as f:
        cases = json.load(f)
    for case in cases:
        service, name = case["procedure"].strip("/").split("/")
        method = pool.FindServiceByName(service).methods_by_name[name]
        request = json_format.ParseDict(case["request"], message_factory.GetMessageClass(method.input_type)())
        prober.call(case["name"], method, request)


if __name__ == "__main__":
    main()
