package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"fmgr.dev/internal/dsn"
	"fmgr.dev/internal/loglink"
	"fmgr.dev/internal/requrl"
)

// orgName is what an org may be, in the configuration and in requests
// (ValidOrg): one identifier segment, as ident accepts for other parts.
var orgName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// appsPrefix is what apps.pathPrefix may be.
var appsPrefix = regexp.MustCompile(`^(/[A-Za-z0-9_.-]+)+$`)

// ValidOrg reports whether org is a well-formed org name.
func ValidOrg(org string) bool { return orgName.MatchString(org) }

// Validate checks every value and reports each bad one by its key path.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}

	if c.Home == "" {
		bad("home", "must not be empty")
	}

	if c.Server.Port < 0 || c.Server.Port > 65535 {
		bad("server.port", "must be between 0 and 65535, got %d", c.Server.Port)
	}
	if c.Server.ExternalURL != "" {
		u, err := url.Parse(c.Server.ExternalURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("server.externalURL", "must be an absolute http:// or https:// URL, got %q", c.Server.ExternalURL)
		}
	}
	c.Auth.validate(bad)
	c.Telemetry.Tracing.validate(bad)
	if t := c.Server.TLS; (t.CertFile == "") != (t.KeyFile == "") {
		bad("server.tls", "set both certFile and keyFile, or neither (to generate a self-signed certificate)")
	}
	if c.Server.MaxRequestBytes <= 0 {
		bad("server.maxRequestBytes", "must be positive, got %d", c.Server.MaxRequestBytes)
	} else if c.Server.MaxRequestBytes > 1<<31-1 {
		bad("server.maxRequestBytes", "must be at most 2147483647, got %d", c.Server.MaxRequestBytes)
	}
	if c.Server.ShutdownTimeout < 0 {
		bad("server.shutdownTimeout", "must not be negative, got %s", c.Server.ShutdownTimeout)
	}
	for i, h := range c.Server.AllowedHosts {
		if _, err := requrl.ParseHostPattern(h); err != nil {
			bad(fmt.Sprintf("server.allowedHosts[%d]", i), "%v", err)
		}
	}
	for i, o := range c.Server.CORS.AllowedOrigins {
		if _, err := requrl.ParseOrigin(o); err != nil {
			bad(fmt.Sprintf("server.cors.allowedOrigins[%d]", i), "%q: %v", o, err)
		}
	}
	if c.Server.BodyReadTimeout <= 0 {
		bad("server.bodyReadTimeout", "must be positive, got %s", c.Server.BodyReadTimeout)
	}
	if c.Server.IdleTimeout <= 0 {
		bad("server.idleTimeout", "must be positive, got %s", c.Server.IdleTimeout)
	}
	if c.Server.MaxConcurrentStreams < 1 {
		bad("server.maxConcurrentStreams", "must be at least 1, got %d", c.Server.MaxConcurrentStreams)
	}
	if c.Server.MaxStreamsPerClient < 0 {
		bad("server.maxStreamsPerClient", "must be 0 (no cap) or positive, got %d", c.Server.MaxStreamsPerClient)
	}
	if c.Server.MaxGlobalWatchesPerClient < 0 {
		bad("server.maxGlobalWatchesPerClient", "must be 0 (no cap) or positive, got %d", c.Server.MaxGlobalWatchesPerClient)
	}
	if o := c.Server.Orgs.Default; !orgName.MatchString(o) {
		bad("server.orgs.default", "must be 1 to 63 letters, digits, '-' or '_', starting with a letter or digit, got %q", o)
	}

	switch scheme := urlScheme(c.Database.DSN); scheme {
	case "sqlite", "postgres", "postgresql":
	case "":
		bad("database.dsn", "must be sqlite://<path> or postgres://..., got %q", dsn.Redact(c.Database.DSN))
	default:
		bad("database.dsn", "unsupported scheme %q (use sqlite:// or postgres://)", scheme)
	}
	if c.Database.MaxOpenConns < 0 {
		bad("database.maxOpenConns", "must not be negative, got %d", c.Database.MaxOpenConns)
	}

	switch scheme := urlScheme(c.Storage.URL); scheme {
	case "file", "s3", "gs", "azblob", "mem":
	case "":
		bad("storage.url", "must be a URL such as file:///var/lib/flyte or s3://bucket, got %q", c.Storage.URL)
	default:
		bad("storage.url", "unsupported scheme %q (use file://, s3://, gs://, azblob:// or mem://)", scheme)
	}

	c.validateS3(bad)
	c.validateS3Endpoint(bad)

	switch c.Executor.Type {
	case ExecutorLocal:
		if p := c.Executor.Local.Python; p != "" {
			if info, err := os.Stat(p); err != nil || !info.IsDir() {
				bad("executor.local.python", "%q is not a directory (want the bin directory of a Python environment providing a0)", p)
			}
		}
	case ExecutorKubernetes:
		k := c.Executor.Kubernetes
		if scheme := urlScheme(c.Storage.URL); (scheme == "file" || scheme == "mem") && !k.SharedFileStorage {
			bad("storage.url", "is %s:// storage, which Pods cannot reach; use s3://, gs:// or azblob:// with executor.type kubernetes, "+
				"or set executor.kubernetes.sharedFileStorage: true when every Pod sees %s at the same path", scheme, c.Storage.URL)
		}
		if !k.NamespacePerProject && len(validation.IsDNS1123Label(k.Namespace)) > 0 {
			bad("executor.kubernetes.namespace", "%q is not a valid namespace name", k.Namespace)
		}
		for i, g := range k.ServiceAccounts {
			key := fmt.Sprintf("executor.kubernetes.serviceAccounts[%d]", i)
			if len(g.Allow) == 0 {
				bad(key+".allow", "names no service account")
			}
			for _, sa := range g.Allow {
				if len(validation.IsDNS1123Subdomain(sa)) > 0 {
					bad(key+".allow", "%q is not a valid service account name", sa)
				}
			}
		}
		if k.SystemRetries < 0 {
			bad("executor.kubernetes.systemRetries", "must not be negative, got %d", k.SystemRetries)
		}
		if k.LeaseTTL < MinLeaseTTL {
			bad("executor.kubernetes.leaseTTL", "must be at least %s, got %s", MinLeaseTTL, k.LeaseTTL)
		}
		if k.GCInterval < 0 || k.GCTTL < 0 {
			bad("executor.kubernetes.gcInterval", "gcInterval and gcTTL must not be negative")
		}
		if k.QPS <= 0 || k.Burst < 1 {
			bad("executor.kubernetes.qps", "qps and burst must be positive, got %v and %d", k.QPS, k.Burst)
		}
		if k.CopilotImage == "" || strings.ContainsFunc(k.CopilotImage, unicode.IsSpace) {
			bad("executor.kubernetes.copilotImage", "must name the manager's image (no spaces), got %q", k.CopilotImage)
		}
		validateLogLinks("executor.kubernetes.logLinks", loglink.Kubernetes, k.LogLinks, bad)
		if r := k.Images.Registry; r != "" && (strings.Contains(r, "://") || strings.ContainsFunc(r, unicode.IsSpace) ||
			strings.ContainsAny(r, "@") || strings.HasSuffix(r, "/")) {
			bad("executor.kubernetes.images.registry", "must be a registry and repository prefix such as registry.example:5000/flyte "+
				"(no scheme, tag or digest), got %q", r)
		}
		if strings.ContainsFunc(k.Images.BuilderImage, unicode.IsSpace) {
			bad("executor.kubernetes.images.builderImage", "must name an image (no spaces), got %q", k.Images.BuilderImage)
		}
		if s := k.Images.PushSecret; s != "" && len(validation.IsDNS1123Subdomain(s)) > 0 {
			bad("executor.kubernetes.images.pushSecret", "%q is not a valid Secret name", s)
		}
	default:
		bad("executor.type", "must be %q or %q, got %q", ExecutorLocal, ExecutorKubernetes, c.Executor.Type)
	}
	if c.Executor.Local.MaxParallelism < 1 {
		bad("executor.local.maxParallelism", "must be at least 1, got %d", c.Executor.Local.MaxParallelism)
	}
	if c.Executor.Local.LeaseTTL < MinLeaseTTL {
		bad("executor.local.leaseTTL", "must be at least %s, got %s", MinLeaseTTL, c.Executor.Local.LeaseTTL)
	}
	validateLogLinks("executor.local.logLinks", loglink.Local, c.Executor.Local.LogLinks, bad)
	if c.Executor.Local.SystemRetries < 0 {
		bad("executor.local.systemRetries", "must not be negative, got %d", c.Executor.Local.SystemRetries)
	}
	switch r := c.Executor.Local.Containers.Runtime; r {
	case ContainerRuntimeRunc, ContainerRuntimeHost, ContainerRuntimeOff:
	case "auto", "namespace":
		bad("executor.local.containers.runtime", "%q is no longer a runtime: use %s (containers in runc, the default), "+
			"%s (the command on the host, unsafe: what %q did) or %s", r, ContainerRuntimeRunc, ContainerRuntimeHost, r, ContainerRuntimeOff)
	default:
		bad("executor.local.containers.runtime", "must be %s, %s or %s, got %q", ContainerRuntimeRunc, ContainerRuntimeHost, ContainerRuntimeOff, r)
	}
	validateLocalResources(c.Executor.Local.Resources, bad)
	validateRunAs(c.Executor.Local.RunAs, bad)
	if c.Executor.Local.Environments.MaxBytes < 0 {
		bad("executor.local.environments.maxBytes", "must be 0 (no cap) or more, got %d", c.Executor.Local.Environments.MaxBytes)
	}
	if c.Executor.Local.MaxLogBytes < MinMaxLogBytes {
		bad("executor.local.maxLogBytes", "must be at least %d (1 MiB), got %d", MinMaxLogBytes, c.Executor.Local.MaxLogBytes)
	}

	if c.Secrets.Key != "" {
		if c.Secrets.KeyFile != "" {
			bad("secrets.key", "set either secrets.key or secrets.keyFile, not both")
		}
		if _, err := ParseSecretKey(c.Secrets.Key); err != nil {
			bad("secrets.key", "%v", err) // never the key itself
		}
	}

	for i, p := range c.Projects.Seed {
		if p == "" || strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == '/' }) {
			bad(fmt.Sprintf("projects.seed[%d]", i), "%q is not a valid project id", p)
		}
	}

	c.validateCache(bad)
	c.validateEvents(bad)
	c.validateTriggers(bad)
	c.validateRetention(bad)
	c.validateQueues(bad)
	if a := c.Console.LocalListen; a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			bad("console.localListen", "must be host:port (or \"\" for none), got %q", a)
		}
	}

	if a := c.Console.App; a != "" {
		if _, _, _, ok := c.ConsoleApp(); !ok {
			bad("console.app", "must be <project>/<domain>/<app name> (or \"\" for the built-in console), got %q", a)
		}
	}

	if p := c.Apps.PathPrefix; !appsPrefix.MatchString(p) || p == "/v2" || strings.HasPrefix(p, "/flyteidl2.") {
		bad("apps.pathPrefix", "must be a path of one or more segments (letters, digits, '-', '_', '.'), not the console's /v2, such as /apps; got %q", p)
	}
	if a := c.Apps.Listen; a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			bad("apps.listen", "must be host:port (or \"\" for none), got %q", a)
		}
	}
	switch c.Apps.Network {
	case "", "auto", "namespace", "host":
	default:
		bad("apps.network", "must be auto, namespace or host, got %q", c.Apps.Network)
	}
	if u := c.Apps.PublicURL; u != "" {
		parsed, err := url.Parse(u)
		if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" || !strings.Contains(u, "{name}") {
			bad("apps.publicURL", "must be an http(s) URL naming {name} (and usually {project} and {domain}), got %q", u)
		}
	}
	if a := c.KubeAPI.Listen; c.KubeAPI.Enabled {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			bad("kubeAPI.listen", "must be host:port, got %q", a)
		}
	}

	if !slices.Contains([]string{"debug", "info", "warn", "error"}, strings.ToLower(c.Log.Level)) {
		bad("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	if !slices.Contains([]string{"text", "json"}, strings.ToLower(c.Log.Format)) {
		bad("log.format", "must be text or json, got %q", c.Log.Format)
	}

	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid configuration: %w", errors.Join(errs...))
}

func urlScheme(s string) string {
	scheme, _, ok := strings.Cut(s, "://")
	if !ok {
		return ""
	}
	return strings.ToLower(scheme)
}

// validateCache checks the cache: section.
func (c *Config) validateCache(bad func(key, format string, args ...any)) {
	cc := c.Cache
	if cc.TTL < 0 {
		bad("cache.ttl", "must not be negative (0 keeps entries), got %s", cc.TTL)
	}
	if cc.MaxEntries < 0 {
		bad("cache.maxEntries", "must not be negative (0 means no bound), got %d", cc.MaxEntries)
	}
	if cc.MaxReservationHeartbeat < time.Second {
		bad("cache.maxReservationHeartbeat", "must be at least 1s, got %s", cc.MaxReservationHeartbeat)
	}
	if cc.HeartbeatGraceMultiplier < 1 {
		bad("cache.heartbeatGraceMultiplier", "must be at least 1, got %d", cc.HeartbeatGraceMultiplier)
	}
	if cc.SweepInterval < time.Second {
		bad("cache.sweepInterval", "must be at least 1s, got %s", cc.SweepInterval)
	}
}

// validateLocalResources checks executor.local.resources: the policy is one
// of its two words, the host overrides are positive quantities or empty
// (detected), gpus is -1 (detected) or a count.
func validateLocalResources(r LocalResources, bad func(key, format string, args ...any)) {
	if r.Unsatisfiable != UnsatisfiableWait && r.Unsatisfiable != UnsatisfiableFail {
		bad("executor.local.resources.unsatisfiable", "must be %q or %q, got %q", UnsatisfiableWait, UnsatisfiableFail, r.Unsatisfiable)
	}
	for _, f := range []struct{ key, v, example string }{
		{"executor.local.resources.cpus", r.CPUs, "4 or 1500m"},
		{"executor.local.resources.memory", r.Memory, "16Gi"},
	} {
		if f.v == "" {
			continue
		}
		if q, err := resource.ParseQuantity(f.v); err != nil || q.Sign() <= 0 {
			bad(f.key, "must be a positive quantity such as %s (or empty: detected), got %q", f.example, f.v)
		}
	}
	if r.GPUs < -1 {
		bad("executor.local.resources.gpus", "must be -1 (detected) or a number of GPUs, got %d", r.GPUs)
	}
}

// validateQueues checks the queues: list: every queue named, once, with
// limits that are 0 (unlimited) or positive.
func (c *Config) validateQueues(bad func(key, format string, args ...any)) {
	seen := map[string]bool{}
	for i, q := range c.Queues {
		key := fmt.Sprintf("queues[%d]", i)
		switch {
		case strings.TrimSpace(q.Name) == "":
			bad(key+".name", "must not be empty")
		case q.Name != strings.TrimSpace(q.Name) || strings.ContainsFunc(q.Name, func(r rune) bool { return r < ' ' }):
			bad(key+".name", "%q must not carry spaces around it or control characters", q.Name)
		case seen[q.Name]:
			bad(key+".name", "queue %q is declared twice", q.Name)
		}
		seen[q.Name] = true
		for _, l := range []struct {
			field string
			v     int
		}{{"maxActionConcurrency", q.MaxActionConcurrency}, {"maxRunConcurrency", q.MaxRunConcurrency}, {"maxDepth", q.MaxDepth}} {
			if l.v < 0 {
				bad(key+"."+l.field, "must not be negative (0 means unlimited), got %d", l.v)
			}
		}
	}
}

// validateLogLinks checks an executor's logLinks (at key): each a named
// template or preset its attempts can render (known placeholders with a
// value in scope, a usable URL), no name twice (a client lists links by
// name).
func validateLogLinks(key string, scope loglink.Scope, links []LogLink, bad func(key, format string, args ...any)) {
	seen := map[string]bool{}
	for i, l := range links {
		key := fmt.Sprintf("%s[%d]", key, i)
		ts, err := l.Templates(scope)
		if err != nil {
			bad(key, "%v", err)
			continue
		}
		for _, t := range ts {
			if seen[t.Name] {
				bad(key+".name", "link %q is declared twice", t.Name)
			}
			seen[t.Name] = true
		}
	}
}

// validateEvents checks the events: section: positive bounds, one event no
// larger than an attempt's whole history may be.
func (c *Config) validateEvents(bad func(key, format string, args ...any)) {
	e := c.Events
	if e.MaxPerAttempt < 1 || e.MaxPerAttempt > 1<<20 {
		bad("events.maxPerAttempt", "must be between 1 and 1048576, got %d", e.MaxPerAttempt)
	}
	if e.MaxAttemptBytes < 1 || e.MaxAttemptBytes > 1<<30 {
		bad("events.maxAttemptBytes", "must be between 1 and 1073741824, got %d", e.MaxAttemptBytes)
	}
	if e.MaxEventBytes < 1 || e.MaxEventBytes > e.MaxAttemptBytes {
		bad("events.maxEventBytes", "must be between 1 and events.maxAttemptBytes (%d), got %d", e.MaxAttemptBytes, e.MaxEventBytes)
	}
}

// validateTriggers checks the triggers: section.
func (c *Config) validateTriggers(bad func(key, format string, args ...any)) {
	t := c.Triggers
	if t.CheckInterval < 100*time.Millisecond || t.CheckInterval > time.Hour {
		bad("triggers.checkInterval", "must be between 100ms and 1h, got %s", t.CheckInterval)
	}
	if t.CatchUp != "all" && t.CatchUp != "latest" {
		bad("triggers.catchUp", "must be all or latest, got %q", t.CatchUp)
	}
	if t.MaxCatchUp < 1 || t.MaxCatchUp > 10000 {
		bad("triggers.maxCatchUp", "must be between 1 and 10000, got %d", t.MaxCatchUp)
	}
	if t.Minute < time.Second || t.Minute > time.Minute {
		bad("triggers.minute", "must be between 1s and 1m, got %s", t.Minute)
	}
}

// s3BucketName is what the S3 endpoint accepts as its bucket: S3's rules
// for bucket names, without dots.
var s3BucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)

// validateS3Endpoint checks storage.s3Endpoint. Messages never show the
// secret key.
func (c *Config) validateS3Endpoint(bad func(key, format string, args ...any)) {
	e := c.Storage.S3Endpoint
	if e.Listen != "" {
		if _, port, err := net.SplitHostPort(e.Listen); err != nil || port == "" {
			bad("storage.s3Endpoint.listen", "must be host:port (or \"\" for none), got %q", e.Listen)
		}
	}
	if !s3BucketName.MatchString(e.Bucket) {
		bad("storage.s3Endpoint.bucket", "must be 3 to 63 lowercase letters, digits and '-', got %q", e.Bucket)
	}
	switch e.TaskLocations {
	case TaskLocationsS3, TaskLocationsFile:
	default:
		bad("storage.s3Endpoint.taskLocations", "must be %q or %q, got %q", TaskLocationsS3, TaskLocationsFile, e.TaskLocations)
	}
	switch {
	case e.AccessKeyID != "" && e.SecretAccessKey == "":
		bad("storage.s3Endpoint.secretAccessKey", "must be set with storage.s3Endpoint.accessKeyID")
	case e.AccessKeyID == "" && e.SecretAccessKey != "":
		bad("storage.s3Endpoint.accessKeyID", "must be set with storage.s3Endpoint.secretAccessKey")
	}
	if strings.ContainsAny(e.AccessKeyID, " \t\r\n/") {
		bad("storage.s3Endpoint.accessKeyID", "must not contain whitespace or '/'")
	}
}

// validateS3 checks storage.s3: it applies to s3:// storage only, and its
// values must be usable. Messages never show the secret key.
func (c *Config) validateS3(bad func(key, format string, args ...any)) {
	s := c.Storage.S3
	if urlScheme(c.Storage.URL) != "s3" {
		if s != (S3Storage{}) {
			bad("storage.s3", "applies to s3:// storage only, and storage.url is %q", c.Storage.URL)
		}
		return
	}
	if u, err := url.Parse(c.Storage.URL); err == nil && u.RawQuery != "" {
		bad("storage.url", "takes no query parameters (s3://bucket[/prefix]); set the endpoint, region and credentials with storage.s3.*")
	}
	if s.Endpoint != "" {
		u, err := url.Parse(s.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			bad("storage.s3.endpoint", "must be an http:// or https:// URL without credentials or query, such as http://minio:9000, got %q", s.Endpoint)
		}
	}
	if s.Region != "" && !s3Region.MatchString(s.Region) {
		bad("storage.s3.region", "%q is not a region name (such as us-east-1)", s.Region)
	}
	switch {
	case s.AccessKeyID != "" && s.SecretAccessKey == "":
		bad("storage.s3.secretAccessKey", "must be set with storage.s3.accessKeyID")
	case s.AccessKeyID == "" && s.SecretAccessKey != "":
		bad("storage.s3.accessKeyID", "must be set with storage.s3.secretAccessKey")
	}
	if strings.ContainsAny(s.AccessKeyID, " \t\r\n") {
		bad("storage.s3.accessKeyID", "must not contain whitespace")
	}
	if strings.ContainsAny(s.SecretAccessKey, " \t\r\n") {
		bad("storage.s3.secretAccessKey", "must not contain whitespace")
	}
}

// s3Region is what a region name may be.
var s3Region = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// maxRunAsID is the highest uid or gid a process can be given ((uid_t)-1
// means "unchanged" to the kernel).
const maxRunAsID = 1<<32 - 2

func validateRunAs(r RunAs, bad func(key, format string, args ...any)) {
	switch r.Mode {
	case RunAsRange:
		if r.FirstUID == 0 {
			bad("executor.local.runAs.firstUID", "must not be 0 (root)")
		}
		if r.Count == 0 {
			bad("executor.local.runAs.count", "must be at least 1")
		}
		if last := uint64(r.FirstUID) + uint64(r.Count) - 1; r.Count > 0 && last > maxRunAsID {
			bad("executor.local.runAs.count", "firstUID %d + count %d passes the highest uid, %d", r.FirstUID, r.Count, uint64(maxRunAsID))
		}
		if r.GID > maxRunAsID {
			bad("executor.local.runAs.gid", "must be at most %d, got %d", uint64(maxRunAsID), r.GID)
		}
	case RunAsFixed:
		if r.UID == 0 {
			bad("executor.local.runAs.uid", "must be set to a user other than root (0) with mode fixed")
		}
		if r.UID > maxRunAsID {
			bad("executor.local.runAs.uid", "must be at most %d, got %d", uint64(maxRunAsID), r.UID)
		}
		if r.GID > maxRunAsID {
			bad("executor.local.runAs.gid", "must be at most %d, got %d", uint64(maxRunAsID), r.GID)
		}
	case RunAsManager:
	default:
		bad("executor.local.runAs.mode", "must be %s, %s or %s, got %q", RunAsRange, RunAsFixed, RunAsManager, r.Mode)
	}
}
