package config

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// isolate points HOME and the data directory at temp dirs and clears every
// FLYTE_MANAGER_ variable so the machine's environment cannot leak in.
func isolate(t *testing.T) string {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, EnvPrefix) {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	t.Setenv("HOME", t.TempDir())
	return t.TempDir()
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	isolate(t)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	userHome, _ := os.UserHomeDir()
	home := filepath.Join(userHome, ".flyte-manager")
	checks := map[string][2]any{
		"home":                             {c.Home, home},
		"server.host":                      {c.Server.Host, "127.0.0.1"},
		"server.port":                      {c.Server.Port, 8090},
		"server.externalURL":               {c.Server.ExternalURL, ""},
		"server.maxRequestBytes":           {c.Server.MaxRequestBytes, int64(64 << 20)},
		"server.shutdownTimeout":           {c.Server.ShutdownTimeout, 30 * time.Second},
		"server.allowedHosts":              {c.Server.AllowedHosts, []string{}},
		"server.cors.allowedOrigins":       {c.Server.CORS.AllowedOrigins, []string{}},
		"server.bodyReadTimeout":           {c.Server.BodyReadTimeout, 30 * time.Second},
		"server.idleTimeout":               {c.Server.IdleTimeout, 120 * time.Second},
		"server.maxConcurrentStreams":      {c.Server.MaxConcurrentStreams, 250},
		"server.maxStreamsPerClient":       {c.Server.MaxStreamsPerClient, 1000},
		"server.maxGlobalWatchesPerClient": {c.Server.MaxGlobalWatchesPerClient, 32},
		"server.orgs.default":              {c.Server.Orgs.Default, "local"},
		"server.orgs.separate":             {c.Server.Orgs.Separate, false},
		"database.dsn":                     {c.Database.DSN, "sqlite://" + home + "/flyte-manager.db"},
		"storage.url":                      {c.Storage.URL, "file://" + home + "/blobs"},
		"storage.signingKey":               {c.Storage.SigningKey, ""},
		"executor.type":                    {c.Executor.Type, "local"},
		"executor.local.workDir":           {c.Executor.Local.WorkDir, filepath.Join(home, "work")},
		"executor.local.maxParallelism":    {c.Executor.Local.MaxParallelism, 2 * runtime.NumCPU()},
		"executor.local.systemRetries":     {c.Executor.Local.SystemRetries, 3},
		"executor.local.leaseTTL":          {c.Executor.Local.LeaseTTL, 15 * time.Second},
		"executor.local.maxLogBytes":       {c.Executor.Local.MaxLogBytes, int64(100 << 20)},
		"executor.local.warmStart":         {c.Executor.Local.WarmStart, true},
		"executor.local.runAs":             {c.Executor.Local.RunAs, RunAs{Mode: "range", FirstUID: 2000000000, Count: 65536}},
		"executor.kubernetes.copilotImage": {c.Executor.Kubernetes.CopilotImage, "flyte-manager:latest"},
		"projects.autoCreate":              {c.Projects.AutoCreate, true},
		"projects.seed":                    {c.Projects.Seed, []string{"flytesnacks"}},
		"log.level":                        {c.Log.Level, "info"},
		"log.format":                       {c.Log.Format, "text"},
		"secrets.key":                      {c.Secrets.Key, ""},
		"secrets.keyFile":                  {c.Secrets.KeyFile, filepath.Join(home, "secrets.keyring")},
	}
	for key, got := range checks {
		if !reflect.DeepEqual(got[0], got[1]) {
			t.Errorf("%s = %#v, want %#v", key, got[0], got[1])
		}
	}
	if c.Server.ListenAddr() != "127.0.0.1:8090" {
		t.Errorf("ListenAddr = %q", c.Server.ListenAddr())
	}
}

func TestPythonDefaultPrefersVenv(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".venv", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(filepath.Join(dir, ".venv", "bin"))
	got, _ := filepath.EvalSymlinks(c.Executor.Local.Python)
	if got != want {
		t.Errorf("executor.local.python = %q, want %q", c.Executor.Local.Python, want)
	}

	// Without a .venv, the directory of a0 on PATH.
	empty := t.TempDir()
	t.Chdir(empty)
	bin := t.TempDir()
	writeFile(t, bin, "a0", "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(bin, "a0"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	c, err = Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Executor.Local.Python != bin {
		t.Errorf("executor.local.python = %q, want %q", c.Executor.Local.Python, bin)
	}
}

func TestHomeDerivesPaths(t *testing.T) {
	home := isolate(t)
	t.Setenv("FLYTE_MANAGER_HOME", home)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Home != home {
		t.Errorf("home = %q, want %q", c.Home, home)
	}
	if want := "sqlite://" + home + "/flyte-manager.db"; c.Database.DSN != want {
		t.Errorf("database.dsn = %q, want %q", c.Database.DSN, want)
	}
	if want := "file://" + home + "/blobs"; c.Storage.URL != want {
		t.Errorf("storage.url = %q, want %q", c.Storage.URL, want)
	}
	if want := filepath.Join(home, "work"); c.Executor.Local.WorkDir != want {
		t.Errorf("executor.local.workDir = %q, want %q", c.Executor.Local.WorkDir, want)
	}
}

func TestEnvOverrides(t *testing.T) {
	isolate(t)
	t.Setenv("FLYTE_MANAGER_SERVER_PORT", "9191")
	t.Setenv("FLYTE_MANAGER_DATABASE_DSN", "postgres://fm:pw@db:5432/fm")
	t.Setenv("FLYTE_MANAGER_SERVER_SHUTDOWNTIMEOUT", "5s")
	t.Setenv("FLYTE_MANAGER_SERVER_MAX_REQUEST_BYTES", "1024")
	t.Setenv("FLYTE_MANAGER_PROJECTS_SEED", "a,b")
	t.Setenv("FLYTE_MANAGER_PROJECTS_AUTOCREATE", "false")
	t.Setenv("FLYTE_MANAGER_EXECUTOR_LOCAL_MAXPARALLELISM", "7")
	t.Setenv("FLYTE_MANAGER_SERVER_ALLOWED_HOSTS", "flyte.example.com,*.corp.example")
	t.Setenv("FLYTE_MANAGER_SERVER_CORS_ALLOWEDORIGINS", "https://ui.example.com")
	t.Setenv("FLYTE_MANAGER_SERVER_BODYREADTIMEOUT", "3s")

	dir := t.TempDir()
	f := writeFile(t, dir, "c.yaml", "server:\n  port: 1111\n  host: 0.0.0.0\n")
	c, err := Load(Sources{Files: []string{f}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Port != 9191 {
		t.Errorf("env must win over file: port = %d", c.Server.Port)
	}
	if c.Server.Host != "0.0.0.0" {
		t.Errorf("host from file = %q", c.Server.Host)
	}
	if c.Database.DSN != "postgres://fm:pw@db:5432/fm" {
		t.Errorf("dsn = %q", c.Database.DSN)
	}
	if c.Server.ShutdownTimeout != 5*time.Second {
		t.Errorf("shutdownTimeout = %s", c.Server.ShutdownTimeout)
	}
	if c.Server.MaxRequestBytes != 1024 {
		t.Errorf("maxRequestBytes = %d", c.Server.MaxRequestBytes)
	}
	if !reflect.DeepEqual(c.Projects.Seed, []string{"a", "b"}) {
		t.Errorf("seed = %q", c.Projects.Seed)
	}
	if c.Projects.AutoCreate {
		t.Error("autoCreate should be false")
	}
	if c.Executor.Local.MaxParallelism != 7 {
		t.Errorf("maxParallelism = %d", c.Executor.Local.MaxParallelism)
	}
	if !reflect.DeepEqual(c.Server.AllowedHosts, []string{"flyte.example.com", "*.corp.example"}) {
		t.Errorf("allowedHosts = %q", c.Server.AllowedHosts)
	}
	if !reflect.DeepEqual(c.Server.CORS.AllowedOrigins, []string{"https://ui.example.com"}) {
		t.Errorf("cors.allowedOrigins = %q", c.Server.CORS.AllowedOrigins)
	}
	if c.Server.BodyReadTimeout != 3*time.Second {
		t.Errorf("bodyReadTimeout = %s", c.Server.BodyReadTimeout)
	}

	// Flags (overrides) win over env.
	c, err = Load(Sources{Files: []string{f}, Overrides: map[string]any{"server.port": 2222}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Port != 2222 {
		t.Errorf("override must win over env: port = %d", c.Server.Port)
	}
}

func TestFilesMergeInOrderWithGlob(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	confd := filepath.Join(dir, "config.d")
	if err := os.Mkdir(confd, 0o755); err != nil {
		t.Fatal(err)
	}
	// Written out of order: the glob must merge them by name.
	writeFile(t, confd, "20-override.yaml", "server:\n  port: 2000\nlog:\n  format: json\nprojects:\n  seed: [x]\n")
	writeFile(t, confd, "10-base.yaml", "server:\n  port: 1000\n  host: 0.0.0.0\n  shutdownTimeout: 1m30s\nlog:\n  level: debug\nprojects:\n  seed: [a, b, c]\n")
	last := writeFile(t, dir, "last.yaml", "log:\n  level: warn\n")

	c, err := Load(Sources{Files: []string{filepath.Join(confd, "*.yaml"), last}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Port != 2000 {
		t.Errorf("port = %d, want 2000 (later file wins)", c.Server.Port)
	}
	if c.Server.Host != "0.0.0.0" {
		t.Errorf("host = %q, want 0.0.0.0 (kept from earlier file)", c.Server.Host)
	}
	if c.Server.ShutdownTimeout != 90*time.Second {
		t.Errorf("shutdownTimeout = %s", c.Server.ShutdownTimeout)
	}
	if c.Log.Level != "warn" || c.Log.Format != "json" {
		t.Errorf("log = %+v", c.Log)
	}
	if !reflect.DeepEqual(c.Projects.Seed, []string{"x"}) {
		t.Errorf("seed = %q, want [x] (lists are replaced, not appended)", c.Projects.Seed)
	}

	// A directory argument behaves like its *.yaml glob.
	c, err = Load(Sources{Files: []string{confd}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Port != 2000 {
		t.Errorf("directory: port = %d", c.Server.Port)
	}

	if _, err := Load(Sources{Files: []string{filepath.Join(dir, "nothing-*.yaml")}}); err == nil || !strings.Contains(err.Error(), "matches no file") {
		t.Errorf("empty glob: err = %v", err)
	}
	if _, err := Load(Sources{Files: []string{filepath.Join(dir, "missing.yaml")}}); err == nil {
		t.Error("missing file accepted")
	}
}

func TestUnknownKeysRejected(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	cases := map[string]string{
		"server:\n  prot: 1\n":                    `unknown key "server.prot"`,
		"executor:\n  local:\n    pyhton: x\n":    `unknown key "executor.local.pyhton"`,
		"databse:\n  dsn: x\n":                    `unknown key "databse"`,
		"server:\n  port: 1\n  maxRequestByte: 1": `unknown key "server.maxRequestByte"`,
		"server: 8090\n":                          `key "server" must be a mapping`,
	}
	i := 0
	for body, want := range cases {
		i++
		f := writeFile(t, dir, "c"+string(rune('0'+i))+".yaml", body)
		_, err := Load(Sources{Files: []string{f}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want it to contain %s", body, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), f) {
			t.Errorf("%q: err = %v does not name the file", body, err)
		}
	}
	if _, err := Load(Sources{Overrides: map[string]any{"server.nope": 1}}); err == nil {
		t.Error("unknown override accepted")
	}
}

func TestTypeErrorsAndNulls(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	f := writeFile(t, dir, "bad.yaml", "server:\n  shutdownTimeout: soon\n")
	if _, err := Load(Sources{Files: []string{f}}); err == nil || !strings.Contains(err.Error(), "server.shutdownTimeout") {
		t.Errorf("bad duration: err = %v", err)
	}
	// Empty sections and empty files mean "not set".
	f1 := writeFile(t, dir, "empty.yaml", "")
	f2 := writeFile(t, dir, "nulls.yaml", "database:\nserver:\n  host:\n")
	c, err := Load(Sources{Files: []string{f1, f2}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Host != "127.0.0.1" {
		t.Errorf("host = %q", c.Server.Host)
	}
}

func TestValidation(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	f := writeFile(t, dir, "bad.yaml", `
server:
  port: 70000
  maxRequestBytes: 0
  externalURL: "ftp://x"
  allowedHosts: ["ok.example.com", "http://x.example.com", "*.com", "a b", "x:0"]
  cors:
    allowedOrigins: ["https://ui.example.com", "null", "https://ui.example.com/path", "ui.example.com"]
  bodyReadTimeout: 0s
  idleTimeout: -1s
  maxConcurrentStreams: 0
  maxStreamsPerClient: -1
  maxGlobalWatchesPerClient: -2
  orgs:
    default: "a b"
database:
  dsn: mysql://x
  maxOpenConns: -1
storage:
  url: /no/scheme
executor:
  type: nomad
  local:
    maxParallelism: 0
    systemRetries: -1
    leaseTTL: 500ms
    maxLogBytes: 1000
projects:
  seed: ["ok", "not ok"]
log:
  level: loud
  format: xml
`)
	_, err := Load(Sources{Files: []string{f}})
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, key := range []string{
		"server.port:", "server.maxRequestBytes:", "server.externalURL:", "database.dsn:",
		"server.allowedHosts[1]:", "server.allowedHosts[2]:", "server.allowedHosts[3]:", "server.allowedHosts[4]:",
		"server.cors.allowedOrigins[1]:", "server.cors.allowedOrigins[2]:", "server.cors.allowedOrigins[3]:",
		"server.bodyReadTimeout:", "server.idleTimeout:", "server.maxConcurrentStreams:",
		"server.maxStreamsPerClient:", "server.maxGlobalWatchesPerClient:", "server.orgs.default:", "database.maxOpenConns:", "storage.url:", "executor.type:", "executor.local.maxParallelism:",
		"executor.local.systemRetries:", "executor.local.leaseTTL:", "executor.local.maxLogBytes:", "projects.seed[1]:", "log.level:", "log.format:",
	} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s:\n%v", key, err)
		}
	}

	for _, ok := range []string{"server.allowedHosts[0]", "server.cors.allowedOrigins[0]"} {
		if strings.Contains(err.Error(), ok+":") {
			t.Errorf("valid entry %s reported:\n%v", ok, err)
		}
	}

	k := writeFile(t, dir, "kube.yaml", `
storage:
  url: file:///var/lib/flyte
executor:
  type: kubernetes
  kubernetes:
    namespace: Not_A_Namespace
    systemRetries: -1
    leaseTTL: 1ms
    qps: 0
    copilotImage: "my image"
    images:
      registry: "http://registry.example/flyte"
      builderImage: "a b"
      pushSecret: Not_A_Secret
`)
	_, err = Load(Sources{Files: []string{k}})
	for _, key := range []string{"storage.url:", "executor.kubernetes.sharedFileStorage", "executor.kubernetes.namespace:",
		"executor.kubernetes.systemRetries:", "executor.kubernetes.leaseTTL:", "executor.kubernetes.qps:",
		"executor.kubernetes.copilotImage:", "executor.kubernetes.images.registry:", "executor.kubernetes.images.builderImage:",
		"executor.kubernetes.images.pushSecret:"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("kubernetes settings: error does not name %s:\n%v", key, err)
		}
	}
	shared := writeFile(t, dir, "shared.yaml", "storage:\n  url: file:///var/lib/flyte\nexecutor:\n  type: kubernetes\n  kubernetes:\n    sharedFileStorage: true\n")
	if _, err := Load(Sources{Files: []string{shared}}); err != nil {
		t.Errorf("file storage shared with the Pods refused: %v", err)
	}

	ev := writeFile(t, dir, "events.yaml", "events:\n  maxPerAttempt: 0\n  maxAttemptBytes: 100\n  maxEventBytes: 101\n")
	_, err = Load(Sources{Files: []string{ev}})
	for _, key := range []string{"events.maxPerAttempt:", "events.maxEventBytes:"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("events bounds: error does not name %s:\n%v", key, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "events.maxAttemptBytes:") {
		t.Errorf("valid events.maxAttemptBytes reported:\n%v", err)
	}
	typo := writeFile(t, dir, "events-typo.yaml", "events:\n  maxPerAttemp: 10\n")
	if _, err := Load(Sources{Files: []string{typo}}); err == nil || !strings.Contains(err.Error(), "events.maxPerAttemp") {
		t.Errorf("unknown events key: err = %v", err)
	}

	g := writeFile(t, dir, "py.yaml", "executor:\n  local:\n    python: /does/not/exist\n")
	if _, err := Load(Sources{Files: []string{g}}); err == nil || !strings.Contains(err.Error(), "executor.local.python") {
		t.Errorf("missing python dir: err = %v", err)
	}
}

func TestRedacted(t *testing.T) {
	c := Default()
	c.Storage.SigningKey = "super-secret-key"
	c.Secrets.Key = "c2VjcmV0cy1rZXktMzItYnl0ZXMtbG9uZy0uLi4uLi4="
	c.Database.DSN = "postgres://fm:hunter2@db:5432/fm?sslmode=disable"
	r := c.Redacted()
	if r.Secrets.Key != RedactedValue {
		t.Errorf("secrets.key = %q", r.Secrets.Key)
	}
	if r.Storage.SigningKey != RedactedValue {
		t.Errorf("signingKey = %q", r.Storage.SigningKey)
	}
	if strings.Contains(r.Database.DSN, "hunter2") || !strings.Contains(r.Database.DSN, "fm:REDACTED@db:5432") {
		t.Errorf("dsn = %q", r.Database.DSN)
	}
	if c.Storage.SigningKey != "super-secret-key" {
		t.Error("Redacted modified the original")
	}
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"hunter2", "super-secret-key", c.Secrets.Key} {
		if strings.Contains(string(out), secret) {
			t.Errorf("YAML leaks %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{"maxRequestBytes: 67108864", "shutdownTimeout: 30s", "signingKey: REDACTED"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("YAML lacks %q:\n%s", want, out)
		}
	}

	// Every DSN form goes through the one redactor (internal/dsn, which
	// tests each form); the printed configuration shows its result.
	for in, want := range map[string]string{
		"host=db user=fm password=hunter2 dbname=fm":       "host=db user=fm password=REDACTED dbname=fm",
		"host=db password='hunter 2' dbname=fm":            "host=db password=REDACTED dbname=fm",
		"postgres://db/fm?user=fm&Password=hunter2":        "postgres://db/fm?user=fm&Password=REDACTED",
		"postgres://fm:hunter2@db:bad/fm":                  "(unparseable)",
		"sqlite:///var/lib/flyte-manager/flyte-manager.db": "sqlite:///var/lib/flyte-manager/flyte-manager.db",
	} {
		c.Database.DSN = in
		if got := c.Redacted().Database.DSN; got != want {
			t.Errorf("Redacted DSN of %q = %q, want %q", in, got, want)
		}
		out, err := c.YAML()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "hunter") {
			t.Errorf("YAML of DSN %q leaks the password:\n%s", in, out)
		}
	}

	// A configuration error naming the DSN does not show it either.
	isolate(t)
	_, err = Load(Sources{Overrides: map[string]any{"database.dsn": "fm:hunter2@db/fm"}})
	if err == nil || !strings.Contains(err.Error(), "database.dsn") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad DSN: err = %v", err)
	}
}

func TestPrintedConfigLoadsBack(t *testing.T) {
	home := isolate(t)
	t.Setenv("FLYTE_MANAGER_HOME", home)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	f := writeFile(t, t.TempDir(), "printed.yaml", string(out))
	back, err := Load(Sources{Files: []string{f}})
	if err != nil {
		t.Fatalf("printed config does not load back: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(*back, *c) {
		t.Errorf("round trip differs:\n%+v\n%+v", *back, *c)
	}
}

func TestPrepareSigningKey(t *testing.T) {
	home := filepath.Join(t.TempDir(), "nested", "home")
	c := Default()
	c.Home = home
	if err := c.Prepare(); err != nil {
		t.Fatal(err)
	}
	key := c.Storage.SigningKey
	if len(key) < 32 {
		t.Fatalf("signing key %q too short", key)
	}
	info, err := os.Stat(filepath.Join(home, SigningKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("signing.key mode = %o, want 600", info.Mode().Perm())
	}
	again := Default()
	again.Home = home
	if err := again.Prepare(); err != nil {
		t.Fatal(err)
	}
	if again.Storage.SigningKey != key {
		t.Error("signing key not persisted across Prepare calls")
	}
	explicit := Default()
	explicit.Home = home
	explicit.Storage.SigningKey = "configured"
	if err := explicit.Prepare(); err != nil || explicit.Storage.SigningKey != "configured" {
		t.Errorf("configured key replaced: %q, %v", explicit.Storage.SigningKey, err)
	}
}

// executor.local.warmStart is on by default (TestDefaults); a file and the
// environment turn it off, and a value that is not a boolean is an error
// that names the key.
func TestWarmStartKey(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	off := writeFile(t, dir, "off.yaml", "executor:\n  local:\n    warmStart: false\n")
	c, err := Load(Sources{Files: []string{off}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Executor.Local.WarmStart {
		t.Error("warmStart: false in a file left warm start on")
	}
	t.Setenv("FLYTE_MANAGER_EXECUTOR_LOCAL_WARM_START", "false")
	if c, err = Load(Sources{}); err != nil {
		t.Fatal(err)
	} else if c.Executor.Local.WarmStart {
		t.Error("FLYTE_MANAGER_EXECUTOR_LOCAL_WARM_START=false left warm start on")
	}
	t.Setenv("FLYTE_MANAGER_EXECUTOR_LOCAL_WARM_START", "")
	bad := writeFile(t, dir, "bad.yaml", "executor:\n  local:\n    warmStart: sometimes\n")
	if _, err := Load(Sources{Files: []string{bad}}); err == nil || !strings.Contains(err.Error(), "warmStart") {
		t.Errorf("warmStart: sometimes: err = %v, want an error naming the key", err)
	}
}

// executor.local.runAs: every bad value is an error naming its key; a good
// fixed user loads, and the environment sets the mode.
func TestRunAsKeys(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	for _, tc := range []struct{ yaml, key string }{
		{"mode: sometimes", "executor.local.runAs.mode:"},
		{"firstUID: 0", "executor.local.runAs.firstUID:"},
		{"count: 0", "executor.local.runAs.count:"},
		{"firstUID: 4294967000\n      count: 65536", "executor.local.runAs.count:"},
		{"mode: fixed", "executor.local.runAs.uid:"},
		{"mode: fixed\n      uid: 1000\n      gid: 4294967295", "executor.local.runAs.gid:"},
		{"mode: fixed\n      uid: -1", "runAs.uid"},
		{"firstUID: lots", "runAs"},
	} {
		f := writeFile(t, dir, "bad.yaml", "executor:\n  local:\n    runAs:\n      "+tc.yaml+"\n")
		_, err := Load(Sources{Files: []string{f}})
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("runAs %q: err = %v, want an error naming %s", tc.yaml, err, tc.key)
		}
	}
	f := writeFile(t, dir, "fixed.yaml", "executor:\n  local:\n    runAs:\n      mode: fixed\n      uid: 1000\n      gid: 100\n")
	c, err := Load(Sources{Files: []string{f}})
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Executor.Local.RunAs; r.Mode != RunAsFixed || r.UID != 1000 || r.GID != 100 {
		t.Errorf("fixed runAs loaded as %+v", r)
	}
	t.Setenv("FLYTE_MANAGER_EXECUTOR_LOCAL_RUN_AS_MODE", "manager")
	if c, err = Load(Sources{}); err != nil {
		t.Fatal(err)
	} else if c.Executor.Local.RunAs.Mode != RunAsManager {
		t.Errorf("FLYTE_MANAGER_EXECUTOR_LOCAL_RUN_AS_MODE=manager gave mode %q", c.Executor.Local.RunAs.Mode)
	}
}
