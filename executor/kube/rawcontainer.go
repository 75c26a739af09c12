package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/internal/blob"
)

// Raw container tasks (package copilot) in a Pod. The attempt core fills
// their `{{.inputs.<name>}}` templates; the Pod stages their data around
// the task's container, which runs in its own image:
//
//   - two emptyDir volumes, mounted in the task's container at its input
//     and output directories;
//   - an init container, the manager's own image, running `flyte-manager
//     copilot download`: it reads the attempt's inputs from storage and
//     materialises them in the input volume before the task starts;
//   - a sidecar, the manager's image again, running `flyte-manager copilot
//     upload`: it waits until the task's container has ended, then reads
//     the output volume and writes outputs.pb or error.pb to the attempt's
//     output prefix, exactly as the local executor's collection does.
//
// The sidecar learns that the task ended from the Pod's status, through the
// API server (as the reference's copilot does): that works in any cluster
// and with any image, where a shared process namespace would depend on the
// runtime and a wrapper would need a shell or our binary in the task's
// image. It needs to read its own Pod: the Pod's service account must be
// allowed to get pods in its namespace. The Pod ends when both containers
// have; the driver classifies the attempt from the task container's exit
// code and what the sidecar uploaded (an exit other than 0 is the result:
// the sidecar then uploads nothing).

// Names of the copilot's containers and volumes in a raw container's Pod.
const (
	copilotDownload = "copilot-download"
	copilotUpload   = "copilot-upload"
	rawInputsVolume = "copilot-inputs"
	rawOutputVolume = "copilot-outputs"
)

// Environment of the sidecar: which Pod and container it waits for.
const (
	envPodName      = "FLYTE_COPILOT_POD"
	envPodNamespace = "FLYTE_COPILOT_NAMESPACE"
)

// rawOptions is what a raw container's Pod needs from the driver.
type rawOptions struct {
	// image runs the copilot's containers (executor.kubernetes.copilotImage).
	image string
	// storage is the URL the copilot opens the manager's storage with.
	storage string
	// hostFiles lets the init container copy file inputs that name a path
	// outside the storage (copilot.Job.HostFiles): only with file://
	// storage, which the Pods see at the manager's paths
	// (sharedFileStorage), so a Pod sees the same files the local
	// executor would.
	hostFiles bool
}

// addCopilot adds the copilot's volumes, init container and sidecar to pod
// for raw container launch l, and mounts the data volumes in the task's
// container ctr. Nothing changes for other tasks.
func addCopilot(pod *corev1.Pod, ctr *corev1.Container, l *attempt.Launch, o rawOptions) error {
	job := l.Raw
	if job == nil {
		return nil
	}
	if o.image == "" {
		return errors.New("raw container tasks need executor.kubernetes.copilotImage (the manager's image) to stage their data")
	}
	arg, err := job.Encode()
	if err != nil {
		return err
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: rawInputsVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: rawOutputVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	inputs := corev1.VolumeMount{Name: rawInputsVolume, MountPath: job.InputDir}
	outputs := corev1.VolumeMount{Name: rawOutputVolume, MountPath: job.OutputDir}
	ctr.VolumeMounts = append(ctr.VolumeMounts, inputs, outputs)
	// A command that knows nothing of error files explains a failure on
	// its stderr: the end of its log becomes the attempt's error.
	if ctr.TerminationMessagePolicy == "" {
		ctr.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	}
	// The copilot has the task's environment (storage credentials reach
	// it as they reach a Python task's runtime).
	env := envVars(l.Env)
	download := []string{"flyte-manager", "copilot", "download", "--storage", o.storage, "--inputs", job.InputsURI, "--job", arg}
	if o.hostFiles {
		download = append(download, "--host-files")
	}
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{
		Name: copilotDownload, Image: o.image, Env: env, Command: download,
		VolumeMounts: []corev1.VolumeMount{inputs},
		// Its error, at the end of its log, explains a failed Pod.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	})
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
		Name: copilotUpload, Image: o.image,
		Env: append(append([]corev1.EnvVar(nil), env...),
			corev1.EnvVar{Name: envPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			corev1.EnvVar{Name: envPodNamespace, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}),
		Command: []string{"flyte-manager", "copilot", "upload",
			"--storage", o.storage, "--output-prefix", l.OutDir, "--job", arg},
		VolumeMounts:             []corev1.VolumeMount{outputs},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	})
	return nil
}

// rawOptions are the driver's settings for raw containers' Pods.
func (d *Driver) rawOptions() rawOptions {
	blobs := d.state.Blobs()
	return rawOptions{image: d.cfg.CopilotImage, storage: storageURL(blobs), hostFiles: blobs.Kind() == blob.KindFile}
}

// storageURL is the URL that opens blobs again: file stores by their root
// (which Pods see at the same path, executor.kubernetes.sharedFileStorage),
// S3 by bucket and prefix (endpoint and credentials from the environment,
// as the task's runtime has them).
func storageURL(blobs *blob.Store) string {
	if blobs.Kind() == blob.KindFile {
		return "file://" + blobs.Dir()
	}
	return blobs.URI("")
}

// WaitForTask waits until the task's container of the copilot's own Pod
// (named by the sidecar's environment) has ended, and returns its exit
// code. It polls the Pod's status: a watch would need list and watch
// rights besides get. A Pod that is gone ends the wait with an error.
func WaitForTask(ctx context.Context, rc *rest.Config, namespace, name string, every time.Duration) (int32, error) {
	if namespace == "" || name == "" {
		return 0, fmt.Errorf("the sidecar needs %s and %s (the Pod's name and namespace)", envPodName, envPodNamespace)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return 0, err
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return 0, fmt.Errorf("the Pod %s/%s is gone", namespace, name)
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			return 0, fmt.Errorf("the sidecar cannot read its Pod (its service account needs get on pods): %w", err)
		case err != nil:
			// A passing API hiccup: try again at the next tick.
		default:
			if st := taskStatus(pod); st != nil && st.State.Terminated != nil {
				return st.State.Terminated.ExitCode, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// initFailure says which init container of pod failed and how, "" when
// none did.
func initFailure(pod *corev1.Pod) string {
	for _, st := range pod.Status.InitContainerStatuses {
		if t := st.State.Terminated; t != nil && t.ExitCode != 0 {
			msg := fmt.Sprintf("its init container %s exited with code %d", st.Name, t.ExitCode)
			if m := strings.TrimSpace(t.Message); m != "" {
				msg += ": " + m
			}
			return msg
		}
	}
	return ""
}

// PodFromEnv names the sidecar's Pod from its environment.
func PodFromEnv(getenv func(string) string) (namespace, name string) {
	return getenv(envPodNamespace), getenv(envPodName)
}
