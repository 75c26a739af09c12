package compose

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestWarnsWhenExposed(t *testing.T) {
	for host, warn := range map[string]bool{
		"127.0.0.1": false, "127.0.0.5": false, "::1": false, "[::1]": false, "localhost": false,
		"": true, "0.0.0.0": true, "::": true, "192.168.1.5": true, "flyte.example.com": true,
	} {
		var buf bytes.Buffer
		WarnIfExposed(slog.New(slog.NewTextHandler(&buf, nil)), host)
		got := buf.String()
		if warn != (strings.Contains(got, "level=WARN") && strings.Contains(got, "WITHOUT AUTHENTICATION") && strings.Contains(got, "run any command")) {
			t.Errorf("host %q: logged %q", host, got)
		}
	}
}
