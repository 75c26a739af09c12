package config

import (
	"strings"
	"testing"
)

func TestTracingConfig(t *testing.T) {
	c := Default()
	if c.Telemetry.Tracing.Enabled || c.Telemetry.Tracing.ServiceName != DefaultServiceName || c.Telemetry.Tracing.SampleRatio != 1 {
		t.Fatalf("tracing defaults: %+v", c.Telemetry.Tracing)
	}
	bad := func(tr Tracing) []string {
		var keys []string
		tr.validate(func(key, format string, args ...any) { keys = append(keys, key) })
		return keys
	}
	if k := bad(Tracing{Enabled: true, Protocol: "grpc", SampleRatio: 0.5, Headers: "a=b,c=d%20e", ResourceAttributes: "deployment.environment=prod"}); len(k) != 0 {
		t.Errorf("a good tracing section is refused: %v", k)
	}
	for _, tc := range []struct {
		tr  Tracing
		key string
	}{
		{Tracing{Enabled: true, Protocol: "http/json"}, "telemetry.tracing.protocol"},
		{Tracing{Enabled: true, SampleRatio: 2}, "telemetry.tracing.sampleRatio"},
		{Tracing{Enabled: true, Headers: "token"}, "telemetry.tracing.headers"},
		{Tracing{Enabled: true, ResourceAttributes: "=x"}, "telemetry.tracing.resourceAttributes"},
		{Tracing{Enabled: true, Endpoint: "ftp://c"}, "telemetry.tracing.endpoint"},
	} {
		if k := bad(tc.tr); len(k) != 1 || k[0] != tc.key {
			t.Errorf("%+v: refused keys %v, want [%s]", tc.tr, k, tc.key)
		}
	}
	// The headers carry tokens: never printed.
	c.Telemetry.Tracing.Headers = "authorization=Bearer%20s3cret"
	if y, err := c.YAML(); err != nil || strings.Contains(string(y), "s3cret") {
		t.Errorf("printed configuration shows the tracing headers (%v):\n%s", err, y)
	}
	// A bad header's error does not repeat its value.
	if _, err := ParseKeyValues("authorization=%zzs3cret"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("ParseKeyValues error %v", err)
	}
}
