package kube

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/loglink"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/requrl"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// dashboard is a log system's URL using every Pod placeholder.
const dashboard = "https://dash.example.com/{{ .namespace }}/{{ .podName }}?uid={{ .podUID }}&c={{ .containerName }}" +
	"&id={{ .containerID }}&node={{ .nodeName }}&from={{ .podRFC3339StartTime }}&unix={{ .podUnixStartTime }}&a={{ .attempt }}"

// Each configured link is rendered with the attempt's Pod: its name, UID,
// namespace, node, the task's container and its start; the default link
// is the manager's log endpoint of the attempt.
func TestLogLinksRenderThePodsValues(t *testing.T) {
	key := store.RunKey{Project: "p", Domain: "development", RunName: "r1"}.Action("a0")
	d := &Driver{logTemplates: parseLogLinks([]config.LogLink{config.DefaultKubernetesLogLink, {Name: "dashboard", URL: dashboard}}, t.Logf)}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "flyte", Name: "r1-a0-2", UID: "0b6c-uid"},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{StartTime: &metav1.Time{Time: start},
			ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, ContainerID: "fake://abc"}}},
	}
	// The task's own links, as the SDK writes them (links= of a task).
	spec := &task.TaskSpec{TaskTemplate: &core.TaskTemplate{Id: &core.Identifier{Name: "wf.train", Version: "v1"}, Metadata: &core.TaskMetadata{LogLinks: []*core.TaskLog{
		{Name: "wandb", Uri: "https://wandb.ai/p/runs/{{.runName}}-{{.actionName}}?pod={{.podName}}&x={{ .nope }}&t={{ .taskID }}@{{ .taskVersion }}"},
		{Name: "logs", Uri: "https://shadowed.example.com/"},
		{Name: "script", Uri: "javascript:alert(1)"},
	}}}}
	links := d.logLinks(key, 2, pod, spec)
	want := []string{
		"logs " + loglink.Path(runstate.LogAttempt(key, 2)),
		"dashboard https://dash.example.com/flyte/r1-a0-2?uid=0b6c-uid&c=task&id=abc&node=node-1&from=2026-01-02T03:04:05Z&unix=1767323045&a=2",
		"wandb https://wandb.ai/p/runs/r1-a0?pod=r1-a0-2&x=&t=wf.train@v1",
	}
	if len(links) != len(want) {
		t.Fatalf("links %v, want %v", links, want)
	}
	for i, l := range links {
		if got := l.GetName() + " " + l.GetUri(); got != want[i] {
			t.Errorf("link %d = %q, want %q", i, got, want[i])
		}
	}
	// No links configured: the manager's log endpoint, and the task's.
	links = (&Driver{}).logLinks(key, 2, pod, spec)
	if len(links) != 2 || links[0].GetUri() != loglink.Path(runstate.LogAttempt(key, 2)) || links[1].GetName() != "wandb" {
		t.Errorf("without templates: %v", links)
	}
}

// On the cluster: an attempt's details list the configured links, rendered
// with its real Pod, and the manager's on the reading client's address.
func TestLogLinksOnTheCluster(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t), func(c *config.KubernetesExecutor) {
		c.LogLinks = []config.LogLink{config.DefaultKubernetesLogLink, {Name: "dashboard", URL: dashboard}}
	})
	for _, script := range []string{succeed, "sleep 1; " + succeed} {
		key := h.run(fmt.Sprintf("rlinks%d", len(script)), script, taskOpts{})
		a := h.terminal(key, phase.Succeeded)
		d, err := h.state.Details(requrl.WithBaseURL(h.ctx, "http://mgr:8090"), a)
		if err != nil {
			t.Fatal(err)
		}
		at := d.GetAttempts()[0]
		if len(at.GetLogInfo()) != 2 || !at.GetLogsAvailable() {
			t.Fatalf("%s: logs available %v, links %v", script, at.GetLogsAvailable(), at.GetLogInfo())
		}
		if l := at.GetLogInfo()[0]; l.GetName() != "logs" || l.GetUri() != "http://mgr:8090"+loglink.Path(runstate.LogAttempt(key, 1)) {
			t.Errorf("%s: manager link %v", script, l)
		}
		name := h.d.nameOf(key)
		re := regexp.MustCompile(`^https://dash\.example\.com/` + regexp.QuoteMeta(name.Namespace+"/"+podNameFor(name.Name, 1)) +
			`\?uid=[0-9a-f-]{36}&c=task&id=[^&]*&node=` + regexp.QuoteMeta(h.cluster.Agent.NodeName()) + `&from=\d{4}-\d\d-\d\dT[^&]+Z&unix=\d+&a=1$`)
		if l := at.GetLogInfo()[1]; l.GetName() != "dashboard" || !re.MatchString(l.GetUri()) || strings.Contains(l.GetUri(), "{{") {
			t.Errorf("%s: dashboard link %v, want it to match %s", script, l, re)
		}
	}
}
