# The warm-start server of the local executor (see warm.go). The manager
# runs it as `python -c <warm_prepare.py, this file> <socket fd> <a0 path>
# <spares>` with the interpreter named by a0's #! line, in an environment
# that holds only the variables that can change what imports do.
#
# It imports what the SDK's `a0` runtime imports, the SDK included, and
# then forks one child per attempt. Fork copies only the forking thread, so
# the server starts none: the SDK's imports create background event loops
# (flyte.syncify's _BackgroundLoop: an asyncio loop and a daemon thread that
# runs it), and while the server imports, Thread.start only records the
# threads it is asked to start. If every recorded thread is such a loop's
# (and the loop looks as expected), the server closes those loops (so no
# child inherits a loop's epoll or self-pipe) and each forked child, before
# anything else runs in it, gives every loop a new asyncio loop and a new
# thread like the recorded one (fork marks every Thread object but the
# forking one stopped) and starts it: the child then holds what an a0 that
# imported the SDK itself holds. A probe child tries all that first; if
# anything else would start a thread, or the SDK is not shaped as expected,
# the server imports only the SDK's third-party dependencies and each spare
# child imports the SDK itself (mode "dependencies", with the reason, in the
# ready message). Either way the server refuses to serve, and says so, if
# an import started a thread after all. It also makes TLS contexts ahead
# for the children (TLSContexts) and freezes its objects before each fork
# (gc.freeze: the child's collector never walks the inherited heap).
#
# A child ("spare") has its own channel to the manager: a socketpair the
# server makes before the fork. The server reads only the spare's ready
# message from its end, then hands that end to the manager (SCM_RIGHTS, in
# the spare message) and closes its copy: what the manager sends a spare
# (an attempt's argv and environment, secrets included) never passes
# through the server, whose heap every later spare is forked from. Each
# spare closes every descriptor but its own channel (so also the channels
# of the other spares) and exits when its channel closes before it got an
# attempt. Once given an attempt, a spare takes on its environment, working
# directory and stdout/stderr, waits for the manager's go (the manager has
# moved it into the attempt's cgroup by then) and returns to the top level
# of this script, which runs a0's entry function exactly as the a0 script
# does.
#
# Protocol: one JSON object per SOCK_SEQPACKET message, both ways; file
# descriptors ride along with SCM_RIGHTS.
#   server -> manager: ready {pid, names, mode, why} | refuse {why}
#                      names {names}  (a later spare read more variables)
#                      spare {pid} + [the manager's end of its channel]
#                      exited {pid, code, signal}  (of a spare announced)
#   manager -> server: take {pid}    the manager gave that spare an attempt
#                      want {n}      n attempts are waiting for a spare
#                      reap {pid}    collect the exit the server reported
#   spare -> server:   ready {names} (on the channel, before it is handed over)
#   manager -> spare:  start {argv, env, dir, uid, gid} + [stdout, stderr]
#                        argv: the attempt's command line (argv[0] is a0);
#                        env: its complete environment, "NAME=value" strings;
#                        dir: its working directory; uid, gid: the user to
#                        become (absent: stay the manager's), before any of
#                        the task's code or the SDK's loop threads run.
#                      go            the spare may run the task now
#   spare -> manager:  prepared | error {why}
# The server reports the exit of every spare it announced and reaps it
# only when told: until then its zombie keeps the pid (and so the process
# group's number) from reuse. Spares that die before they are announced
# are the server's own business.

import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import threading

SOCK_FD, A0, SPARES = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
MAX_MSG = 1 << 20
PR_SET_PDEATHSIG = 1
PR_SET_MM, PR_SET_MM_MAP = 35, 14

# What a0's entry function imports before it runs the task (flyte/_bin/
# runtime.py), then what a task's run imports on its way (its controller's
# client, the resolver; measured with PYTHONPROFILEIMPORTTIME on a real
# task). Only used to warm up: a name that no longer exists is skipped, and
# the task's own run imports whatever it needs.
A0_IMPORTS = [
    "flyte._bin.runtime",
    "flyte",
    "flyte._utils",
    "flyte.errors",
    "flyte.storage",
    "flyte._initialize",
    "flyte._internal.controllers",
    "flyte._internal.controllers.remote",
    "flyte._internal.image_cache",
    "flyte._internal.runtime.entrypoints",
    "flyte._logging",
    "flyte.models",
    # imported lazily during a run
    "flyte.remote._client.controlplane",
    "flyte.remote._client.auth._interceptors.default_metadata",
    "flyte.remote._client.auth._interceptors.retry",
    "flyte._internal.controllers.remote._client",
    "flyte._internal.resolvers._task_module",
    "flyte._internal.resolvers.common",
    "flyte.git",
    "flyte._utils.asyncify",
    "pyqwest._glue",
    "sniffio",
    "opentelemetry.metrics",
    "opentelemetry.propagate",
    "httpcore",
]

# Modules that read the whole environment at import, and the prefix of the
# names they use (the manager compares those names by pattern).
ENUMERATORS = {"fsspec/config.py": "FSSPEC_"}

# As when the interpreter runs the a0 script: its directory comes first.
sys.path[0] = os.path.dirname(A0)


def log(msg):
    sys.stderr.write("warm server: %s\n" % msg)
    sys.stderr.flush()


def send(sock, obj, fds=()):
    data = json.dumps(obj).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def recv(sock):
    """One message and its fds; (None, []) at EOF."""
    data, fds, flags, _ = socket.recv_fds(sock, MAX_MSG, 4)
    if flags & socket.MSG_TRUNC:
        for fd in fds:
            os.close(fd)
        raise ValueError("message too long")
    if not data:
        return None, []
    return json.loads(data), fds


class EnvReads:
    """Records which environment variables imports read, through os.environ."""

    def __init__(self):
        self.names, self.enumerated = set(), set()

    def _caller(self):
        f = sys._getframe(2)
        while f is not None and (f.f_code.co_filename.endswith(("os.py", "_collections_abc.py", "<frozen os>", "<frozen _collections_abc>"))):
            f = f.f_back
        return f.f_code.co_filename if f is not None else "?"

    def __enter__(self):
        cls = type(os.environ)
        self._get, self._iter = cls.__getitem__, cls.__iter__
        rec = self

        def getitem(env, key):
            rec.names.add((key if isinstance(key, str) else key.decode(), rec._caller()))
            return rec._get(env, key)

        def iterate(env):
            rec.enumerated.add(rec._caller())
            return rec._iter(env)

        cls.__getitem__, cls.__iter__ = getitem, iterate
        return self

    def __exit__(self, *exc):
        cls = type(os.environ)
        cls.__getitem__, cls.__iter__ = self._get, self._iter

    def result(self):
        """The names read, and an error for an unknown module that enumerated the environment."""
        known, unknown = set(), []
        for f in self.enumerated:
            m = [k for k in ENUMERATORS if f.endswith(k)]
            if m:
                known.add(f)
            else:
                unknown.append(f)
        names = sorted({n for n, f in self.names if f not in known})
        if unknown:
            return names, "the environment is enumerated at import by %s" % ", ".join(sorted(unknown))
        return names, None


class _MMMap(ctypes.Structure):
    # struct prctl_mm_map (linux/prctl.h)
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "start_code", "end_code", "start_data", "end_data", "start_brk", "brk",
        "start_stack", "arg_start", "arg_end", "env_start", "env_end")] + [
        ("auxv", ctypes.c_void_p), ("auxv_size", ctypes.c_uint32), ("exe_fd", ctypes.c_uint32)]


_kept = []  # the buffers /proc/self/cmdline and environ point into


def show_as(argv, env):
    """Makes /proc/self/cmdline and /proc/self/environ (what ps and other
    tools read) show the attempt's command and environment, as an exec'd
    a0's do, instead of the server's (prctl PR_SET_MM_MAP, which needs no
    privilege). Best effort: an old kernel leaves the server's."""
    try:
        with open("/proc/self/stat", "rb") as f:
            st = f.read()
        fields = st[st.rindex(b")") + 2:].split()
        v = lambda n: int(fields[n - 3])  # field n of proc(5)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sbrk.restype = ctypes.c_void_p
        args = b"\0".join(a.encode() for a in argv) + b"\0"
        envb = b"\0".join(kv.encode() for kv in env) + b"\0"
        abuf = ctypes.create_string_buffer(args, len(args))
        ebuf = ctypes.create_string_buffer(envb, len(envb))
        _kept.extend([abuf, ebuf])
        a0, e0 = ctypes.addressof(abuf), ctypes.addressof(ebuf)
        m = _MMMap(start_code=v(26), end_code=v(27), start_data=v(45), end_data=v(46),
                   start_brk=v(47), brk=libc.sbrk(0), start_stack=v(28),
                   arg_start=a0, arg_end=a0 + len(args), env_start=e0, env_end=e0 + len(envb),
                   auxv=None, auxv_size=0, exe_fd=0xFFFFFFFF)
        libc.prctl(PR_SET_MM, PR_SET_MM_MAP, ctypes.byref(m), ctypes.sizeof(m), 0)
    except Exception:
        pass


PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 4, 38
CLONE_NEWNS, CLONE_FS = 0x00020000, 0x00000200
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
O_PATH = 0o10000000


def confine(plan):
    """The mount namespace of an attempt of another user (confine_linux.go
    makes the same for a plain start): each of plan["hide"] an empty tmpfs,
    each of plan["bind"] bound back at its place."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]

    def check(rc, what):
        if rc != 0:
            e = ctypes.get_errno()
            raise OSError(e, "%s: %s" % (what, os.strerror(e)))

    check(libc.unshare(CLONE_NEWNS | CLONE_FS), "unshare")
    os.umask(0)
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "private /")
    fds = [os.open(b, O_PATH | os.O_CLOEXEC | os.O_DIRECTORY) for b in plan.get("bind", [])]
    try:
        for h in plan.get("hide", []):
            check(libc.mount(b"tmpfs", h.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,size=64k"), "hide " + h)
        for b, fd in zip(plan.get("bind", []), fds):
            os.makedirs(b, 0o755, exist_ok=True)
            check(libc.mount(("/proc/self/fd/%d" % fd).encode(), b.encode(), None, MS_BIND | MS_REC, None), "bind " + b)
    finally:
        for fd in fds:
            os.close(fd)


def become_user(server, uid, gid):
    """Drops this (single-threaded) process to uid and gid for good, as a
    plain start's fork does: no supplementary groups, real, effective and
    saved ids all changed, no_new_privs, umask 027. Nothing when uid is 0 (the
    manager's user). Changing the ids clears the parent-death signal and
    the dumpable flag; both are set again (dumpable as an exec'd process
    has it: /proc/<pid> then belongs to the user, not to root)."""
    if not uid:
        return
    if threads() != 1:
        raise RuntimeError("cannot change user with %d threads" % threads())
    libc = ctypes.CDLL(None, use_errno=True)
    os.umask(0o027)  # attemptUmask in confine_linux.go
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise RuntimeError("the user did not change")
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs")
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != server:
        os._exit(1)


def threads():
    return max(threading.active_count(), len(os.listdir("/proc/self/task")))


class Child:
    def __init__(self, pid, ch):
        # ch: the server's end of the spare's channel, held only until the
        # spare is ready and it goes to the manager.
        self.pid, self.ch = pid, ch
        self.state = "importing"  # -> idle (the manager has it) -> taken


class Server:
    def __init__(self, sock):
        self.sock = sock
        self.children = {}  # pid -> Child
        self.reported = set()  # pids whose exit the manager has
        self.waiting = 0  # attempts the manager has waiting for a spare
        self.names = None  # base_names and the first spare's, once it is ready
        self.base_names = set()
        self.announced = False
        self.spare_failures = 0
        self.mode, self.why = "dependencies", ""  # see startup
        self.loops = []  # the SDK's background loops, in mode "sdk"
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)

    # --- in the parent

    def fork_spare(self):
        server_end, spare_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        # What the server holds moves out of the collector's reach: the
        # child's collections and its exit's scan for open files
        # (exit_attempt) then never walk the inherited heap, which would
        # copy every page of it and took a good part of a small task's
        # exit.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            server_end.detach()  # closed with the rest in become_spare
            return spare_end
        spare_end.close()
        try:
            os.setpgid(pid, pid)  # also done in the child: whichever runs first
        except OSError:
            pass
        self.children[pid] = Child(pid, server_end)
        return None

    def count(self, state):
        return sum(1 for c in self.children.values() if c.state == state and c.pid not in self.reported)

    def top_up(self):
        """Keeps SPARES idle spares, or as many as attempts wait for."""
        spares = SPARES if self.names is not None else max(SPARES, 1)  # the first tells what the SDK reads
        want = max(spares, self.waiting) - self.count("idle")
        while self.count("importing") < want:
            ch = self.fork_spare()
            if ch is not None:
                return ch
        return None

    def on_spare_msg(self, c):
        """The spare's ready message, the only one the server reads from a
        spare's channel; then the channel goes to the manager."""
        try:
            msg, fds = recv(c.ch)
        except (OSError, ValueError):
            msg, fds = None, []
        for fd in fds:
            os.close(fd)
        if msg is None or msg.get("op") != "ready":
            self.drop_channel(c)  # it died, or is confused: its exit is collected
            return
        self.spare_failures = 0
        names = set(msg.get("names", []))
        if self.names is None:
            self.names = self.base_names | names
        elif not names <= self.names:
            # A later spare read more: tell the manager before it is used.
            self.names |= names
            send(self.sock, {"op": "names", "names": sorted(self.names)})
        if not self.announced:
            send(self.sock, {"op": "ready", "pid": os.getpid(), "names": sorted(self.names),
                             "mode": self.mode, "why": self.why})
            self.announced = True
        try:
            send(self.sock, {"op": "spare", "pid": c.pid}, [c.ch.fileno()])
        finally:
            # From here on only the manager and the spare hold the channel.
            self.drop_channel(c)
        c.state = "idle"

    def drop_channel(self, c):
        if c.ch is not None:
            c.ch.close()
            c.ch = None

    def on_manager_msg(self):
        msg, fds = recv(self.sock)
        for fd in fds:
            os.close(fd)  # the manager sends the server none
        if msg is None:
            return False
        op = msg.get("op")
        c = self.children.get(msg.get("pid"))
        if op == "take" and c is not None and c.state == "idle":
            c.state = "taken"
        elif op == "want":
            self.waiting = max(0, int(msg.get("n", 0)))
        elif op == "reap" and c is not None and c.pid in self.reported:
            os.waitpid(c.pid, 0)
            self.reported.discard(c.pid)
            del self.children[c.pid]
        return True

    def on_sigchld(self):
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass
        for c in list(self.children.values()):
            if c.pid in self.reported:
                continue
            try:
                info = os.waitid(os.P_PID, c.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None
            if info is None:
                continue
            self.drop_channel(c)
            if c.state != "importing":
                # The manager knows this pid: report, keep the zombie.
                self.reported.add(c.pid)
                killed = info.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
                send(self.sock, {"op": "exited", "pid": c.pid,
                                 "code": -1 if killed else info.si_status,
                                 "signal": info.si_status if killed else 0})
                continue
            os.waitpid(c.pid, 0)
            del self.children[c.pid]
            self.spare_failures += 1
            log("a spare child died before it was ready (status %d)" % info.si_status)

    def serve(self):
        """The loop; returns the channel in a forked child, None when done."""
        while True:
            ch = self.top_up()
            if ch is not None:
                return ch
            if self.spare_failures >= 3:
                send(self.sock, {"op": "refuse", "why": "spare children keep dying before they are ready"})
                return None
            fds = [self.sock, self.wake_r] + [c.ch for c in self.children.values() if c.ch is not None]
            try:
                readable, _, _ = select.select(fds, [], [])
            except InterruptedError:
                continue
            for r in readable:
                if r is self.sock:
                    if not self.on_manager_msg():
                        return None
                elif r == self.wake_r:
                    self.on_sigchld()
                else:
                    c = next((c for c in self.children.values() if c.ch is r), None)
                    if c is not None:
                        self.on_spare_msg(c)
            self.on_sigchld()

    # --- in a forked child

    def start_loops(self):
        asyncio = asyncio_module()
        for bl in self.loops:
            # A new Thread too: fork marked the recorded one stopped
            # (threading's after-fork hook stops every thread but the
            # forking one), so it would never say it is alive.
            old = bl.thread
            bl.loop = asyncio.new_event_loop()
            bl.thread = threading.Thread(name=old.name, target=old._target, args=old._args,
                                         kwargs=old._kwargs, daemon=old.daemon)
            bl.thread.start()

    def become_spare(self, ch):
        """Turns this fork into an attempt's process; returns once it may run."""
        server = os.getppid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setpgid(0, 0)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != server:
            os._exit(1)
        # Only its own channel stays open: not the server's connection, nor
        # any other spare's channel (the server may still hold some).
        os.close(self.wake_r)
        os.close(self.wake_w)
        self.sock.detach()
        for c in self.children.values():
            if c.ch is not None:
                c.ch.detach()
        os.closerange(3, ch.fileno())
        os.closerange(ch.fileno() + 1, 1 << 16)
        if self.mode == "sdk":
            # The SDK's loop threads start once the spare is the attempt's
            # user (start_loops), so that they too run as that user.
            names, err = [], None
        else:
            reads = EnvReads()
            with reads:
                import_a0()
            names, err = reads.result()
        if err:
            log(err)
            os._exit(1)
        send(ch, {"op": "ready", "names": names})
        # From here on the channel's other end is the manager's.
        try:
            msg, fds = recv(ch)
        except (OSError, ValueError):
            os._exit(1)
        if msg is None:
            os._exit(0)  # the manager closed it, or the server died before handing it over
        try:
            if msg.get("op") != "start" or len(fds) != 2:
                raise ValueError("expected a start message with stdout and stderr")
            os.chdir(msg["dir"])
            env = dict(kv.split("=", 1) for kv in msg["env"])
            os.environ.clear()
            os.environ.update(env)
            os.dup2(fds[0], 1)
            os.dup2(fds[1], 2)
            for fd in fds:
                os.close(fd)
            sys.argv = [A0] + list(msg["argv"][1:])
            show_as([sys.executable] + sys.argv, msg["env"])
            # The user to run as, before any of the task's code and the
            # SDK's loop threads (all threads after it inherit it).
            if msg.get("confine"):
                confine(msg["confine"])
            become_user(server, msg.get("uid", 0), msg.get("gid", 0))
            os.chdir(msg["dir"])  # again: as the user, in its own namespace
            if self.mode == "sdk":
                self.start_loops()
        except Exception as e:
            send(ch, {"op": "error", "why": str(e)})
            os._exit(127)
        send(ch, {"op": "prepared"})
        try:
            go, _ = recv(ch)
        except (OSError, ValueError):
            go = None
        if go is None or go.get("op") != "go":
            os._exit(1)
        ch.close()


def startup(sock):
    if threads() != 1:
        send(sock, {"op": "refuse", "why": "the interpreter started with %d threads" % threads()})
        return None
    mods, why_not_sdk = probe()
    reads = EnvReads()
    loops = None
    with reads:
        if not why_not_sdk:
            with DeferredThreads() as deferred:
                import_a0()
            loops, err = background_loops(deferred.threads)
            if err is not None:
                # The probe child found otherwise: nothing to fall back on
                # in this process.
                send(sock, {"op": "refuse", "why": "importing the SDK: " + err})
                return None
            for bl in loops:
                bl.loop.close()  # its epoll and self-pipe: each child makes its own
        else:
            for m in mods:
                try:
                    importlib.import_module(m)
                except Exception:
                    pass
    names, err = reads.result()
    if err:
        send(sock, {"op": "refuse", "why": err})
        return None
    if threads() != 1:
        send(sock, {"op": "refuse", "why": "importing the SDK's dependencies started %d threads" % (threads() - 1)})
        return None
    srv = Server(sock)
    srv.base_names = set(names)
    TLSContexts()
    if loops is not None:
        srv.mode, srv.loops = "sdk", loops
        log("imported the SDK (%d background loops started in each child); serving" % len(loops))
    else:
        srv.mode, srv.why = "dependencies", why_not_sdk
        log("imported %d of the SDK's dependencies, not the SDK itself (%s); serving" % (len(mods), why_not_sdk))
    return srv


def main():
    sock = socket.socket(fileno=SOCK_FD)
    srv = startup(sock)
    if srv is None:
        return None
    ch = srv.serve()
    if ch is None:
        return None
    srv.become_spare(ch)
    return True


def exit_attempt(code):
    """Ends the attempt's process as the interpreter's own exit would, less
    the teardown of every module and object the server imported: in a
    forked child that teardown touches the whole inherited heap (a copy of
    each page) and took most of a small task's time. What the exit does
    that anyone can observe still happens, in the interpreter's order:
    non-daemon threads are waited for, atexit functions run, and buffered
    files still open are flushed; then the code is the exit status."""
    import atexit
    import gc
    import io

    threading._shutdown()
    atexit._run_exitfuncs()
    buffered = (io.BufferedWriter, io.BufferedRandom, io.TextIOWrapper)
    for obj in gc.get_objects():
        # type(), not isinstance: some objects (lazy modules) raise when
        # asked for their class.
        if type(obj) in buffered:
            try:
                if not obj.closed:
                    obj.flush()
            except Exception:
                pass
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    else:
        print(code, file=sys.stderr)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status)


if main():
    # The attempt's process, as the a0 script runs it (sys.exit(main())).
    from flyte._bin.runtime import main as a0_main

    try:
        exit_code = a0_main()
    except SystemExit as e:
        exit_code = e.code
    exit_attempt(exit_code)
else:
    # The server is done. It skips the interpreter's exit: the atexit
    # functions of the SDK's background loops would try to stop loops that
    # it closed and threads that it never started.
    sys.stderr.flush()
    os._exit(0)
