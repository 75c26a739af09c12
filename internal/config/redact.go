package config

import (
	"bytes"
	"slices"

	"go.yaml.in/yaml/v3"

	"fmgr.dev/internal/dsn"
)

// RedactedValue replaces secrets in printed configuration.
const RedactedValue = dsn.Redacted

// Redacted returns a copy safe to print or log: the signing key, the S3
// secret access keys (of the store and of the S3 endpoint), the secrets key, the bootstrap API key, the tracing exporter's headers and any password in the database DSN
// are replaced (a DSN
// that cannot be taken apart is shown as dsn.Unparseable).
func (c Config) Redacted() Config {
	r := c
	r.Projects.Seed = slices.Clone(c.Projects.Seed)
	r.Server.AllowedHosts = slices.Clone(c.Server.AllowedHosts)
	r.Server.CORS.AllowedOrigins = slices.Clone(c.Server.CORS.AllowedOrigins)
	if r.Storage.SigningKey != "" {
		r.Storage.SigningKey = RedactedValue
	}
	if r.Storage.S3.SecretAccessKey != "" {
		r.Storage.S3.SecretAccessKey = RedactedValue
	}
	if r.Storage.S3Endpoint.SecretAccessKey != "" {
		r.Storage.S3Endpoint.SecretAccessKey = RedactedValue
	}
	if r.Telemetry.Tracing.Headers != "" {
		r.Telemetry.Tracing.Headers = RedactedValue
	}
	if r.Auth.Console.ClientSecret != "" {
		r.Auth.Console.ClientSecret = RedactedValue
	}
	if r.Auth.BootstrapKey != "" {
		r.Auth.BootstrapKey = RedactedValue
	}
	if r.Secrets.Key != "" {
		r.Secrets.Key = RedactedValue
	}
	r.Database.DSN = dsn.Redact(c.Database.DSN)
	return r
}

// YAML renders the configuration with secrets redacted.
func (c Config) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c.Redacted()); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
