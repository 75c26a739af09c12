package process

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What the warm server prepares before it forks (warm_prepare.py): the
// SDK imported with its background loops started afresh in each child,
// and TLS contexts.

// standInLoops is a stand-in for the SDK's flyte.syncify._api: a
// _BackgroundLoop made at import, its asyncio loop in attribute loopAttr
// (the SDK's is "loop").
func standInLoops(loopAttr string) string {
	return strings.ReplaceAll(`import asyncio, threading
class _BackgroundLoop:
    def __init__(self, name):
        self.LOOP = asyncio.new_event_loop()
        self.thread = threading.Thread(name=name, target=self._run, daemon=True)
        self.thread.start()
    def _run(self):
        asyncio.set_event_loop(self.LOOP)
        self.LOOP.run_forever()
bg = _BackgroundLoop("stand-in loop")
`, "LOOP", loopAttr)
}

// standInLoopRuntime is a0's entry point of a stand-in SDK that checks its
// background loop: its thread runs a coroutine sent to it.
const standInLoopRuntime = `import asyncio, threading
import flyte.syncify._api as api
EXTRA
def main():
    bg = api.bg
    loop = getattr(bg, "loop", None) or getattr(bg, "_loop")
    async def where():
        return threading.current_thread() is bg.thread and asyncio.get_running_loop() is loop
    alive = bg.thread.is_alive()
    ok = alive and asyncio.run_coroutine_threadsafe(where(), loop).result(60)
    print("background loop ok" if ok else "background loop broken: alive %s, %r" % (alive, loop))
    return 0
`

// The server imports the SDK itself only when every thread its imports
// start is a background loop's that it can start afresh in each child;
// otherwise it imports only the SDK's dependencies (each child imports the
// SDK) and says why. Either way the attempt's background loop runs.
func TestWarmServerPreimportsTheSDKOnlyWhenItCan(t *testing.T) {
	venv := sdkVenv(t)
	ticker := "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
	cases := []struct {
		name     string
		loopAttr string
		extra    string // more of the runtime's imports
		files    map[string]string
		mode     string
		why      string // in the runner's log when mode is dependencies
	}{
		{"the SDK's shape", "loop", "", nil, warmModeSDK, ""},
		{"a loop under another name", "_loop", "", nil, warmModeDependencies, "is not a new asyncio event loop"},
		{"another thread", "loop", "import flyte._ticker", map[string]string{"flyte/_ticker.py": ticker},
			warmModeDependencies, "an import starts a thread that is not the SDK's background loop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"flyte/syncify/__init__.py": "", "flyte/syncify/_api.py": standInLoops(tc.loopAttr)}
			maps.Copy(files, tc.files)
			fake := standInSDK(t, strings.Replace(standInLoopRuntime, "EXTRA", tc.extra, 1), files)
			r, lb := newWarmRunner(t, venv, "none")
			env := warmEnv("PYTHONPATH=" + fake)
			waitWarm(t, r, env)
			if got := r.WarmStats().Preimports; got != tc.mode {
				t.Errorf("pre-imports %q, want %q", got, tc.mode)
			}
			if tc.mode == warmModeDependencies && (!strings.Contains(lb.String(), "could not import the SDK") || !strings.Contains(lb.String(), tc.why)) {
				t.Errorf("the runner's log does not say why the SDK is not pre-imported (%q):\n%s", tc.why, lb.String())
			}
			for range 2 { // the spare forked with the server, and one forked later
				a := newAttempt(t)
				p := start(t, r, Spec{Args: warmArgs, Env: env, Dir: a.dir, LogPath: a.log})
				st := p.Wait()
				if !p.Warm() || st.Code != 0 || !slices.Contains(st.StdoutTail, "background loop ok") {
					t.Errorf("warm %v, status %+v, want a warm start whose background loop runs:\n%s", p.Warm(), st, logText(t, a.log))
				}
			}
		})
	}
}

// A warm child's ssl.create_default_context for the CA bundle the server
// loaded returns contexts as the original would (each its own, the file's
// certificates, verifying), taken from those the server made ahead; a
// bundle changed since, SSLKEYLOGFILE, or more calls than were made ahead
// get the original function's result.
func TestWarmChildTLSContextsAreAsTheOriginal(t *testing.T) {
	venv := sdkVenv(t)
	bundles, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages", "certifi", "cacert.pem"))
	if len(bundles) == 0 {
		t.Skip("no certifi bundle in the venv")
	}
	pem, err := os.ReadFile(bundles[0])
	if err != nil {
		t.Fatal(err)
	}
	certs := regexp.MustCompile(`(?s)-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n`).FindAll(pem, -1)
	if len(certs) < 3 {
		t.Fatalf("%d certificates in %s", len(certs), bundles[0])
	}
	cafile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(cafile, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	// The runtime makes four contexts for the bundle (two more than the
	// server made ahead) and says what each holds.
	runtime := `import os, ssl
def main():
    f = os.environ["SSL_CERT_FILE"]
    ctxs = [ssl.create_default_context(cafile=f) for _ in range(4)]
    want = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    want.load_verify_locations(cafile=f)
    n = len(want.get_ca_certs())
    print("made ahead:", hasattr(ssl.create_default_context, "__wrapped__"))
    print("distinct:", len({id(c) for c in ctxs}) == 4)
    print("as the original:", all(len(c.get_ca_certs()) == n and c.verify_mode == ssl.CERT_REQUIRED and c.check_hostname for c in ctxs))
    print("keylog:", {c.keylog_filename for c in ctxs})
    print("certificates:", n)
    return 0
`
	fake := standInSDK(t, runtime, nil)
	r, _ := newWarmRunner(t, venv, "none")
	env := warmEnv("PYTHONPATH="+fake, "SSL_CERT_FILE="+cafile)
	waitWarm(t, r, env)
	run := func(env []string) []string {
		t.Helper()
		a := newAttempt(t)
		p := start(t, r, Spec{Args: warmArgs, Env: env, Dir: a.dir, LogPath: a.log})
		st := p.Wait()
		if !p.Warm() || st.Code != 0 {
			t.Fatalf("warm %v, status %+v:\n%s", p.Warm(), st, logText(t, a.log))
		}
		return st.StdoutTail
	}
	check := func(out []string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !slices.Contains(out, w) {
				t.Errorf("stdout %q, want %q", out, w)
			}
		}
	}
	common := []string{"made ahead: True", "distinct: True", "as the original: True"}
	check(run(env), append(common, "keylog: {None}", "certificates: "+strconv.Itoa(len(certs)))...)
	check(run(append(slices.Clone(env), "SSLKEYLOGFILE=/dev/null")), append(common, "keylog: {'/dev/null'}")...)
	// The bundle changes: what the server made ahead is stale.
	later := time.Now().Add(time.Minute)
	if err := os.WriteFile(cafile, slices.Concat(certs[:2]...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(cafile, later, later); err != nil {
		t.Fatal(err)
	}
	check(run(env), append(common, "certificates: 2")...)
}
