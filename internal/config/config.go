// Package config is flyte-manager's typed configuration.
//
// A Config is assembled, lowest precedence first, from the defaults in
// Default, the YAML files given with --config (merged in order), environment
// variables prefixed FLYTE_MANAGER_ and explicit overrides (command-line
// flags). Unknown keys are rejected with their full path, and Validate names
// the key of every bad value. Defaults that depend on the data directory
// (database DSN, blob URL, work dir) or on the machine (Python environment)
// are filled in after loading by applyDerivedDefaults, beside Default.
package config

import (
	"time"
)

// Executor types.
const (
	ExecutorLocal      = "local"
	ExecutorKubernetes = "kubernetes"
)

// MinLeaseTTL bounds executor.local.leaseTTL from below: renewals every
// TTL/5 must not flood the database, and a short pause of a busy manager
// must not cost it the lease.
const MinLeaseTTL = time.Second

// Config is the whole configuration. YAML keys are the camelCase names in the
// mapstructure tags.
type Config struct {
	// Home is the data directory (env FLYTE_MANAGER_HOME).
	Home     string   `mapstructure:"home" yaml:"home"`
	Server   Server   `mapstructure:"server" yaml:"server"`
	Database Database `mapstructure:"database" yaml:"database"`
	Storage  Storage  `mapstructure:"storage" yaml:"storage"`
	Executor Executor `mapstructure:"executor" yaml:"executor"`
	Projects Projects `mapstructure:"projects" yaml:"projects"`
	Cache    Cache    `mapstructure:"cache" yaml:"cache"`
	Log      Log      `mapstructure:"log" yaml:"log"`
	Secrets  Secrets  `mapstructure:"secrets" yaml:"secrets"`
	Console  Console  `mapstructure:"console" yaml:"console"`
	Events   Events   `mapstructure:"events" yaml:"events"`
	KubeAPI  KubeAPI  `mapstructure:"kubeAPI" yaml:"kubeAPI"`
	Triggers Triggers `mapstructure:"triggers" yaml:"triggers"`
	Apps     Apps     `mapstructure:"apps" yaml:"apps"`
	Auth     Auth     `mapstructure:"auth" yaml:"auth"`
	// Queues are the named queues that tasks and runs may route to with
	// queue= (none by default; see Queue).
	Queues []Queue `mapstructure:"queues" yaml:"queues"`
}

// Console configures the web console (served at /v2/ on the API's port).
type Console struct {
	// Enabled serves the console; false leaves only the APIs.
	Enabled bool `mapstructure:"enabled" yaml:"enabled"`
	// LocalListen is a second address serving the same handler (the
	// console and the APIs it calls), opened only in embedded mode
	// (executor.type local) on server.port 8090: the SDK turns an endpoint
	// of localhost:8090 into console links at http://localhost:8080, and
	// this is what answers them. A busy address is logged and skipped; ""
	// turns it off.
	LocalListen string `mapstructure:"localListen" yaml:"localListen"`
}

// Apps configures where the manager serves the apps it runs (AppService;
// see docs/apps.md).
type Apps struct {
	// PathPrefix is the path under the manager's address that serves them:
	// <base URL><pathPrefix>/<project>/<domain>/<name>/.
	PathPrefix string `mapstructure:"pathPrefix" yaml:"pathPrefix"`
	// PublicURL, when set, is what the API reports as an app's public URL,
	// with {project}, {domain} and {name} replaced: for a reverse proxy in
	// front of the manager that forwards it to pathPrefix. "" reports the
	// base URL the client used (or server.externalURL) + pathPrefix.
	PublicURL string `mapstructure:"publicURL" yaml:"publicURL"`
	// Listen is a second address serving the manager's handler, for apps'
	// public URLs on a port of their own (the sandbox's 30081, where the
	// reference devbox serves apps); apps are under pathPrefix there as on
	// the API's port. A busy address is logged and skipped; "" (the
	// default) opens none.
	Listen string `mapstructure:"listen" yaml:"listen"`
}

// KubeAPI configures the Kubernetes-style API (taskactions.flyte.org/v1
// from the database, for kubectl and client-go) on its own https listener.
type KubeAPI struct {
	// Enabled serves it.
	Enabled bool `mapstructure:"enabled" yaml:"enabled"`
	// Listen is its address (https, a bearer token required). Loopback by
	// default: the token guards it, but like the API port it is for this
	// machine's users until an operator decides otherwise. A busy address
	// is logged and skipped.
	Listen string `mapstructure:"listen" yaml:"listen"`
}

// ConsoleLocalListen is the console's second address to open, "" for none
// (see Console.LocalListen for when there is one).
func (c *Config) ConsoleLocalListen() string {
	if !c.Console.Enabled || c.Executor.Type != ExecutorLocal || c.Server.Port != SDKLocalPort {
		return ""
	}
	return c.Console.LocalListen
}

// SDKLocalPort is the one endpoint port whose console links the SDK sends
// to DefaultConsoleLocalListen's port instead.
const SDKLocalPort = 8090

// Secrets configures the key that encrypts the Secret service's values at
// rest (AES-256-GCM). Set at most one of Key and KeyFile; with neither, the
// keyring is <home>/secrets.keyring, generated (mode 0600) on first start.
type Secrets struct {
	// Key is a 32-byte key, base64-encoded (env FLYTE_MANAGER_SECRETS_KEY).
	// Secret. A fixed key cannot be rotated with `secrets rotate-key`; use
	// KeyFile for that.
	Key string `mapstructure:"key" yaml:"key"`
	// KeyFile is a keyring file: one "<id> <base64 key>" per line, the
	// first sealing new values, the others still opening older ones. The
	// manager re-reads it when it changes, so `flyte-manager secrets
	// rotate-key` takes effect without a restart.
	KeyFile string `mapstructure:"keyFile" yaml:"keyFile"`
}

// Server is the HTTP listener serving every API.
type Server struct {
	// Host is the interface to listen on; "" or "0.0.0.0" for all.
	Host string `mapstructure:"host" yaml:"host"`
	// Port to listen on; 0 picks a free port.
	Port int `mapstructure:"port" yaml:"port"`
	// ExternalURL is the URL clients reach this server at when it sits behind
	// a proxy (used for SelectCluster and signed URLs); "" means the URL the
	// client used.
	ExternalURL string `mapstructure:"externalURL" yaml:"externalURL"`
	// MaxRequestBytes bounds one request message, after decompression.
	MaxRequestBytes int64 `mapstructure:"maxRequestBytes" yaml:"maxRequestBytes"`
	// ShutdownTimeout bounds how long in-flight calls may take to finish
	// after a termination signal.
	ShutdownTimeout time.Duration `mapstructure:"shutdownTimeout" yaml:"shutdownTimeout"`
	// AllowedHosts are the Host names, besides loopback on the bound port,
	// the server's own address and externalURL's host, that requests may
	// name. Any other Host gets 403, which defeats DNS rebinding. An entry is
	// "name" (any port), "name:port" (that port only) or "*.domain" (every
	// subdomain of domain, any port).
	AllowedHosts []string `mapstructure:"allowedHosts" yaml:"allowedHosts"`
	// CORS lists the browser origins, besides the manager's own, that may
	// call it.
	CORS CORS `mapstructure:"cors" yaml:"cors"`
	// BodyReadTimeout is how long a request body may go without delivering a
	// byte before the request is failed (on HTTP/1.1 its connection closed).
	// It is renewed by every read that makes progress, so large uploads are
	// not cut, and it is lifted once the body ends, so long server streams
	// are not cut.
	BodyReadTimeout time.Duration `mapstructure:"bodyReadTimeout" yaml:"bodyReadTimeout"`
	// IdleTimeout closes keep-alive connections (HTTP/1.1) and HTTP/2
	// connections without open streams after this long.
	IdleTimeout time.Duration `mapstructure:"idleTimeout" yaml:"idleTimeout"`
	// MaxConcurrentStreams bounds the concurrent streams (calls) of one
	// HTTP/2 connection.
	MaxConcurrentStreams int `mapstructure:"maxConcurrentStreams" yaml:"maxConcurrentStreams"`
	// MaxStreamsPerClient bounds the long-lived streams (watches, log
	// tails) one client address holds open at once, across connections;
	// one more is refused with RESOURCE_EXHAUSTED. A task's WatchForUpdates
	// is not counted. The address is the peer's as the server sees it
	// (forwarded headers are not trusted), so behind a proxy every client
	// shares one. 0 lifts the cap.
	MaxStreamsPerClient int `mapstructure:"maxStreamsPerClient" yaml:"maxStreamsPerClient"`
	// MaxGlobalWatchesPerClient bounds, the same way, the watches that
	// follow every run (WatchRuns, WatchGroups): each is offered every
	// change the manager makes. They do not count toward
	// MaxStreamsPerClient. 0 lifts the cap.
	MaxGlobalWatchesPerClient int `mapstructure:"maxGlobalWatchesPerClient" yaml:"maxGlobalWatchesPerClient"`
	// Orgs is how the org named in identifiers is treated.
	Orgs Orgs `mapstructure:"orgs" yaml:"orgs"`
	// TLS serves the API port over https (HTTP/2 by ALPN, and HTTP/1.1).
	TLS TLS `mapstructure:"tls" yaml:"tls"`
}

// TLS configures https on the API port. Off by default: the embedded
// default listens on loopback in plain HTTP (which is also what the SDK
// needs to send no credentials, see docs/auth.md).
type TLS struct {
	// Enabled serves https instead of plain HTTP.
	Enabled bool `mapstructure:"enabled" yaml:"enabled"`
	// CertFile and KeyFile are a PEM certificate (chain) and its key. With
	// neither, a self-signed certificate is generated into <home>/tls
	// (tls.crt, tls.key) for development; clients trust it through that
	// file (SSL_CERT_FILE, or the SDK's admin.caCertFilePath).
	CertFile string `mapstructure:"certFile" yaml:"certFile"`
	KeyFile  string `mapstructure:"keyFile" yaml:"keyFile"`
	// GeneratedDir is where the certificate is generated when neither file
	// is set (derived from home; not a configuration key).
	GeneratedDir string `mapstructure:"-" yaml:"-"`
}

// Orgs configures the org part of identifiers. Clients disagree on it: the
// SDK pointed at localhost sends none, a task process sends "local", the
// official UI sends the first label of its host name ("localhost",
// "flyte" on flyte.example.com).
type Orgs struct {
	// Default is the org named in the identifiers the manager returns to a
	// client that named none (every returned identifier names one: the
	// official UI refuses to tail logs of an action whose run has no org).
	// A client that names an org gets that org back.
	Default string `mapstructure:"default" yaml:"default"`
	// Separate keeps each org's projects, runs, tasks, secrets and cache
	// apart. Off (the default) the deployment is one org: whatever org a
	// request names, it reaches the same data. On, a request naming no
	// org, Default or "local" reaches the data of the empty org.
	Separate bool `mapstructure:"separate" yaml:"separate"`
}

// CORS is the cross-origin allow-list.
type CORS struct {
	// AllowedOrigins are origins such as "https://ui.example.com" whose pages
	// may call the APIs; preflight requests from them are answered.
	AllowedOrigins []string `mapstructure:"allowedOrigins" yaml:"allowedOrigins"`
}

// Database selects the metadata store.
type Database struct {
	// DSN is sqlite://<path> or postgres://user:password@host/db?....
	DSN string `mapstructure:"dsn" yaml:"dsn"`
	// MaxOpenConns caps the connection pool; 0 leaves the driver's choice.
	MaxOpenConns int `mapstructure:"maxOpenConns" yaml:"maxOpenConns"`
}

// Storage selects the blob store.
type Storage struct {
	// URL is file://<dir> or s3://bucket[/prefix] (S3 then set up by S3).
	URL string `mapstructure:"url" yaml:"url"`
	// SigningKey signs the URLs the manager serves blobs under. Secret. When
	// empty, Prepare loads or creates <home>/signing.key.
	SigningKey string `mapstructure:"signingKey" yaml:"signingKey"`
	// S3 reaches s3:// storage; it applies to no other scheme.
	S3 S3Storage `mapstructure:"s3" yaml:"s3"`
	// S3Endpoint serves file:// storage over the S3 API (docs/storage.md).
	S3Endpoint S3Endpoint `mapstructure:"s3Endpoint" yaml:"s3Endpoint"`
}

// Where tasks are given their data (S3Endpoint.TaskLocations).
const (
	TaskLocationsS3   = "s3"
	TaskLocationsFile = "file"
)

// S3Endpoint is the manager's own S3-compatible endpoint over its file://
// storage: one bucket mapped to the store's directory, SigV4 with the
// endpoint's keys. With the local executor, tasks are then given
// s3://<bucket>/... locations through it (TaskLocations), so the SDK
// uploads what they return as it does on S3. It serves file:// storage
// only; with other storage it is off.
type S3Endpoint struct {
	// Listen is its address (plain http); "" turns it off. A busy address
	// is logged, and tasks then get file locations.
	Listen string `mapstructure:"listen" yaml:"listen"`
	// Bucket is the name clients address the store by.
	Bucket string `mapstructure:"bucket" yaml:"bucket"`
	// TaskLocations is what tasks of the local executor are given: "s3"
	// (s3://<bucket>/..., reached through the endpoint) or "file" (paths
	// in the store's directory, which tasks read and write directly).
	TaskLocations string `mapstructure:"taskLocations" yaml:"taskLocations"`
	// AccessKeyID and SecretAccessKey are the key the endpoint accepts
	// (both or neither). Neither: a key generated once into
	// <home>/s3-endpoint.key. SecretAccessKey is a secret: redacted when
	// printed, never logged; tasks get it like a task secret.
	AccessKeyID     string `mapstructure:"accessKeyID" yaml:"accessKeyID"`
	SecretAccessKey string `mapstructure:"secretAccessKey" yaml:"secretAccessKey"`
}

// S3Storage reaches an S3 or S3-compatible store. Tasks get the same
// endpoint, region and credentials (docs/storage.md).
type S3Storage struct {
	// Endpoint is the store's base URL (http://minio:9000); "" is AWS.
	Endpoint string `mapstructure:"endpoint" yaml:"endpoint"`
	// Region is the bucket's region; "" takes AWS_REGION, or us-east-1
	// with an Endpoint.
	Region string `mapstructure:"region" yaml:"region"`
	// AccessKeyID and SecretAccessKey are static credentials (both or
	// neither; neither: the AWS default chain, e.g. an IAM role).
	// SecretAccessKey is a secret: redacted when printed, never logged.
	AccessKeyID     string `mapstructure:"accessKeyID" yaml:"accessKeyID"`
	SecretAccessKey string `mapstructure:"secretAccessKey" yaml:"secretAccessKey"`
	// ForcePathStyle addresses buckets as <endpoint>/<bucket>; most
	// S3-compatible stores need it.
	ForcePathStyle bool `mapstructure:"forcePathStyle" yaml:"forcePathStyle"`
	// PresignedURLs hands clients URLs presigned for the store itself
	// (uploads and downloads bypass the manager; the store must be
	// reachable from clients) instead of the manager's own /blobs/ URLs.
	PresignedURLs bool `mapstructure:"presignedURLs" yaml:"presignedURLs"`
	// EmulateConditionalWrites accepts a store that ignores If-None-Match,
	// which the manager otherwise refuses at start: create-only writes then
	// look for the object first, and racing writers can replace each other.
	EmulateConditionalWrites bool `mapstructure:"emulateConditionalWrites" yaml:"emulateConditionalWrites"`
}

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
}

// LogLink is a named URL template. Placeholders such as {{ .podName }} are
// filled in per Pod (the list is loglink.Placeholders); a URL is absolute
// http(s), or starts with {{ .managerURL }}, the address the reading client
// uses for the manager.
type LogLink struct {
	Name string `mapstructure:"name" yaml:"name"`
	URL  string `mapstructure:"url" yaml:"url"`
}

// DefaultKubernetesLogLink links an attempt's Pod to the manager's own log
// endpoint, which streams the Pod's log from the API server.
var DefaultKubernetesLogLink = LogLink{
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

// Projects controls project bootstrap.
type Projects struct {
	// AutoCreate creates a project the first time a run names it.
	AutoCreate bool `mapstructure:"autoCreate" yaml:"autoCreate"`
	// Seed lists projects created at start.
	Seed []string `mapstructure:"seed" yaml:"seed"`
}

// Cache bounds the output cache (the cache services and the executors'
// cache of discoverable tasks).
type Cache struct {
	// TTL is how long an entry serves hits after it was written; 0 keeps
	// entries until evicted or purged. A task's own max_age can only be
	// shorter.
	TTL time.Duration `mapstructure:"ttl" yaml:"ttl"`
	// MaxEntries bounds the number of entries: each sweep evicts the oldest
	// beyond it. 0: no bound.
	MaxEntries int `mapstructure:"maxEntries" yaml:"maxEntries"`
	// MaxReservationHeartbeat caps the heartbeat interval of a reservation
	// (and is the one the executors use).
	MaxReservationHeartbeat time.Duration `mapstructure:"maxReservationHeartbeat" yaml:"maxReservationHeartbeat"`
	// HeartbeatGraceMultiplier: a reservation expires this many heartbeat
	// intervals after its last heartbeat, so another action takes over.
	HeartbeatGraceMultiplier int `mapstructure:"heartbeatGraceMultiplier" yaml:"heartbeatGraceMultiplier"`
	// SweepInterval is how often expired reservations and entries, and the
	// oldest entries beyond maxEntries, are deleted.
	SweepInterval time.Duration `mapstructure:"sweepInterval" yaml:"sweepInterval"`
	// CrossProjectLookup lets a run whose cache_lookup_scope is GLOBAL (the
	// SDK's default) hit another project's entry of the same org and domain
	// when its own project has none. Off, GLOBAL looks in the run's own
	// project and domain only: an entry another project wrote (whoever could
	// write there) never serves this project's runs. A lookup never crosses
	// domains either way.
	CrossProjectLookup bool `mapstructure:"crossProjectLookup" yaml:"crossProjectLookup"`
}

// Queue is one named queue. An action is on a queue when its TaskAction
// names it (queue= on its task or environment), else when its run's
// RunSpec names it (with_runcontext(queue=...), or the root task's queue).
// An action without a queue is on none and is bounded by no queue; a queue
// name that is not configured is refused at submit (InvalidArgument), so a
// typo never runs unbounded. Every limit is 0 = unlimited.
type Queue struct {
	// Name is what queue= names; unique among the queues.
	Name string `mapstructure:"name" yaml:"name"`
	// MaxActionConcurrency bounds the attempts on the queue that run at
	// once, across runs; the others wait, in arrival order.
	MaxActionConcurrency int `mapstructure:"maxActionConcurrency" yaml:"maxActionConcurrency"`
	// MaxRunConcurrency bounds the runs whose root action is on the queue
	// that are running at once; the others' roots wait, in arrival order.
	// Children are not counted.
	MaxRunConcurrency int `mapstructure:"maxRunConcurrency" yaml:"maxRunConcurrency"`
	// MaxDepth bounds the actions on the queue that have not ended
	// (queued, waiting or running): one more is refused at submit with
	// RESOURCE_EXHAUSTED.
	MaxDepth int `mapstructure:"maxDepth" yaml:"maxDepth"`
}

// Events bounds what reporters may add to an action's history through
// EventsProxyService.Record. The executors' own records (through the run
// state, not this service) are never refused, but they count towards the
// bounds. Every bound keeps GetActionDetails and every watcher's snapshot,
// which carry the whole history, small.
type Events struct {
	// MaxPerAttempt bounds the events of one attempt: a report that would
	// take it past this many is refused (RESOURCE_EXHAUSTED). It also bounds
	// an event's version, which numbers the reports of one phase.
	MaxPerAttempt int `mapstructure:"maxPerAttempt" yaml:"maxPerAttempt"`
	// MaxEventBytes bounds one reported event, serialized.
	MaxEventBytes int `mapstructure:"maxEventBytes" yaml:"maxEventBytes"`
	// MaxAttemptBytes bounds the serialized events of one attempt.
	MaxAttemptBytes int `mapstructure:"maxAttemptBytes" yaml:"maxAttemptBytes"`
}

// Triggers configures the trigger scheduler (docs/triggers.md). The
// manager that holds the executor lease fires; the others stand by.
type Triggers struct {
	// CheckInterval is how often the scheduler looks for due firings: a
	// firing is made at most this late.
	CheckInterval time.Duration `mapstructure:"checkInterval" yaml:"checkInterval"`
	// CatchUp is what happens to the firings missed while no manager ran
	// (or none held the lease): "all" makes each of them, oldest first;
	// "latest" makes only the newest.
	CatchUp string `mapstructure:"catchUp" yaml:"catchUp"`
	// MaxCatchUp caps the firings one trigger makes at once after a gap
	// (the newest are kept; the rest are logged and skipped).
	MaxCatchUp int `mapstructure:"maxCatchUp" yaml:"maxCatchUp"`
	// Minute is how long a FixedRate minute lasts. Only tests change it,
	// to fire every few seconds.
	Minute time.Duration `mapstructure:"minute" yaml:"minute"`
}

// Log configures the process logger.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `mapstructure:"level" yaml:"level"`
	// Format is text or json.
	Format string `mapstructure:"format" yaml:"format"`
}

// ListenAddr is the host:port the server binds.
func (s Server) ListenAddr() string {
	return joinHostPort(s.Host, s.Port)
}
