package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/contract"
	"fmgr.dev/internal/appruntime"
)

// An app on the Kubernetes executor is a Deployment and a Service of the
// same name in the namespace of its project and domain (Placement): the
// Deployment runs the app's container with the environment the SDK's
// serve runtime reads, the Service gives its Pods one address on
// AppPort. Both carry the app's labels, so a restarted manager finds
// them from the app's key alone.

// Labels of an app's objects, besides flyte.org/project and
// flyte.org/domain.
const (
	LabelApp         = "flyte.org/app"
	labelAppRevision = "flyte.org/app-revision"
	// appContainerName is the app's container in its Pods.
	appContainerName = "app"
	// DefaultAppPort is the port an app listens on when its spec names
	// none (the SDK's default).
	DefaultAppPort = 8080
	// appRawPrefixTemplate is what the SDK puts in an app's arguments for
	// its raw data location.
	appRawPrefixTemplate = "{{.rawOutputDataPrefix}}"
)

// appObjectName is the name of k's Deployment and Service: "app-<name>",
// a DNS-1035 label as a Service name must be; a name Kubernetes would
// refuse is lowered, its other characters become '-', and a hash of the
// original keeps two apps apart.
func appObjectName(k appruntime.Key) string {
	s := "app-" + k.Name
	if len(validation.IsDNS1035Label(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(k.Name))
	suffix := hex.EncodeToString(sum[:4])
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	body := strings.TrimRight(b.String(), "-")
	if limit := validation.DNS1035LabelMaxLength - len(suffix) - 1; len(body) > limit {
		body = strings.TrimRight(body[:limit], "-")
	}
	return body + "-" + suffix
}

// appSelector are the labels that select k's Pods (and its objects).
func appSelector(k appruntime.Key) map[string]string {
	return map[string]string{
		LabelManaged:    managedBy,
		v1.LabelProject: v1.LabelValue(k.Project),
		v1.LabelDomain:  v1.LabelValue(k.Domain),
		LabelApp:        v1.LabelValue(k.Name),
	}
}

// appPort is the port the app listens on.
func appPort(t appruntime.Target) int32 {
	for _, p := range t.Spec.GetContainer().GetPorts() {
		if p.GetContainerPort() > 0 {
			return int32(p.GetContainerPort())
		}
	}
	return DefaultAppPort
}

// podIPEnv gives an app its Pod's address as POD_IP (the downward API): an
// app that must listen on its own address rather than on all of them (on
// the test cluster, where every Pod shares the host) finds it there.
var podIPEnv = corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
	FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}}

// appObjectsSpec is what buildAppObjects needs besides the target.
type appObjectsSpec struct {
	Namespace string
	// Replicas is how many Pods the Deployment asks for now (the scale
	// decision, 0 when scaled to zero or stopped).
	Replicas int32
	// Env are the operator's and the storage's variables (as for
	// attempts); Endpoint is the manager's host:port as Pods reach it.
	Env            []contract.KV
	Endpoint       string
	ServiceAccount string
	// RawDataPrefix is where the app writes data, for
	// {{.rawOutputDataPrefix}} in its arguments (the app's key is added).
	RawDataPrefix string
}

// buildAppObjects builds t's Deployment and Service. An error is the
// app's: no container, no image, a resource that does not parse.
func buildAppObjects(t appruntime.Target, o appObjectsSpec) (*appsv1.Deployment, *corev1.Service, error) {
	c := t.Spec.GetContainer()
	if c == nil {
		return nil, nil, errors.New("the kubernetes executor runs apps with a container spec; this app has none")
	}
	if c.GetImage() == "" {
		return nil, nil, errors.New("the app's container names no image")
	}
	res, err := resources(c.GetResources())
	if err != nil {
		return nil, nil, err
	}
	port := appPort(t)
	env, err := contract.BuildAppEnv(contract.AppEnvSpec{Defaults: o.Env, AppEnv: c.GetEnv(),
		Org: t.Key.Org, Project: t.Key.Project, Domain: t.Key.Domain, Endpoint: o.Endpoint, Port: int(port)})
	if err != nil {
		return nil, nil, err
	}
	raw := strings.TrimSuffix(o.RawDataPrefix, "/") + "/" + t.Key.Project + "/" + t.Key.Domain + "/" + t.Key.Name
	fill := func(in []string) []string {
		out := make([]string, len(in))
		for i, a := range in {
			out[i] = strings.ReplaceAll(a, appRawPrefixTemplate, raw)
		}
		return out
	}
	// Args only are the whole argv, as for tasks (pod.go): no image
	// entrypoint runs first, and the local executor runs them so too.
	command, args := fill(c.GetCommand()), fill(c.GetArgs())
	if len(command) == 0 {
		command, args = args, nil
	}
	name := appObjectName(t.Key)
	sel := appSelector(t.Key)
	labels := func() map[string]string {
		l := make(map[string]string, len(sel)+1)
		for k, v := range sel {
			l[k] = v
		}
		l[labelAppRevision] = fmt.Sprint(t.Revision)
		return l
	}
	annotations := map[string]string{v1.AnnotationOrg: t.Key.Org}
	replicas := o.Replicas
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels(), Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(), Annotations: annotations},
				Spec: corev1.PodSpec{
					ServiceAccountName: o.ServiceAccount,
					Containers: []corev1.Container{{
						Name:      appContainerName,
						Image:     c.GetImage(),
						Command:   command,
						Args:      args,
						Env:       append(envVars(env), podIPEnv),
						Resources: res,
						Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
						// A crash shows the last lines the app printed.
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						// The API server's defaults spelt out, so that an
						// unchanged app compares equal to what it stored.
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)},
						}, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3},
					}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels(), Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Selector: sel,
			Ports:    []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
		},
	}
	return dep, svc, nil
}
