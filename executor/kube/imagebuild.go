package kube

import (
	"cmp"
	"errors"

	corev1 "k8s.io/api/core/v1"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/internal/images"
	"fmgr.dev/internal/ocibuild"
)

// Image builds (docs/images.md, Kubernetes mode): the built-in build-image
// task's attempt is a Pod of the builder's image (images.builderImage,
// else the manager's own, copilotImage) running `flyte-manager image
// build-spec`, which reads the spec and the context from storage, builds
// the image without a container runtime, pushes it under
// executor.kubernetes.images.registry and writes the fqin as the task's
// output (package ocibuild). Its log is the attempt's log.

// dockerConfigDir is where a build Pod finds the push Secret's
// config.json ($DOCKER_CONFIG).
const (
	dockerConfigDir    = "/etc/flyte-manager/docker"
	dockerConfigVolume = "registry-credentials"
)

// imageRegistry is where builds push and GetImage looks ("" prefix: no
// builds).
func (d *Driver) imageRegistry() ocibuild.Registry {
	im := d.cfg.Images
	return ocibuild.Registry{Prefix: im.Registry, Insecure: im.Insecure, DockerConfig: im.DockerConfig}
}

// ImageRegistry is the registry image builds push to; ok is false when
// this manager builds no images (executor.kubernetes.images.registry is
// not set).
func (d *Driver) ImageRegistry() (r ocibuild.Registry, ok bool) {
	r = d.imageRegistry()
	return r, r.Prefix != ""
}

// buildOptions is how a build's Pod differs from a task's.
type buildOptions struct {
	pod        ocibuild.Pod
	image      string // the manager's image
	pushSecret string
}

// imageBuild is the build of l, nil when l is not the build task.
func (d *Driver) imageBuild(l *attempt.Launch) (*buildOptions, error) {
	if !images.IsBuild(l.Spec) {
		return nil, nil
	}
	r, ok := d.ImageRegistry()
	if !ok {
		return nil, errors.New("this manager builds no images: executor.kubernetes.images.registry is not set")
	}
	inputs, err := d.state.InputsFile(l.Action)
	if err != nil {
		return nil, err
	}
	return &buildOptions{
		pod:        ocibuild.Pod{Storage: storageURL(d.state.Blobs()), Inputs: inputs, Out: l.OutDir, Registry: r},
		image:      cmp.Or(d.cfg.Images.BuilderImage, d.cfg.CopilotImage),
		pushSecret: d.cfg.Images.PushSecret,
	}, nil
}

// buildContainer makes ctr the build's: the manager's image running the
// build, with the push Secret's credentials when one is configured.
func buildContainer(pod *corev1.Pod, ctr *corev1.Container, b *buildOptions) {
	ctr.Image = b.image
	ctr.Command, ctr.Args = b.pod.Command(), nil
	ctr.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	if b.pushSecret == "" {
		return
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: dockerConfigVolume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: b.pushSecret,
			Items: []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: "config.json"}}}}})
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: dockerConfigVolume, MountPath: dockerConfigDir, ReadOnly: true})
	ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "DOCKER_CONFIG", Value: dockerConfigDir})
}
