package config

import (
	"time"

	"fmgr.dev/internal/loglink"
)

// The executor: section, local and kubernetes (see config.go for the rest).

// Executor selects and tunes the task executor.
type Executor struct {
	// Type is "local" (host processes) or "kubernetes" (TaskAction CRs).
	Type       string             `mapstructure:"type" yaml:"type"`
	Local      LocalExecutor      `mapstructure:"local" yaml:"local"`
	Kubernetes KubernetesExecutor `mapstructure:"kubernetes" yaml:"kubernetes"`
}

// KubernetesExecutor runs every action as a TaskAction custom resource and
// every attempt as a Pod.
type KubernetesExecutor struct {
	// Kubeconfig is the cluster's kubeconfig file; "" means in-cluster
	// credentials (or $KUBECONFIG, then ~/.kube/config, when outside one).
	Kubeconfig string `mapstructure:"kubeconfig" yaml:"kubeconfig"`
	// Context selects a kubeconfig context; "" is its current one.
	Context string `mapstructure:"context" yaml:"context"`
	// Namespace holds every TaskAction and Pod, unless NamespacePerProject.
	Namespace string `mapstructure:"namespace" yaml:"namespace"`
	// NamespacePerProject puts each project and domain in a namespace of its
	// own, "<project>-<domain>" (made a valid name, see docs/kubernetes.md),
	// created and labelled on first use; one the manager did not create is
	// refused. It needs the ClusterRole of executor/config/rbac-per-project.
	NamespacePerProject bool `mapstructure:"namespacePerProject" yaml:"namespacePerProject"`
	// Endpoint is the manager's address as Pods reach it (host:port). ""
	// means the address the manager listens on, which suits clusters whose
	// Pods run on the manager's host (the test cluster).
	Endpoint string `mapstructure:"endpoint" yaml:"endpoint"`
	// ServiceAccount runs Pods whose task names none; "" is the namespace's
	// default. A task may always name this one.
	ServiceAccount string `mapstructure:"serviceAccount" yaml:"serviceAccount"`
	// ServiceAccounts are the other service accounts tasks may name
	// (security_context.run_as.k8s_service_account), per project and
	// domain. A service account holds the rights of whatever runs as it, so
	// none is usable until listed here; a task naming one that is not fails
	// without running.
	ServiceAccounts []ServiceAccountGrant `mapstructure:"serviceAccounts" yaml:"serviceAccounts"`
	// SharedFileStorage says Pods see the manager's file:// storage at the
	// same path (a single-host cluster, a shared volume). Without it a
	// file:// store is refused in this mode: Pods could not read their
	// inputs or write their outputs.
	SharedFileStorage bool `mapstructure:"sharedFileStorage" yaml:"sharedFileStorage"`
	// SystemRetries bounds retries after platform failures (a Pod that
	// could not be created, a node that went away), besides the task's own.
	SystemRetries int `mapstructure:"systemRetries" yaml:"systemRetries"`
	// LeaseTTL is the executor lease's time to live (see
	// executor.local.leaseTTL): one manager replica reconciles, the others
	// serve the API and stand by.
	LeaseTTL time.Duration `mapstructure:"leaseTTL" yaml:"leaseTTL"`
	// GCInterval is how often ended TaskActions are deleted (0: never).
	GCInterval time.Duration `mapstructure:"gcInterval" yaml:"gcInterval"`
	// GCTTL is how long an ended TaskAction is kept.
	GCTTL time.Duration `mapstructure:"gcTTL" yaml:"gcTTL"`
	// QPS and Burst limit the manager's requests to the API server.
	QPS   float32 `mapstructure:"qps" yaml:"qps"`
	Burst int     `mapstructure:"burst" yaml:"burst"`
	// CopilotImage is the manager's own image, with flyte-manager on its
	// PATH: a raw container task's Pod runs `flyte-manager copilot
	// download` in it as an init container and `flyte-manager copilot
	// upload` as a sidecar, to stage the task's data.
	CopilotImage string `mapstructure:"copilotImage" yaml:"copilotImage"`
	// LogLinks are the links to its log that every attempt reports
	// (ActionAttempt.log_info), rendered per Pod. The default links to the
	// manager's own log endpoint; setting the list replaces it, so keep
	// that entry to keep the link.
	LogLinks []LogLink `mapstructure:"logLinks" yaml:"logLinks"`
	// Images is where the SDK's remote builder's images are built and
	// pushed (docs/images.md, Kubernetes mode); off while Registry is "".
	Images KubernetesImages `mapstructure:"images" yaml:"images"`
}

// KubernetesImages configures image builds on the kubernetes executor: the
// built-in build-image task builds the SDK's ImageSpec as an OCI image in
// a Pod (the manager's image, CopilotImage, running `flyte-manager image
// build-spec`) and pushes it to Registry; GetImage finds built images
// there.
type KubernetesImages struct {
	// Registry is the registry and repository prefix images are pushed
	// under, e.g. registry.example:5000/flyte: the SDK's image flyte:abc
	// becomes registry.example:5000/flyte/flyte:abc. "" builds no images.
	Registry string `mapstructure:"registry" yaml:"registry"`
	// Insecure reaches the registry (and the base images' registries)
	// over plain http.
	Insecure bool `mapstructure:"insecure" yaml:"insecure"`
	// PushSecret names a Secret of type kubernetes.io/dockerconfigjson in
	// the actions' namespace: build Pods read their registry credentials
	// from it ($DOCKER_CONFIG). "" means the Pod's own docker config, if
	// any (anonymous otherwise).
	PushSecret string `mapstructure:"pushSecret" yaml:"pushSecret"`
	// BuilderImage runs the builds: flyte-manager and uv on its PATH (the
	// sandbox image has both; the manager's own image has no uv, so its
	// builds fail at their first package layer). "" is CopilotImage.
	BuilderImage string `mapstructure:"builderImage" yaml:"builderImage"`
	// DockerConfig is the directory of a docker config.json the manager
	// reads registry credentials from when GetImage asks the registry; ""
	// is $DOCKER_CONFIG, else ~/.docker.
	DockerConfig string `mapstructure:"dockerConfig" yaml:"dockerConfig"`
}

// LogLink is one log link: a named URL template (placeholders such as
// {{ .podName }} filled in per attempt, loglink.Placeholders) or a preset
// kind (kubernetes, cloudwatch, stackdriver, grafana-loki) with its
// settings; see loglink.Link. A URL is absolute http(s), or starts with
// {{ .managerURL }}, the address the reading client uses for the manager.
type LogLink = loglink.Link

// DefaultKubernetesLogLink links an attempt's Pod to the manager's own log
// endpoint, which streams the Pod's log from the API server.
var DefaultKubernetesLogLink = DefaultLogLink

// DefaultLogLink links an attempt to the manager's own log endpoint, in
// either executor.
var DefaultLogLink = LogLink{
	Name: "logs",
	URL:  "{{ .managerURL }}/logs/{{ .org }}/{{ .project }}/{{ .domain }}/{{ .runName }}/{{ .actionName }}/{{ .attempt }}",
}

// ServiceAccountGrant lets the tasks of a project and domain run as the
// service accounts Allow names.
type ServiceAccountGrant struct {
	// Project is the project id the grant is for; "" is every project.
	Project string `mapstructure:"project" yaml:"project"`
	// Domain is the domain the grant is for; "" is every domain.
	Domain string `mapstructure:"domain" yaml:"domain"`
	// Allow names the service accounts (in the action's namespace).
	Allow []string `mapstructure:"allow" yaml:"allow"`
}

// LocalExecutor runs every attempt as a host process.
type LocalExecutor struct {
	// Python is the bin directory of the Python environment providing a0.
	Python string `mapstructure:"python" yaml:"python"`
	// WorkDir holds one working directory per attempt.
	WorkDir string `mapstructure:"workDir" yaml:"workDir"`
	// MaxParallelism bounds concurrently running attempts.
	MaxParallelism int `mapstructure:"maxParallelism" yaml:"maxParallelism"`
	// SystemRetries bounds retries after infrastructure failures.
	SystemRetries int `mapstructure:"systemRetries" yaml:"systemRetries"`
	// LeaseTTL is how long the executor lease in the database outlives its
	// holder's last renewal. One manager per database holds it and runs
	// attempts; the others keep their executor on standby and take the
	// lease over when it has not been renewed for LeaseTTL. The holder
	// renews it every LeaseTTL/5 and gives it up (stopping its attempts) when
	// it could not renew it for LeaseTTL/2.
	LeaseTTL time.Duration `mapstructure:"leaseTTL" yaml:"leaseTTL"`
	// MaxLogBytes caps each attempt's log: past it the log keeps its head
	// and a rolling tail with a marker saying how much was dropped.
	MaxLogBytes int64 `mapstructure:"maxLogBytes" yaml:"maxLogBytes"`
	// LogLinks are the links to its log that every attempt reports,
	// rendered per attempt with the placeholders a host process has (its
	// identity, hostname, managerURL). The default links to the manager's
	// own log endpoint; setting the list replaces it.
	LogLinks []LogLink `mapstructure:"logLinks" yaml:"logLinks"`
	// WarmStart starts attempts of the SDK's a0 runtime by forking a
	// pre-started interpreter that has imported the SDK's dependencies,
	// instead of starting Python afresh for each; attempts it cannot serve
	// exactly as a fresh a0 would (another command or Python, an
	// environment that changes what the imports do) start plainly.
	WarmStart bool `mapstructure:"warmStart" yaml:"warmStart"`
	// Containers says how raw container tasks (ContainerTask) run.
	Containers LocalContainers `mapstructure:"containers" yaml:"containers"`
	// Resources says what the host offers attempts and what becomes of
	// one that requests more.
	Resources LocalResources `mapstructure:"resources" yaml:"resources"`
	// RunAs says which user each attempt's process runs as.
	RunAs RunAs `mapstructure:"runAs" yaml:"runAs"`
	// Environments are the Python environments images become (see
	// docs/images.md).
	Environments LocalEnvironments `mapstructure:"environments" yaml:"environments"`
}

// LocalEnvironments: with the local executor, an image a task declares
// (built by the SDK's remote builder, `image.builder: remote`) becomes a
// Python environment built with uv, cached on this host by the image's
// content, and every attempt of the task runs with its interpreter.
type LocalEnvironments struct {
	// Dir holds the environments (default <home>/environments).
	Dir string `mapstructure:"dir" yaml:"dir"`
	// MaxBytes caps their total size: past it, after a build, the
	// environments used longest ago are removed (never one an attempt
	// runs in). 0: no cap.
	MaxBytes int64 `mapstructure:"maxBytes" yaml:"maxBytes"`
	// UV is the uv binary ("": uv beside executor.local.python, else uv on
	// the manager's PATH).
	UV string `mapstructure:"uv" yaml:"uv"`
}

// Modes of executor.local.runAs.
const (
	// RunAsRange gives each running attempt a uid of its own from
	// [FirstUID, FirstUID+Count), all of them in group GID (by default the
	// number of FirstUID).
	RunAsRange = "range"
	// RunAsFixed runs every attempt as UID:GID.
	RunAsFixed = "fixed"
	// RunAsManager runs every attempt as the manager's own user.
	RunAsManager = "manager"
)

// Default uid range of executor.local.runAs (mode range): far above the
// uids and subordinate-uid ranges a host hands out.
const (
	DefaultRunAsFirstUID = 2000000000
	DefaultRunAsCount    = 65536
)

// RunAs: who an attempt's process is. Only a manager running as root can
// start processes as another user; a manager that is not root runs every
// attempt as itself whatever the mode says (it logs so once at start).
type RunAs struct {
	// Mode is range (the default), fixed or manager.
	Mode string `mapstructure:"mode" yaml:"mode"`
	// FirstUID and Count: the uids of mode range.
	FirstUID uint32 `mapstructure:"firstUID" yaml:"firstUID"`
	Count    uint32 `mapstructure:"count" yaml:"count"`
	// UID: the user of mode fixed. GID: the group of every attempt (0:
	// the number of FirstUID in mode range, of UID in mode fixed); the
	// manager's data that attempts read belongs to it.
	UID uint32 `mapstructure:"uid" yaml:"uid"`
	GID uint32 `mapstructure:"gid" yaml:"gid"`
}

// Container runtimes of the local executor (executor.local.containers.runtime).
const (
	// ContainerRuntimeRunc runs each raw container attempt as an OCI
	// container in runc: the image's filesystem, an unprivileged user, no
	// capabilities, its own pid, mount, network, IPC and UTS namespaces.
	ContainerRuntimeRunc = "runc"
	// ContainerRuntimeHost runs the command on the host as the manager's
	// user, in a private mount namespace with its data directories bound to
	// the attempt's own; the image is not used. Unsafe: the command can do
	// whatever the manager can.
	ContainerRuntimeHost = "host"
	// ContainerRuntimeOff refuses raw container tasks.
	ContainerRuntimeOff = "off"
)

// LocalContainers configures raw container tasks in the local executor.
type LocalContainers struct {
	// Runtime is runc (the default), host (unsafe) or off.
	Runtime string `mapstructure:"runtime" yaml:"runtime"`
	// Runc is the runc binary ("": runc on the manager's PATH).
	Runc string `mapstructure:"runc" yaml:"runc"`
	// Images is the image store's directory (default <home>/images), which
	// `flyte-manager image load` fills.
	Images string `mapstructure:"images" yaml:"images"`
}

// Unsatisfiable resource requests (executor.local.resources.unsatisfiable).
const (
	UnsatisfiableWait = "wait"
	UnsatisfiableFail = "fail"
)

// LocalResources: the local executor places every attempt on this host.
// An attempt starts when its requests (CPU, memory, GPUs; requests, not
// limits) fit beside those of the running attempts; the GPUs it gets are
// its own until it ends (CUDA_VISIBLE_DEVICES).
type LocalResources struct {
	// Unsatisfiable is what becomes of an attempt requesting more than the
	// host offers at all: "wait" keeps it WAITING_FOR_RESOURCES, saying
	// what is missing, until its max_queued_time (TIMED_OUT) or forever
	// without one, as a Pod no node can take stays Pending; "fail" fails
	// it at once, naming what is missing.
	Unsatisfiable string `mapstructure:"unsatisfiable" yaml:"unsatisfiable"`
	// CPUs the host offers, a quantity ("4", "1500m"); "" detects them
	// (the CPUs this process may run on).
	CPUs string `mapstructure:"cpus" yaml:"cpus"`
	// Memory the host offers, a quantity ("16Gi"); "" detects it
	// (MemTotal in /proc/meminfo).
	Memory string `mapstructure:"memory" yaml:"memory"`
	// GPUs is how many of the host's NVIDIA GPUs attempts may use; -1
	// detects them (/proc/driver/nvidia/gpus, else nvidia-smi -L). More than
	// were detected are handed out by index.
	GPUs int `mapstructure:"gpus" yaml:"gpus"`
}
