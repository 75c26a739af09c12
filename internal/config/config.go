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
	"strings"
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
	// Telemetry configures OpenTelemetry tracing (off by default).
	Telemetry Telemetry `mapstructure:"telemetry" yaml:"telemetry"`
	// Retention: how long ended runs are kept, and the collector.
	Retention Retention `mapstructure:"retention" yaml:"retention"`
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
	// App, when set ("<project>/<domain>/<app name>"), serves /v2 and
	// everything under it from that app (through the apps proxy) instead
	// of the built-in console: "the UI via the App Service", e.g. the
	// official Flyte 2 console deployed as an app. While the app is
	// missing or stopped, /v2 answers 503 naming it. "" (the default)
	// serves the built-in console.
	App string `mapstructure:"app" yaml:"app"`
}

// ConsoleApp splits console.app into its project, domain and app name; ok
// is false when it is not set.
func (c *Config) ConsoleApp() (project, domain, name string, ok bool) {
	parts := strings.Split(c.Console.App, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
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
	// Network is how the local executor networks replicas: "auto" (the
	// default) gives each a network namespace of its own where the host
	// allows it (the manager runs as root), else the manager's network
	// and a free port; "namespace" requires namespaces; "host" never
	// uses them.
	Network string `mapstructure:"network" yaml:"network"`
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
