package runs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/sdktest"
)

// sdkScript drives the SDK's own deploy and read paths against the
// manager: flyte.deploy (DeployTask per task; no code bundle with
// copy_style="none"), remote.Task.get with a version and with
// auto_version="latest" (ListTasks name EQUAL, created_at desc, limit 1,
// then GetTaskDetails), remote.Task.listall (by name, by environment,
// entrypoints), remote.Project and remote.User. It prints one RESULT line.
const sdkScript = `
import json, sys

import flyte
import flyte.errors
import flyte.remote as remote

endpoint = sys.argv[1]
flyte.init(endpoint=endpoint, insecure=True, project="flytesnacks", domain="development")

env = flyte.TaskEnvironment(name="sdkenv")


@env.task
async def hello(x: int) -> int:
    return x + 1


@env.task(entrypoint=True)
async def main(x: int = 3) -> int:
    return await hello(x)


changed = flyte.TaskEnvironment(name="sdkenv", env_vars={"CHANGED": "yes"})
changed_hello = changed.task(hello.func)

out = {}
flyte.deploy(env, copy_style="none", version="v1")
flyte.deploy(env, copy_style="none", version="v1")      # the same again: OK
flyte.deploy(changed, copy_style="none", version="v1")  # a different spec: ALREADY_EXISTS, which the SDK skips
flyte.deploy(env, copy_style="none", version="v2")

latest = remote.Task.get("sdkenv.main", auto_version="latest").fetch()
out["latest"] = {"version": latest.version, "defaults": list(latest.default_input_args), "type": latest.task_type}
v1 = remote.Task.get("sdkenv.hello", version="v1").fetch()
out["v1"] = {"version": v1.version, "required": list(v1.required_args)}

out["all"] = sorted(f"{t.name}@{t.version}" for t in remote.Task.listall())
out["by_name"] = [t.version for t in remote.Task.listall(by_task_name="sdkenv.hello", sort_by=("created_at", "desc"))]
out["by_env"] = sorted(t.name for t in remote.Task.listall(by_task_env="sdkenv", limit=1000))
out["entrypoints"] = sorted(f"{t.name}@{t.version}" for t in remote.Task.listall(entrypoint=True))

missing = []
for get in (lambda: remote.Task.get("sdkenv.nope", auto_version="latest").fetch(),
            lambda: remote.Task.get("sdkenv.hello", version="v9").fetch()):
    try:
        get()
        missing.append("found")
    except flyte.errors.RemoteTaskNotFoundError as e:
        missing.append("not found")
out["missing"] = missing

remote.Project.create(id="sdkproj", name="SDK project", description="from the SDK", labels={"team": "sdk"})
p = remote.Project.get("sdkproj")
out["project"] = {"id": p.pb2.id, "name": p.pb2.name, "labels": dict(p.pb2.labels.values),
                  "domains": [d.id for d in p.pb2.domains]}
remote.Project.update(id="sdkproj", state="archived")
out["active"] = sorted(p.pb2.id for p in remote.Project.listall())
out["archived"] = sorted(p.pb2.id for p in remote.Project.listall(archived=True))

out["subject"] = remote.User.get().subject()
print("RESULT " + json.dumps(out))
`

// sdkPython is the interpreter of the flyte SDK virtualenv (sdktest.Venv).
func sdkPython(t *testing.T) string { return sdktest.Python(t) }

type sdkResult struct {
	Latest struct {
		Version  string
		Defaults []string
		Type     string
	}
	V1 struct {
		Version  string
		Required []string
	}
	All         []string
	ByName      []string `json:"by_name"`
	ByEnv       []string `json:"by_env"`
	Entrypoints []string
	Missing     []string
	Project     struct {
		ID      string
		Name    string
		Labels  map[string]string
		Domains []string
	}
	Active   []string
	Archived []string
	Subject  string
}

func TestRealSDKTasksAndProjects(t *testing.T) {
	py := sdkPython(t)
	h := newHarness(t, "sqlite://"+filepath.Join(t.TempDir(), "manager.db"), config.Projects{AutoCreate: true})

	work := t.TempDir()
	script := filepath.Join(work, "deploy_tasks.py")
	if err := os.WriteFile(script, []byte(sdkScript), 0o644); err != nil {
		t.Fatal(err)
	}
	// localhost:<port>, as a user types it; insecure=True makes it http://.
	endpoint := "localhost:" + strconv.Itoa(h.srv.Listener.Addr().(*net.TCPAddr).Port)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, script, endpoint)
	cmd.Dir = work
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + work,
		"DO_NOT_TRACK=1",
		"FLYTE_DISABLE_TELEMETRY=true",
		"FLYTE_DISABLE_SENTRY=true",
		"PYTHONUNBUFFERED=1",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("SDK script failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("SDK stdout:\n%s\nSDK stderr:\n%s", stdout.String(), stderr.String())
	var line string
	for l := range strings.Lines(stdout.String()) {
		if rest, ok := strings.CutPrefix(l, "RESULT "); ok {
			line = rest
		}
	}
	var got sdkResult
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("no result from the SDK (%v)\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}

	if got.Latest.Version != "v2" || !slices.Equal(got.Latest.Defaults, []string{"x"}) || got.Latest.Type != "python" {
		t.Errorf("latest sdkenv.main = %+v", got.Latest)
	}
	if got.V1.Version != "v1" || !slices.Equal(got.V1.Required, []string{"x"}) {
		t.Errorf("sdkenv.hello@v1 = %+v", got.V1)
	}
	wantAll := []string{"sdkenv.hello@v1", "sdkenv.hello@v2", "sdkenv.main@v1", "sdkenv.main@v2"}
	if !slices.Equal(got.All, wantAll) {
		t.Errorf("listall = %v, want %v", got.All, wantAll)
	}
	if !slices.Equal(got.ByName, []string{"v2", "v1"}) {
		t.Errorf("listall(by_task_name) = %v", got.ByName)
	}
	if !slices.Equal(got.ByEnv, []string{"sdkenv.hello", "sdkenv.hello", "sdkenv.main", "sdkenv.main"}) {
		t.Errorf("listall(by_task_env) = %v", got.ByEnv)
	}
	if !slices.Equal(got.Entrypoints, []string{"sdkenv.main@v1", "sdkenv.main@v2"}) {
		t.Errorf("listall(entrypoint=True) = %v", got.Entrypoints)
	}
	if !slices.Equal(got.Missing, []string{"not found", "not found"}) {
		t.Errorf("missing tasks: %v", got.Missing)
	}
	if got.Project.ID != "sdkproj" || got.Project.Name != "SDK project" || got.Project.Labels["team"] != "sdk" || len(got.Project.Domains) != 3 {
		t.Errorf("project = %+v", got.Project)
	}
	if !slices.Equal(got.Active, []string{"flytesnacks"}) || !slices.Equal(got.Archived, []string{"sdkproj"}) {
		t.Errorf("active %v, archived %v", got.Active, got.Archived)
	}
	if got.Subject != "anonymous" {
		t.Errorf("UserInfo subject = %q", got.Subject)
	}

	// The conflicting redeploy of v1 got ALREADY_EXISTS, which the SDK
	// reports and skips, and changed nothing: v1 keeps its spec.
	if !strings.Contains(stderr.String(), "Task sdkenv.hello already exists, skipping") {
		t.Errorf("the SDK did not report the conflicting redeploy as existing:\n%s", stderr.String())
	}
	d, err := getTask(ctx, h, &task.TaskIdentifier{Project: "flytesnacks", Domain: "development", Name: "sdkenv.hello", Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range d.GetSpec().GetTaskTemplate().GetContainer().GetEnv() {
		if kv.GetKey() == "CHANGED" {
			t.Errorf("the conflicting redeploy replaced v1's spec: %v", d.GetSpec().GetTaskTemplate().GetContainer().GetEnv())
		}
	}
	if md := d.GetMetadata(); md.GetShortName() != "hello" || md.GetEnvironmentName() != "sdkenv" {
		t.Errorf("metadata of sdkenv.hello@v1 = %v", md)
	}

	// The CLI's listing and detail commands render what we answer.
	flyte := filepath.Join(filepath.Dir(py), "flyte")
	for _, c := range []struct {
		args    []string
		want    []string
		notWant []string
	}{
		{[]string{"get", "task", "-p", "flytesnacks", "-d", "development"}, []string{"sdkenv.hello", "sdkenv.main", "v2"}, nil},
		{[]string{"get", "task", "sdkenv.main", "-p", "flytesnacks", "-d", "development"}, []string{"sdkenv.main", "v1", "v2"}, nil},
		{[]string{"get", "task", "sdkenv.hello", "v1", "-p", "flytesnacks", "-d", "development"}, []string{"sdkenv.hello", "v1"}, nil},
		{[]string{"get", "task", "--entrypoint", "-p", "flytesnacks", "-d", "development"}, []string{"sdkenv.main"}, []string{"sdkenv.hello"}},
		{[]string{"get", "project"}, []string{"flytesnacks"}, []string{"sdkproj"}},
		{[]string{"get", "project", "--archived"}, []string{"sdkproj"}, []string{"flytesnacks"}},
		{[]string{"get", "project", "sdkproj"}, []string{"SDK project"}, nil},
	} {
		args := append([]string{"--endpoint", endpoint, "--insecure", "--output-format", "json"}, c.args...)
		cli := exec.CommandContext(ctx, flyte, args...)
		cli.Dir, cli.Env = work, cmd.Env
		out, err := cli.CombinedOutput()
		if err != nil {
			t.Errorf("flyte %s: %v\n%s", strings.Join(c.args, " "), err, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("flyte %s does not show %q:\n%s", strings.Join(c.args, " "), w, out)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(string(out), w) {
				t.Errorf("flyte %s shows %q:\n%s", strings.Join(c.args, " "), w, out)
			}
		}
	}
}
