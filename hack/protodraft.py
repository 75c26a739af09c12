"""Draft .proto sources from the schema facts in the official flyteidl2 wheel.

Why this exists: our protos must match the official schema field for field
(names, numbers, types, json names, oneofs, enum values, methods). Those facts
live in the descriptors that the `flyteidl2` wheel registers; this script turns
them into proto3 text so that an SDK bump starts from an exact draft instead of
hand-copying hundreds of numbers. Only facts are emitted: no comments, no
validation rules (buf.validate is not part of the wire format and we do not
enforce it), no HTTP annotations, and our own go_package.

Usage (from the repo root, with the project's virtualenv):
    .venv/bin/python hack/protodraft.py            # rewrite flyteidl2/**.proto
The result is reviewed and committed; `make gen` generates Go from it and the
conformance test (flyteidl2/conformance) keeps it honest.
"""

import importlib
import os
import sys

from google.protobuf import descriptor_pb2, descriptor_pool

GO_ROOT = "fmgr.dev/gen/go"

# The services the manager serves (DESIGN.md §2); their transitive imports are drafted.
SERVICES = [
    "flyteidl2.workflow.RunService",
    "flyteidl2.workflow.QueueService",
    "flyteidl2.workflow.StateService",
    "flyteidl2.workflow.InternalRunService",
    "flyteidl2.workflow.TranslatorService",
    "flyteidl2.task.TaskService",
    "flyteidl2.actions.ActionsService",
    "flyteidl2.dataproxy.DataProxyService",
    "flyteidl2.cluster.ClusterService",
    "flyteidl2.cacheservice.CacheService",
    "flyteidl2.cacheservice.v2.CacheService",
    "flyteidl2.secret.SecretService",
    "flyteidl2.app.AppService",
    "flyteidl2.app.AppLogsService",
    "flyteidl2.project.ProjectService",
    "flyteidl2.trigger.TriggerService",
    "flyteidl2.auth.IdentityService",
    "flyteidl2.auth.AuthMetadataService",
    "flyteidl2.imagebuilder.ImageService",
]

DROPPED_IMPORTS = {"buf/validate/validate.proto", "google/api/annotations.proto"}

SCALARS = {
    descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE: "double",
    descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT: "float",
    descriptor_pb2.FieldDescriptorProto.TYPE_INT64: "int64",
    descriptor_pb2.FieldDescriptorProto.TYPE_UINT64: "uint64",
    descriptor_pb2.FieldDescriptorProto.TYPE_INT32: "int32",
    descriptor_pb2.FieldDescriptorProto.TYPE_FIXED64: "fixed64",
    descriptor_pb2.FieldDescriptorProto.TYPE_FIXED32: "fixed32",
    descriptor_pb2.FieldDescriptorProto.TYPE_BOOL: "bool",
    descriptor_pb2.FieldDescriptorProto.TYPE_STRING: "string",
    descriptor_pb2.FieldDescriptorProto.TYPE_BYTES: "bytes",
    descriptor_pb2.FieldDescriptorProto.TYPE_UINT32: "uint32",
    descriptor_pb2.FieldDescriptorProto.TYPE_SFIXED32: "sfixed32",
    descriptor_pb2.FieldDescriptorProto.TYPE_SFIXED64: "sfixed64",
    descriptor_pb2.FieldDescriptorProto.TYPE_SINT32: "sint32",
    descriptor_pb2.FieldDescriptorProto.TYPE_SINT64: "sint64",
}
F = descriptor_pb2.FieldDescriptorProto


def load_wheel():
    import flyteidl2

    root = os.path.dirname(flyteidl2.__file__)
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name.endswith("_pb2.py"):
                rel = os.path.relpath(os.path.join(dirpath, name[:-3]), os.path.dirname(root))
                importlib.import_module(rel.replace(os.sep, "."))
    return descriptor_pool.Default()


def closure(pool):
    files = {}

    def add(fd):
        if fd.name in files or not fd.name.startswith("flyteidl2/"):
            return
        proto = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        files[fd.name] = proto
        for dep in fd.dependencies:
            add(dep)

    for svc in SERVICES:
        add(pool.FindServiceByName(svc).file)
    return files


def json_default(name):
    out, upper = [], False
    for ch in name:
        if ch == "_":
            upper = True
        elif upper:
            out.append(ch.upper())
            upper = False
        else:
            out.append(ch)
    return "".join(out)


class Renderer:
    def __init__(self, pool, proto):
        self.pool = pool
        self.proto = proto
        self.lines = []

    def emit(self, depth, text):
        self.lines.append(("  " * depth + text) if text else "")

    def type_ref(self, full, scope):
        """Shortest reference that protoc resolves to `full` from `scope`."""
        full = full.lstrip(".")
        pkg = self.proto.package
        if full.startswith(pkg + "."):
            short = full[len(pkg) + 1 :]
            first = short.split(".")[0]
            # protoc resolves the first component from the innermost scope
            # outwards; the short name is only safe if nothing nearer shadows it.
            parts = scope.split(".")
            for i in range(len(parts), len(pkg.split(".")), -1):
                candidate = ".".join(parts[:i]) + "." + first
                if self.exists(candidate):
                    return short if candidate == pkg + "." + first else "." + full
            return short
        return full

    def exists(self, name):
        for find in (self.pool.FindMessageTypeByName, self.pool.FindEnumTypeByName):
            try:
                find(name)
                return True
            except KeyError:
                pass
        return False

    def field_type(self, f, scope, nested):
        if f.type in (F.TYPE_MESSAGE, F.TYPE_ENUM):
            entry = nested.get(f.type_name.lstrip("."))
            if entry is not None:
                k, v = entry.field[0], entry.field[1]
                return "map<%s, %s>" % (self.field_type(k, scope, {}), self.field_type(v, scope, {}))
            return self.type_ref(f.type_name, scope)
        return SCALARS[f.type]

    def field_opts(self, f):
        opts = []
        if f.json_name and f.json_name != json_default(f.name):
            opts.append('json_name = "%s"' % f.json_name)
        if f.options.deprecated:
            opts.append("deprecated = true")
        return " [%s]" % ", ".join(opts) if opts else ""

    def field(self, depth, f, scope, nested, in_oneof=False):
        label = ""
        if f.label == F.LABEL_REPEATED and f.type_name.lstrip(".") not in nested:
            label = "repeated "
        elif f.proto3_optional:
            label = "optional "
        typ = self.field_type(f, scope, nested)
        self.emit(depth, "%s%s %s = %d%s;" % (label, typ, f.name, f.number, self.field_opts(f)))

    def reserved(self, depth, m):
        for r in m.reserved_range:
            end = r.end - 1
            text = str(r.start) if r.start == end else "%d to %s" % (r.start, "max" if end >= 536870911 else end)
            self.emit(depth, "reserved %s;" % text)
        if m.reserved_name:
            self.emit(depth, "reserved %s;" % ", ".join('"%s"' % n for n in m.reserved_name))

    def enum(self, depth, e):
        self.emit(depth, "enum %s {" % e.name)
        if e.options.allow_alias:
            self.emit(depth + 1, "option allow_alias = true;")
        self.reserved(depth + 1, e)
        for v in e.value:
            opts = []
            if v.options.deprecated:
                opts.append("deprecated = true")
            for ext, val in v.options.ListFields():
                if ext.is_extension:
                    opts.append('(%s) = "%s"' % (ext.full_name, val))
            suffix = " [%s]" % ", ".join(opts) if opts else ""
            self.emit(depth + 1, "%s = %d%s;" % (v.name, v.number, suffix))
        self.emit(depth, "}")

    def message(self, depth, m, parent):
        scope = parent + "." + m.name
        nested = {scope + "." + n.name: n for n in m.nested_type if n.options.map_entry}
        self.emit(depth, "message %s {" % m.name)
        if m.options.deprecated:
            self.emit(depth + 1, "option deprecated = true;")
        self.reserved(depth + 1, m)
        for e in m.enum_type:
            self.enum(depth + 1, e)
        for n in m.nested_type:
            if not n.options.map_entry:
                self.message(depth + 1, n, scope)
        real_oneofs = {}
        for f in m.field:
            if f.HasField("oneof_index") and not f.proto3_optional:
                real_oneofs.setdefault(f.oneof_index, []).append(f)
        done = set()
        for f in m.field:
            if f.HasField("oneof_index") and not f.proto3_optional:
                if f.oneof_index in done:
                    continue
                done.add(f.oneof_index)
                self.emit(depth + 1, "oneof %s {" % m.oneof_decl[f.oneof_index].name)
                for of in real_oneofs[f.oneof_index]:
                    self.field(depth + 2, of, scope, nested, in_oneof=True)
                self.emit(depth + 1, "}")
            else:
                self.field(depth + 1, f, scope, nested)
        self.emit(depth, "}")

    def service(self, s):
        self.emit(0, "service %s {" % s.name)
        for m in s.method:
            req = self.type_ref(m.input_type, self.proto.package)
            resp = self.type_ref(m.output_type, self.proto.package)
            head = "rpc %s(%s%s) returns (%s%s)" % (
                m.name,
                "stream " if m.client_streaming else "",
                req,
                "stream " if m.server_streaming else "",
                resp,
            )
            opts = []
            if m.options.deprecated:
                opts.append("option deprecated = true;")
            if m.options.HasField("idempotency_level"):
                level = descriptor_pb2.MethodOptions.IdempotencyLevel.Name(m.options.idempotency_level)
                opts.append("option idempotency_level = %s;" % level)
            if opts:
                self.emit(1, head + " {")
                for o in opts:
                    self.emit(2, o)
                self.emit(1, "}")
            else:
                self.emit(1, head + ";")
        self.emit(0, "}")

    def render(self, version):
        p = self.proto
        self.emit(0, "// Wire-compatible with flyteidl2 %s (see hack/protodraft.py)." % version)
        self.emit(0, 'syntax = "proto3";')
        self.emit(0, "")
        self.emit(0, "package %s;" % p.package)
        self.emit(0, "")
        deps = [d for d in p.dependency if d not in DROPPED_IMPORTS]
        for d in deps:
            self.emit(0, 'import "%s";' % d)
        if deps:
            self.emit(0, "")
        go_dir = os.path.dirname(p.name)
        self.emit(0, 'option go_package = "%s/%s";' % (GO_ROOT, go_dir))
        for ext in p.extension:
            self.emit(0, "")
            self.emit(0, "extend %s {" % ext.extendee.lstrip("."))
            self.field(1, ext, p.package, {})
            self.emit(0, "}")
        for e in p.enum_type:
            self.emit(0, "")
            self.enum(0, e)
        for m in p.message_type:
            self.emit(0, "")
            self.message(0, m, p.package)
        for s in p.service:
            self.emit(0, "")
            self.service(s)
        return "\n".join(self.lines) + "\n"


def main():
    from importlib.metadata import version

    out_root = sys.argv[1] if len(sys.argv) > 1 else "."
    pool = load_wheel()
    v = version("flyteidl2")
    for name, proto in sorted(closure(pool).items()):
        path = os.path.join(out_root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(Renderer(pool, proto).render(v))
        print(path)


if __name__ == "__main__":
    main()
