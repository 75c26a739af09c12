package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
)

// Secrets reach a Pod through a Kubernetes Secret the manager owns, one
// per attempt: the Pod references it (secretKeyRef variables, a secret
// volume at /etc/flyte/secrets), so no value is ever written into the Pod
// spec. The Secret is owned by the TaskAction (collected with it), carries
// the managed-by label, and is deleted as soon as its Pod ended.

// secretsVolume is the Pod volume holding the attempt's file secrets.
const secretsVolume = "flyte-secrets"

// secretNameOf is the Secret of the Pod named pod.
func secretNameOf(pod string) string { return v1.ObjectName(pod, "secrets") }

// secretDataKey is the Secret's data key of the attempt's i-th secret:
// names of the Secret service need not be valid data keys.
func secretDataKey(i int) string { return fmt.Sprintf("secret-%d", i) }

// addSecrets makes pod refer to l's secrets and returns the Secret that
// must exist before it (nil when the task requests none).
func addSecrets(pod *corev1.Pod, l *attempt.Launch) *corev1.Secret {
	if len(l.Secrets) == 0 {
		return nil
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: secretNameOf(pod.Name), Namespace: pod.Namespace,
			Labels: maps.Clone(pod.Labels), OwnerReferences: slices.Clone(pod.OwnerReferences),
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{},
	}
	var env, storageEnv []corev1.EnvVar
	for _, kv := range contract.SecretEnv(l.Secrets, contract.SecretsMountPath) {
		env = append(env, corev1.EnvVar{Name: kv.Key, Value: kv.Value})
	}
	var items []corev1.KeyToPath
	for i, sec := range l.Secrets {
		key := secretDataKey(i)
		s.Data[key] = sec.Value
		if sec.EnvVar != "" {
			ref := corev1.EnvVar{Name: sec.EnvVar, ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: s.Name}, Key: key}}}
			env = append(env, ref)
			if attempt.IsStorageSecret(sec) {
				storageEnv = append(storageEnv, ref)
			}
		}
		if sec.File != "" {
			items = append(items, corev1.KeyToPath{Key: key, Path: sec.File})
		}
	}
	at := taskContainer(pod)
	c := &pod.Spec.Containers[at]
	c.Env = withEnv(c.Env, env)
	// The copilot's containers (raw container tasks) move the attempt's
	// data: they get the storage credentials, never the task's secrets.
	if len(storageEnv) > 0 {
		for i := range pod.Spec.InitContainers {
			if pod.Spec.InitContainers[i].Name == copilotDownload {
				pod.Spec.InitContainers[i].Env = withEnv(pod.Spec.InitContainers[i].Env, storageEnv)
			}
		}
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == copilotUpload {
				pod.Spec.Containers[i].Env = withEnv(pod.Spec.Containers[i].Env, storageEnv)
			}
		}
	}
	if len(items) > 0 {
		mode := int32(0o400)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: secretsVolume, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: s.Name, Items: items, DefaultMode: &mode}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: secretsVolume, MountPath: contract.SecretsMountPath, ReadOnly: true})
	}
	return s
}

// taskContainer is the index of the task's container in pod.
func taskContainer(pod *corev1.Pod) int {
	for i, c := range pod.Spec.Containers {
		if c.Name == containerName {
			return i
		}
	}
	return 0
}

// withEnv sets vars in env, each replacing a variable of its name (a
// secret's variable wins over the task's own, as in the reference).
func withEnv(env, vars []corev1.EnvVar) []corev1.EnvVar {
	out := env[:0:0]
	for _, e := range env {
		replaced := false
		for _, v := range vars {
			replaced = replaced || v.Name == e.Name
		}
		if !replaced {
			out = append(out, e)
		}
	}
	return append(out, vars...)
}

// applySecret creates the attempt's Secret, or replaces it when a
// restarted manager creates the attempt's Pod again.
func (d *Driver) applySecret(ctx context.Context, s *corev1.Secret) error {
	if s == nil {
		return nil
	}
	err := d.client.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		err = d.client.Update(ctx, s)
	}
	if err != nil {
		return fmt.Errorf("the Secret holding the task's secrets could not be written: %w", err)
	}
	return nil
}

// releaseSecret deletes the Secret of pod, once it ended, is being stopped
// or could not be created, when it has one; best effort: its TaskAction
// owns it anyway.
func (d *Driver) releaseSecret(ctx context.Context, pod *corev1.Pod) {
	if !refersToSecret(pod) {
		return
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: secretNameOf(pod.Name)}}
	if err := d.client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		d.log.Warn("deleting an attempt's Secret", "secret", s.Name, "err", err)
	}
}

// refersToSecret says whether pod uses the Secret addSecrets made for it.
func refersToSecret(pod *corev1.Pod) bool {
	name := secretNameOf(pod.Name)
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == name {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name {
				return true
			}
		}
	}
	return false
}
