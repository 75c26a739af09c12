package kube

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
)

// The Kubernetes Events of an attempt's Pod show in the action's history
// as cluster events of that attempt, each once, however often the driver
// looks at the Pod.
func TestPodEventsInHistory(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t))
	release := filepath.Join(h.fixtures, "release-podevents")
	key := h.run("rpodevents", `while [ ! -e "$FIXTURES/release-podevents" ]; do sleep 0.1; done; `+succeed, taskOpts{})
	pod := h.running(key, 1)
	at := metav1.NewTime(time.Now().Truncate(time.Second))
	for _, ev := range []struct{ name, typ, reason, msg string }{
		{"pulled", corev1.EventTypeNormal, "Pulled", "Successfully pulled image \"python:3.12\""},
		{"backoff", corev1.EventTypeWarning, "BackOff", "Back-off pulling image \"sidecar\""},
	} {
		err := h.k.Create(h.ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: pod.Name + "." + ev.name, Namespace: pod.Namespace},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
			Reason:         ev.reason, Message: ev.msg, Type: ev.typ,
			Source: corev1.EventSource{Component: "kubelet"}, Count: 1, FirstTimestamp: at, LastTimestamp: at,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A change of the Pod makes the driver look at its events.
	h.touchPod(pod, "1")
	h.eventually("the Pod's events in the history", func() bool {
		d, err := h.state.Details(h.ctx, h.action(key))
		return err == nil && len(d.GetAttempts()[0].GetClusterEvents()) == 2
	})
	// A successor driver (a restarted manager) looks again and reports
	// nothing twice.
	h.stop()
	d2 := New(h.state, h.cluster.Config, h.d.cfg, t.TempDir(), func() string { return "127.0.0.1:1" }, testLog())
	h.start(d2, true)
	rv := h.touchPod(pod, "2")
	h.eventually("the successor to look at the Pod's events", func() bool {
		d2.mu.Lock()
		defer d2.mu.Unlock()
		seen := d2.podEvents[key]
		if seen == nil {
			return false
		}
		looked, err := strconv.ParseInt(seen.podRV, 10, 64)
		return err == nil && looked >= rv
	})
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a := h.terminal(key, phase.Succeeded)
	d, err := h.state.Details(h.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.GetAttempts()) != 1 {
		t.Fatalf("%d attempts, want 1", len(d.GetAttempts()))
	}
	att := d.GetAttempts()[0]
	var got []string
	for _, ce := range att.GetClusterEvents() {
		got = append(got, ce.GetSourceComponent()+"/"+ce.GetType().String()+"/"+ce.GetReason())
	}
	for _, want := range []string{"kubelet/TYPE_NORMAL/Pulled", "kubelet/TYPE_WARNING/BackOff"} {
		if n := strings.Count(strings.Join(got, " "), want); n != 1 {
			t.Errorf("cluster events %v: %s shows %d times, want once", got, want, n)
		}
	}
	if att.GetCluster() != "kubernetes" {
		t.Errorf("cluster %q, want kubernetes", att.GetCluster())
	}
	var phases []string
	for _, pt := range att.GetPhaseTransitions() {
		phases = append(phases, pt.GetPhase().String())
	}
	if strings.Join(phases, ",") != "ACTION_PHASE_QUEUED,ACTION_PHASE_INITIALIZING,ACTION_PHASE_RUNNING,ACTION_PHASE_SUCCEEDED" {
		t.Errorf("transitions %v: a report within a phase must not add one", phases)
	}
}

// touchPod changes pod's labels, as a status change would change it, and
// returns its new resource version.
func (h *harness) touchPod(pod *corev1.Pod, v string) int64 {
	h.t.Helper()
	var rv int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := h.k.Get(h.ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		cur.Labels["e2e-touched"] = v
		if err := h.k.Update(h.ctx, cur); err != nil {
			return err
		}
		var err error
		rv, err = strconv.ParseInt(cur.ResourceVersion, 10, 64)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return rv
}
