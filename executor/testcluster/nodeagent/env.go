package nodeagent

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// containerEnv is the process environment of container c: base, then
// HOSTNAME (the Pod's name, as in a container), then the container's env in
// order. Values may be literal (with $(VAR) references to earlier ones),
// from a field of the Pod (metadata.name, metadata.namespace, metadata.uid,
// spec.nodeName, spec.serviceAccountName, status.podIP, status.hostIP), or
// from a key of a Secret or ConfigMap in the Pod's namespace.
func containerEnv(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c *corev1.Container, base []string) ([]string, error) {
	env := append([]string(nil), base...)
	env = setEnv(env, "HOSTNAME", pod.Name)
	for _, e := range c.Env {
		v, ok, err := envValue(ctx, client, pod, e, envMap(env))
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			env = setEnv(env, e.Name, v)
		}
	}
	return env, nil
}

// envValue resolves one variable; ok is false for an optional reference
// that resolves to nothing.
func envValue(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, e corev1.EnvVar, vars map[string]string) (string, bool, error) {
	from := e.ValueFrom
	switch {
	case from == nil:
		return expand(e.Value, vars), true, nil
	case from.FieldRef != nil:
		v, err := podField(pod, from.FieldRef.FieldPath)
		return v, err == nil, err
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return missing(ref.Optional, "secret "+ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			return missing(ref.Optional, fmt.Sprintf("key %q of secret %s", ref.Key, ref.Name), nil)
		}
		return string(v), true, nil
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return missing(ref.Optional, "config map "+ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			return missing(ref.Optional, fmt.Sprintf("key %q of config map %s", ref.Key, ref.Name), nil)
		}
		return v, true, nil
	}
	return "", false, fmt.Errorf("this kind of valueFrom is not supported by the test node agent")
}

func missing(optional *bool, what string, err error) (string, bool, error) {
	if err != nil && !apierrors.IsNotFound(err) {
		return "", false, fmt.Errorf("reading %s: %w", what, err)
	}
	if optional != nil && *optional {
		return "", false, nil
	}
	return "", false, fmt.Errorf("%s not found", what)
}

func podField(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return podIP(pod), nil
	case "status.hostIP":
		return hostIP, nil
	}
	return "", fmt.Errorf("field %q is not supported by the test node agent", path)
}

// setEnv sets name in env, replacing an earlier value.
func setEnv(env []string, name, value string) []string {
	prefix := name + "="
	for i, kv := range env {
		if strings.HasPrefix(kv, prefix) {
			env[i] = prefix + value
			return env
		}
	}
	return append(env, prefix+value)
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// expand replaces $(NAME) with the value of NAME as Kubernetes does in
// env values, command and args: an unknown name stays as written, and
// $$ is a literal $.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
