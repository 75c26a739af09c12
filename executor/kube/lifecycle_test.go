package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// The lifecycle of actions on a cluster, one step table on one cluster:
// each case submits a run, does something to it, and checks how it ended in
// the database and on its TaskAction.
func TestLifecycle(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t))
	for _, tc := range []struct {
		name   string
		script string
		opts   taskOpts
		act    func(t *testing.T, key store.ActionKey)
		want   phase.Phase
		check  func(t *testing.T, a *store.Action, ta *v1.TaskAction)
	}{{
		name: "user retry",
		// The first attempt reports a recoverable error, the second succeeds.
		script: `if [ ! -e "$FIXTURES/retried" ]; then touch "$FIXTURES/retried"; cp "$FIXTURES/recoverable.pb" "$2/error.pb"; exit 1; fi; ` + succeed,
		opts:   taskOpts{retries: 1},
		want:   phase.Succeeded,
		check: func(t *testing.T, a *store.Action, ta *v1.TaskAction) {
			if a.Attempts != 2 || ta.Status.Attempts != 2 {
				t.Errorf("attempts %d (TaskAction %d), want 2", a.Attempts, ta.Status.Attempts)
			}
		},
	}, {
		name:   "crash without retries",
		script: `echo boom >&2; exit 3`,
		want:   phase.Failed,
		check: func(t *testing.T, a *store.Action, ta *v1.TaskAction) {
			if condition(ta, v1.ConditionFailed) != "PermanentFailure/True" || ta.Status.ErrorState == nil ||
				ta.Status.ErrorState.Kind != v1.ErrorKindUser {
				t.Errorf("conditions %v, error state %+v", ta.Status.Conditions, ta.Status.ErrorState)
			}
		},
	}, {
		name:   "timeout",
		script: `sleep 600`,
		opts:   taskOpts{timeout: 2 * time.Second},
		want:   phase.TimedOut,
		check: func(t *testing.T, a *store.Action, ta *v1.TaskAction) {
			if condition(ta, v1.ConditionFailed) != "TimedOut/True" {
				t.Errorf("conditions %v", ta.Status.Conditions)
			}
		},
	}, {
		name:   "abort through the API",
		script: `sleep 600`,
		act: func(t *testing.T, key store.ActionKey) {
			h.running(key, 1)
			if err := h.state.Abort(h.ctx, key, "stop it", "tester"); err != nil {
				t.Fatal(err)
			}
		},
		want: phase.Aborted,
		check: func(t *testing.T, a *store.Action, ta *v1.TaskAction) {
			if condition(ta, v1.ConditionFailed) != "Aborted/True" {
				t.Errorf("conditions %v", ta.Status.Conditions)
			}
			h.podGone(a.ActionKey, 1)
		},
	}, {
		name:   "abort by deleting the TaskAction",
		script: `sleep 600`,
		act: func(t *testing.T, key store.ActionKey) {
			h.running(key, 1)
			ta, err := h.taskAction(key)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.k.Delete(h.ctx, ta); err != nil {
				t.Fatal(err)
			}
		},
		want: phase.Aborted,
		check: func(t *testing.T, a *store.Action, ta *v1.TaskAction) {
			if ta != nil {
				t.Errorf("the deleted TaskAction is still there: %+v", ta.ObjectMeta)
			}
			h.podGone(a.ActionKey, 1)
		},
	}, {
		name:   "the Pod deleted while it runs",
		script: `if [ ! -e "$FIXTURES/evicted" ]; then touch "$FIXTURES/evicted"; sleep 600; fi; ` + succeed,
		act: func(t *testing.T, key store.ActionKey) {
			pod := h.running(key, 1)
			h.started("evicted")
			if err := h.k.Delete(h.ctx, pod); err != nil {
				t.Fatal(err)
			}
		},
		want: phase.Succeeded,
		check: func(t *testing.T, a *store.Action, ta *v1.TaskAction) {
			atts, err := h.st.Actions.Attempts(h.ctx, a.ActionKey)
			if err != nil || a.Attempts != 2 || len(atts) != 2 {
				t.Fatalf("attempts %d %+v %v", a.Attempts, atts, err)
			}
			if e := v1.ErrorStateOf(atts[0].ErrorInfo); e == nil || e.Kind != v1.ErrorKindSystem || !strings.Contains(e.Message, "deleted") {
				t.Errorf("first attempt's error %+v, want a system error saying the Pod was deleted", e)
			}
		},
	}, {
		name:   "the TaskAction vanished behind the manager's back",
		script: `if [ ! -e "$FIXTURES/vanished" ]; then touch "$FIXTURES/vanished"; sleep 600; fi; ` + succeed,
		act: func(t *testing.T, key store.ActionKey) {
			h.running(key, 1)
			h.started("vanished")
			var ta *v1.TaskAction
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // the driver writes its status meanwhile
				var err error
				if ta, err = h.taskAction(key); err != nil {
					return err
				}
				ta.Finalizers = nil // as a careless operator might
				return h.k.Update(h.ctx, ta)
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := h.k.Delete(h.ctx, ta); err != nil {
				t.Fatal(err)
			}
		},
		want: phase.Succeeded,
		check: func(t *testing.T, a *store.Action, ta *v1.TaskAction) {
			atts, _ := h.st.Actions.Attempts(h.ctx, a.ActionKey)
			if a.Attempts != 2 || len(atts) != 2 || !strings.Contains(v1.ErrorStateOf(atts[0].ErrorInfo).Message, "deleted outside the manager") {
				t.Errorf("attempts %d, first error %+v: want a visible retry", a.Attempts, v1.ErrorStateOf(atts[0].ErrorInfo))
			}
			if ta == nil {
				t.Error("the TaskAction was not created again")
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			name := "r" + strings.ReplaceAll(tc.name, " ", "")
			if len(name) > 30 {
				name = name[:30]
			}
			name = strings.ToLower(strings.ReplaceAll(name, "'", ""))
			key := h.run(name, tc.script, tc.opts)
			if tc.act != nil {
				tc.act(t, key)
			}
			a := h.terminal(key, tc.want)
			var ta *v1.TaskAction
			h.eventually("the TaskAction to show the end", func() bool {
				got, err := h.taskAction(key)
				if apierrors.IsNotFound(err) {
					ta = nil
					return a.Phase == phase.Aborted || tc.want == phase.Aborted
				}
				ta = got
				return err == nil && got.IsTerminal()
			})
			tc.check(t, a, ta)
		})
	}
}

// running waits until attempt n of key runs and returns its Pod.
func (h *harness) running(key store.ActionKey, n int32) *corev1.Pod {
	h.t.Helper()
	var pod *corev1.Pod
	h.eventually("attempt to run", func() bool {
		var err error
		pod, err = h.pod(key, n)
		return err == nil && pod.Status.Phase == corev1.PodRunning && h.action(key).Phase == phase.Running
	})
	return pod
}

// podGone waits until attempt n's Pod of key is deleted or ended.
func (h *harness) podGone(key store.ActionKey, n int32) {
	h.t.Helper()
	h.eventually("the Pod to stop", func() bool {
		pod, err := h.pod(key, n)
		return apierrors.IsNotFound(err) || (err == nil && (pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed))
	})
}
