package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
)

// A task that names a PodTemplate gets its Pod from it: the template's
// metadata and the additions to its primary container stay, the task's
// command, image, environment and resources replace the rest.
func TestPodTemplateByName(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t))
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "flyte", Name: "gpu-nodes"},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "ml"}, Annotations: map[string]string{"note": "from the template"}},
			Spec: corev1.PodSpec{
				Containers:   []corev1.Container{{Name: "primary", Image: "replaced", Env: []corev1.EnvVar{{Name: "FROM_TEMPLATE", Value: "yes"}}}},
				NodeSelector: map[string]string{"kubernetes.io/hostname": "flyte-node-0"},
			},
		}}
	if err := h.k.Create(h.ctx, pt); err != nil {
		t.Fatal(err)
	}
	key := h.run("rtemplate", `[ "$FROM_TEMPLATE" = yes ] && `+succeed, taskOpts{podTemplate: "gpu-nodes"})
	h.terminal(key, phase.Succeeded)
	pod, err := h.pod(key, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if pod.Labels["team"] != "ml" || pod.Annotations["note"] != "from the template" || pod.Spec.NodeSelector["kubernetes.io/hostname"] != "flyte-node-0" ||
		len(pod.Spec.Containers) != 1 || c.Name != containerName || c.Image != "ignored" || pod.Labels[LabelManaged] != managedBy {
		t.Fatalf("pod from the template: %+v\n%+v", pod.ObjectMeta, pod.Spec)
	}

	// A template that does not exist fails the task, saying so.
	bad := h.run("rnotemplate", succeed, taskOpts{podTemplate: "missing"})
	a := h.terminal(bad, phase.Failed)
	if e := v1.ErrorStateOf(a.ErrorInfo); e == nil || e.Code != "LaunchFailed" {
		t.Fatalf("error %+v", e)
	}
}

// With namespacePerProject, a project's actions live in "<project>-<domain>",
// created on first use.
func TestNamespacePerProject(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t), func(c *config.KubernetesExecutor) { c.NamespacePerProject = true })
	key := h.run("rns", succeed, taskOpts{})
	h.terminal(key, phase.Succeeded)
	ta, err := h.taskAction(key)
	if err != nil {
		t.Fatal(err)
	}
	if ta.Namespace != "p-development" || ta.Name != "rns-a0" {
		t.Fatalf("TaskAction %s/%s", ta.Namespace, ta.Name)
	}
	ns := &corev1.Namespace{}
	if err := h.k.Get(h.ctx, client.ObjectKey{Name: "p-development"}, ns); err != nil || ns.Labels[LabelManaged] != managedBy {
		t.Fatalf("namespace %+v: %v", ns.ObjectMeta, err)
	}
}
