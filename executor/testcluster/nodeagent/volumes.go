package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// emptyDir volumes: each is a directory of the Pod on the host
// (<pod dir>/volumes/<volume>), and a container that mounts one runs in a
// private mount namespace of its own (util-linux's unshare, so only root
// can) where the directory is bound at the mount path: the path means the
// Pod's directory to that process alone, as in a container. The mount
// point itself is created on the host, empty, if it is missing.

// bindScript, run by sh in the new mount namespace, binds each pair of
// arguments (source, target) up to "--", then becomes the command.
const bindScript = `while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 126; shift 2; done; shift; exec "$@"`

// emptyDirs returns the argv that runs args with c's emptyDir volumes
// bound at their mount paths; args as they are when it mounts none.
func emptyDirs(pod *corev1.Pod, c *corev1.Container, podDir string, args []string) ([]string, error) {
	var binds []string
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name && v.EmptyDir != nil })
		if i < 0 {
			continue
		}
		if !filepath.IsAbs(m.MountPath) || m.SubPath != "" {
			return nil, fmt.Errorf("volume %s: the test node agent mounts an emptyDir at an absolute path, without subPath", m.Name)
		}
		dir := filepath.Join(podDir, "volumes", m.Name)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(m.MountPath, 0o755); err != nil {
			return nil, fmt.Errorf("volume %s: creating the mount point %s: %w", m.Name, m.MountPath, err)
		}
		binds = append(binds, dir, filepath.Clean(m.MountPath))
	}
	if len(binds) == 0 {
		return args, nil
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the test node agent mounts emptyDir volumes in a private mount namespace, which only root can make")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, fmt.Errorf("the test node agent mounts emptyDir volumes with util-linux's unshare: %w", err)
	}
	argv := append([]string{unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", bindScript, "emptydir"}, binds...)
	return append(append(argv, "--"), args...), nil
}

// Secret volumes: a Pod's process has no filesystem of its own, so the
// agent writes each secret volume mounted into the container under the
// Pod's directory (<pod dir>/volumes/<volume>, files 0400 or the volume's
// mode) and maps the mount path to it wherever the container's
// environment names the path, as a kubelet's bind mount would make the
// path work. Other volume kinds are ignored.

// secretVolumes writes c's secret volumes under podDir and returns env with
// the mount paths it names mapped to where the files are.
func secretVolumes(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c *corev1.Container, podDir string, env []string) ([]string, error) {
	for _, m := range c.VolumeMounts {
		var vol *corev1.Volume
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == m.Name && pod.Spec.Volumes[i].Secret != nil {
				vol = &pod.Spec.Volumes[i]
			}
		}
		if vol == nil {
			continue
		}
		dir := filepath.Join(podDir, "volumes", vol.Name)
		if err := writeSecretVolume(ctx, client, pod.Namespace, vol.Secret, dir); err != nil {
			return nil, fmt.Errorf("volume %s: %w", vol.Name, err)
		}
		for i, kv := range env {
			name, value, _ := strings.Cut(kv, "=")
			if value == m.MountPath || strings.HasPrefix(value, m.MountPath+"/") {
				env[i] = name + "=" + dir + strings.TrimPrefix(value, m.MountPath)
			}
		}
	}
	return env, nil
}

func writeSecretVolume(ctx context.Context, client kubernetes.Interface, namespace string, src *corev1.SecretVolumeSource, dir string) error {
	s, err := client.CoreV1().Secrets(namespace).Get(ctx, src.SecretName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading secret %s: %w", src.SecretName, err)
	}
	items := src.Items
	if len(items) == 0 {
		for k := range s.Data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, it := range items {
		data, ok := s.Data[it.Key]
		if !ok {
			return fmt.Errorf("key %q of secret %s not found", it.Key, src.SecretName)
		}
		mode := os.FileMode(0o400)
		if it.Mode != nil {
			mode = os.FileMode(*it.Mode)
		} else if src.DefaultMode != nil {
			mode = os.FileMode(*src.DefaultMode)
		}
		path := filepath.Join(dir, filepath.Clean("/"+it.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, mode); err != nil {
			return err
		}
	}
	return nil
}
