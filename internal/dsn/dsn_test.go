package dsn

import (
	"slices"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, c := range []struct {
		in, want string
		secrets  []string // what Secrets must report
	}{
		{"", "", nil},
		// URL userinfo.
		{"postgres://fm:hunter2@db:5432/fm?sslmode=disable", "postgres://fm:REDACTED@db:5432/fm?sslmode=disable", []string{"hunter2"}},
		{"postgresql://fm:p%40ss%2Fw@db/fm", "postgresql://fm:REDACTED@db/fm", []string{"p@ss/w", "p%40ss%2Fw"}},
		{"postgres://fm:p@ss@db/fm", "postgres://fm:REDACTED@db/fm", []string{"p@ss"}},
		{"postgres://fm@db/fm", "postgres://fm@db/fm", nil},
		// Query parameters, any case, order and other parameters kept.
		{"postgres://db/fm?user=fm&password=hunter2&sslmode=require", "postgres://db/fm?user=fm&password=REDACTED&sslmode=require", []string{"hunter2"}},
		{"postgres://db/fm?PASSWORD=hunter2", "postgres://db/fm?PASSWORD=REDACTED", []string{"hunter2"}},
		{"postgres://db/fm?sslmode=verify-full&SslPassword=k3y%20pass", "postgres://db/fm?sslmode=verify-full&SslPassword=REDACTED", []string{"k3y%20pass", "k3y pass"}},
		{"postgres://db/fm?pass%77ord=hunter2", "postgres://db/fm?pass%77ord=REDACTED", []string{"hunter2"}},
		{"postgres://u:one@db/fm?password=two", "postgres://u:REDACTED@db/fm?password=REDACTED", []string{"one", "two"}},
		// Embedded mode stays as written.
		{"sqlite:///var/lib/flyte-manager/flyte-manager.db", "sqlite:///var/lib/flyte-manager/flyte-manager.db", nil},
		{"sqlite://rel.db?_pragma=busy_timeout(5000)", "sqlite://rel.db?_pragma=busy_timeout(5000)", nil},
		{"file:/var/lib/m.db", "file:/var/lib/m.db", nil},
		// Key=value strings, quoting and escapes.
		{"host=db user=fm password=hunter2 dbname=fm", "host=db user=fm password=REDACTED dbname=fm", []string{"hunter2"}},
		{"host=db password='hunter 2' dbname=fm", "host=db password=REDACTED dbname=fm", []string{"hunter 2", "'hunter 2'"}},
		{`host=db password='it\'s \\ ok' dbname=fm`, "host=db password=REDACTED dbname=fm", []string{`it's \ ok`}},
		{"host=db  PASSWORD = hunter2\tsslpassword=k", "host=db  PASSWORD = REDACTED\tsslpassword=REDACTED", []string{"hunter2", "k"}},
		{`password=a\ b host=db`, "password=REDACTED host=db", []string{"a b", `a\ b`}},
		{"host=db:5432 password=hunter2", "host=db:5432 password=REDACTED", []string{"hunter2"}},
		// What cannot be taken apart is not shown at all.
		{"postgres://fm:hunter2@db:port/fm", Unparseable, nil},
		{"postgres://fm:hun#ter2@db/fm", Unparseable, nil},
		{"postgres://fm:12#ab@db/fm", Unparseable, nil},
		{"postgres://fm:hunter%zz@db/fm", Unparseable, nil},
		{"fm:hunter2@db/fm", Unparseable, nil},
		{"dbname:x password=hunter2", Unparseable, nil},
		{"host=db password='hunter2", Unparseable, nil},
		{"host=db password", Unparseable, nil},
		{"hunter2", Unparseable, nil},
	} {
		got := Redact(c.in)
		if got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
		secrets := Secrets(c.in)
		for _, s := range c.secrets {
			if !slices.Contains(secrets, s) {
				t.Errorf("Secrets(%q) = %q lacks %q", c.in, secrets, s)
			}
		}
		for _, s := range secrets {
			if strings.Contains(got, s) && s != "" {
				t.Errorf("Redact(%q) = %q still shows %q", c.in, got, s)
			}
		}
		for _, leak := range []string{"hunter", "k3y", "it's"} {
			if strings.Contains(got, leak) {
				t.Errorf("Redact(%q) = %q leaks %q", c.in, got, leak)
			}
		}
	}
}
