package nodeagent

import "testing"

// TestExpand: $(VAR) references as Kubernetes expands them in env values,
// command and args.
func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two", "EMPTY": ""}
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "1"},
		{"x-$(A)-$(B)-y", "x-1-two-y"},
		{"$(EMPTY)z", "z"},
		{"$(UNKNOWN)", "$(UNKNOWN)"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"cost $5", "cost $5"},
		{"$(A", "$(A"},
		{"end$", "end$"},
	} {
		if got := expand(c.in, vars); got != c.want {
			t.Errorf("expand(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
