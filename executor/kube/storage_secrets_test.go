package kube

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
)

// The storage credentials reach a raw container Pod's copilot containers
// (they move its data) by reference, as they reach the task; the task's
// own secrets reach the task only. No value is in the Pod spec.
func TestStorageSecretsReachTheCopilot(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: copilotDownload}},
			Containers:     []corev1.Container{{Name: containerName}, {Name: copilotUpload}},
		},
	}
	l := &attempt.Launch{Secrets: []contract.Secret{
		{Key: attempt.StorageSecretPrefix + "FLYTE_AWS_SECRET_ACCESS_KEY", EnvVar: "FLYTE_AWS_SECRET_ACCESS_KEY", Value: []byte("storage-value")},
		{Key: "tok", EnvVar: "TOK", Value: []byte("task-value")},
	}}
	s := addSecrets(pod, l)
	if s == nil || len(s.Data) != 2 {
		t.Fatalf("Secret %v, want both values in it", s)
	}
	spec, _ := json.Marshal(pod)
	if strings.Contains(string(spec), "storage-value") || strings.Contains(string(spec), "task-value") {
		t.Fatalf("a value is in the Pod spec:\n%s", spec)
	}
	refs := func(c corev1.Container) (names []string) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == s.Name {
				names = append(names, e.Name)
			}
		}
		return names
	}
	if got := strings.Join(refs(pod.Spec.Containers[0]), ","); got != "FLYTE_AWS_SECRET_ACCESS_KEY,TOK" {
		t.Errorf("the task's secret references = %s", got)
	}
	for _, c := range []corev1.Container{pod.Spec.InitContainers[0], pod.Spec.Containers[1]} {
		if got := strings.Join(refs(c), ","); got != "FLYTE_AWS_SECRET_ACCESS_KEY" {
			t.Errorf("%s's secret references = %q, want the storage credentials only", c.Name, got)
		}
	}
}
