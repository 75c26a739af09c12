package config

import (
	"strings"
	"testing"
)

// The queues: list: none by default, read from YAML with every limit, and
// every bad entry named by its key.
func TestQueuesSection(t *testing.T) {
	isolate(t)
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Queues) != 0 {
		t.Errorf("default queues %+v, want none", c.Queues)
	}

	ok := writeFile(t, t.TempDir(), "ok.yaml", `
queues:
  - name: serial-1
    maxActionConcurrency: 1
  - name: depth-limited
    maxDepth: 5
  - name: runs-1
    maxRunConcurrency: 1
`)
	c, err = Load(Sources{Files: []string{ok}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Queue{{Name: "serial-1", MaxActionConcurrency: 1}, {Name: "depth-limited", MaxDepth: 5}, {Name: "runs-1", MaxRunConcurrency: 1}}
	if len(c.Queues) != len(want) {
		t.Fatalf("queues %+v, want %+v", c.Queues, want)
	}
	for i := range want {
		if c.Queues[i] != want[i] {
			t.Errorf("queues[%d] = %+v, want %+v", i, c.Queues[i], want[i])
		}
	}

	bad := writeFile(t, t.TempDir(), "bad.yaml", `
queues:
  - name: ""
  - name: a
    maxActionConcurrency: -1
    maxRunConcurrency: -2
    maxDepth: -3
  - name: a
`)
	_, err = Load(Sources{Files: []string{bad}})
	for _, key := range []string{"queues[0].name:", "queues[1].maxActionConcurrency:", "queues[1].maxRunConcurrency:", "queues[1].maxDepth:", `queues[2].name: queue "a" is declared twice`} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s:\n%v", key, err)
		}
	}

	unknown := writeFile(t, t.TempDir(), "unknown.yaml", "queues:\n  - name: a\n    maxConcurrency: 1\n")
	if _, err := Load(Sources{Files: []string{unknown}}); err == nil || !strings.Contains(strings.ToLower(err.Error()), "maxconcurrency") {
		t.Errorf("an unknown key in a queue is accepted: %v", err)
	}
}
