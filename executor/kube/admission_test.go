package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// refusedWith checks that key failed at once, without a retry and without
// a Pod, with an error that says each of says.
func (h *harness) refusedWith(key store.ActionKey, says ...string) {
	h.t.Helper()
	a := h.terminal(key, phase.Failed)
	e := v1.ErrorStateOf(a.ErrorInfo)
	if e == nil || e.Code != attempt.CodeLaunchFailed || a.Attempts != 1 {
		h.t.Fatalf("%s: error %+v after %d attempts, want %s after 1", key, e, a.Attempts, attempt.CodeLaunchFailed)
	}
	for _, s := range says {
		if !strings.Contains(e.Message, s) {
			h.t.Errorf("%s: error %q does not say %q", key, e.Message, s)
		}
	}
	if _, err := h.pod(key, 1); !apierrors.IsNotFound(err) {
		h.t.Errorf("%s: a refused action has a Pod (err %v)", key, err)
	}
}

// A project id a namespace name cannot hold (upper case, '_') runs: in the
// shared namespace, and with namespacePerProject in a namespace of its
// own, valid and labelled as the manager's and the project's.
func TestProjectNamespaceNames(t *testing.T) {
	t.Run("shared", func(t *testing.T) {
		h := newHarness(t, dbtest.SQLiteDSN(t))
		key := h.runIn(h.state, "My_Proj", "rcaps", succeed, taskOpts{})
		h.terminal(key, phase.Succeeded)
		if ta, err := h.taskAction(key); err != nil || ta.Namespace != "flyte" {
			t.Fatalf("TaskAction %v: %v", ta.ObjectMeta, err)
		}
	})
	t.Run("perProject", func(t *testing.T) {
		h := newHarness(t, dbtest.SQLiteDSN(t), func(c *config.KubernetesExecutor) { c.NamespacePerProject = true })
		key := h.runIn(h.state, "My_Proj", "rcaps", succeed, taskOpts{})
		h.terminal(key, phase.Succeeded)
		ta, err := h.taskAction(key)
		if err != nil {
			t.Fatal(err)
		}
		want := v1.NamespaceName("My_Proj", "development")
		if ta.Namespace != want || !strings.HasPrefix(want, "my-proj-development-") {
			t.Fatalf("TaskAction in namespace %q, want %q", ta.Namespace, want)
		}
		ns := &corev1.Namespace{}
		if err := h.k.Get(h.ctx, client.ObjectKey{Name: want}, ns); err != nil {
			t.Fatal(err)
		}
		if ns.Labels[LabelManaged] != managedBy || ns.Labels[v1.LabelProject] != "My_Proj" || ns.Labels[v1.LabelDomain] != "development" {
			t.Fatalf("namespace labels %v", ns.Labels)
		}
	})
}

// A namespace the manager did not create is never used, nor one it created
// for another project: the action fails at once, naming the namespace and
// the setting.
func TestForeignNamespaceRefused(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t), func(c *config.KubernetesExecutor) { c.NamespacePerProject = true })
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "q-development"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "o-development", Labels: map[string]string{LabelManaged: managedBy, v1.LabelProject: "o-x", v1.LabelDomain: "development"}}},
	} {
		if err := h.k.Create(h.ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	foreign := h.runIn(h.state, "q", "rforeign", succeed, taskOpts{})
	h.refusedWith(foreign, "namespace q-development", "not created by flyte-manager", "executor.kubernetes.namespacePerProject")
	other := h.runIn(h.state, "o", "rother", succeed, taskOpts{})
	h.refusedWith(other, "namespace o-development belongs to project o-x", "executor.kubernetes.namespacePerProject")
	for _, key := range []store.ActionKey{foreign, other} {
		if _, err := h.taskAction(key); !apierrors.IsNotFound(err) {
			t.Errorf("%s: a TaskAction in a refused namespace (err %v)", key, err)
		}
	}
}

// A task runs as a service account it names only when the configuration
// allows it in its project and domain; otherwise it fails at once, naming
// the account and the setting.
func TestServiceAccountAllowed(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t), func(c *config.KubernetesExecutor) {
		c.ServiceAccount = "runner"
		c.ServiceAccounts = []config.ServiceAccountGrant{{Project: "p", Domain: "development", Allow: []string{"trainer"}},
			{Project: "other", Allow: []string{"intruder"}}}
	})
	denied := h.run("rdenied", succeed, taskOpts{serviceAccount: "intruder"})
	h.refusedWith(denied, `service account "intruder"`, "project p domain development", "executor.kubernetes.serviceAccounts")
	for sa, run := range map[string]string{"trainer": "rgranted", "runner": "rdefault", "": "rnone"} {
		key := h.run(run, succeed, taskOpts{serviceAccount: sa})
		h.terminal(key, phase.Succeeded)
		pod, err := h.pod(key, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"": "runner"}[sa] + sa; pod.Spec.ServiceAccountName != want {
			t.Errorf("%s: the Pod runs as %q, want %q", run, pod.Spec.ServiceAccountName, want)
		}
	}
}
