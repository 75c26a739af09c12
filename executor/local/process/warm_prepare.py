# Part of the warm-start server: what it prepares before it forks (the
# SDK's deferred background loops, TLS contexts) and the probe child. The
# manager runs this file followed by warm_server.py as one program, so
# these use that file's log, threads and A0_IMPORTS, and it uses these.

import importlib
import json
import os
import signal
import sys
import threading


class DeferredThreads:
    """While the server imports, records the threads the imports start
    instead of starting them (fork would copy only the forking thread)."""

    def __enter__(self):
        self.threads = []
        self._start = threading.Thread.start
        rec = self

        def start(thread):
            rec.threads.append(thread)

        threading.Thread.start = start
        return self

    def __exit__(self, *exc):
        threading.Thread.start = self._start


def background_loops(deferred):
    """The SDK's background loops whose threads are all that deferred
    recorded, or None and why they cannot be started in a child instead."""
    api = sys.modules.get("flyte.syncify._api")
    cls = getattr(api, "_BackgroundLoop", None)
    if not isinstance(cls, type) or not callable(getattr(cls, "_run", None)):
        return None, "the SDK has no flyte.syncify._api._BackgroundLoop._run"
    loops = []
    for t in deferred:
        owner = getattr(getattr(t, "_target", None), "__self__", None)
        if type(owner) is not cls or getattr(t._target, "__func__", None) is not cls._run:
            return None, "an import starts a thread that is not the SDK's background loop: %r (target %r)" % (
                t, getattr(t, "_target", None))
        loop = getattr(owner, "loop", None)
        if not all(hasattr(t, a) for a in ("_args", "_kwargs")):
            return None, "threading.Thread has no _args or _kwargs to make a loop's thread anew with"
        if getattr(owner, "thread", None) is not t:
            return None, "a _BackgroundLoop's thread is not its .thread"
        if not isinstance(loop, asyncio_module().AbstractEventLoop) or loop.is_running() or loop.is_closed():
            return None, "a _BackgroundLoop's .loop is not a new asyncio event loop"
        loops.append(owner)
    return loops, None


def asyncio_module():
    import asyncio  # imported by the SDK anyway: not before it is needed

    return asyncio


def import_a0():
    """Imports A0_IMPORTS; returns why the first import failed other than
    for being absent (None if none did)."""
    err = None
    for m in A0_IMPORTS:
        try:
            importlib.import_module(m)
        except ModuleNotFoundError as e:
            if err is None and (e.name is None or not (m == e.name or m.startswith(e.name + "."))):
                err = "importing %s: %s" % (m, e)
        except Exception as e:
            err = err or "importing %s: %s: %s" % (m, type(e).__name__, e)
    return err


def probe():
    """In a child: the non-SDK modules a0's imports load, and why the SDK
    itself cannot be imported by the server ("" if it can)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        signal.alarm(300)  # an import that waits for a thread it started would hang
        before = set(sys.modules)
        with DeferredThreads() as deferred:
            err = import_a0()
        if err is None:
            _, err = background_loops(deferred.threads)
        if err is None and threads() != 1:
            err = "importing the SDK started %d threads" % (threads() - 1)
        mods = [m for m in sys.modules if m not in before and m != "flyte" and not m.startswith("flyte.")]
        with os.fdopen(w, "w") as f:
            json.dump({"modules": mods, "sdk": err or ""}, f)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    if not data:
        return [], "the probe child died"
    got = json.loads(data)
    return got["modules"], got["sdk"]


# How many TLS contexts each child finds ready (see TLSContexts): an
# attempt of the pinned SDK makes two (its client's and its controller's).
TLS_CONTEXTS = 2


class TLSContexts:
    """Verifying TLS contexts made before the fork, for the child.

    The SDK's clients make an httpx session even for a plaintext endpoint,
    and each session calls ssl.create_default_context(cafile=SSL_CERT_FILE
    or certifi's bundle), which parses the whole CA bundle: 0.1-0.7 s of
    CPU each, most of what a small task's run costs. The server makes
    TLS_CONTEXTS of them for that one file, and create_default_context
    hands each child its own (fork made them the child's: nothing is shared
    with the server or another child), one per call, while the call is
    exactly that one (the default purpose, only cafile, the same file,
    unchanged since) and SSLKEYLOGFILE (which the function reads when
    called) is unset; any other call, and calls past the ready ones, run
    the original function."""

    def __init__(self):
        import ssl

        self.ssl, self.original = ssl, ssl.create_default_context
        self.ready, self.path, self.stat = [], None, None
        path = os.environ.get("SSL_CERT_FILE")  # what httpx passes, as the child's environment has it
        if not path:
            try:
                import certifi

                path = certifi.where()
            except Exception:
                return
        try:
            self.stat = self._stat(path)
            self.ready = [self.original(cafile=path) for _ in range(TLS_CONTEXTS)]
        except Exception as e:
            log("no TLS contexts made ahead: %s" % e)
            self.ready = []
            return
        self.path = path
        ready, original, me = self.ready, self.original, self

        def create_default_context(purpose=ssl.Purpose.SERVER_AUTH, *, cafile=None, capath=None, cadata=None):
            if (ready and purpose is ssl.Purpose.SERVER_AUTH and cafile == me.path and capath is None
                    and cadata is None and not os.environ.get("SSLKEYLOGFILE") and me._unchanged()):
                return ready.pop()
            return original(purpose, cafile=cafile, capath=capath, cadata=cadata)

        create_default_context.__doc__ = original.__doc__
        create_default_context.__wrapped__ = original
        ssl.create_default_context = create_default_context

    @staticmethod
    def _stat(path):
        st = os.stat(path)
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _unchanged(self):
        try:
            return self._stat(self.path) == self.stat
        except OSError:
            return False
