package contract

import (
	"strings"
	"testing"

	"fmgr.dev/executor/machine"
	"fmgr.dev/internal/runlayout"
)

// A raw container's command is not the runtime: exit 2 is its own failure
// (a shell's syntax error, say), retried like any crash, not the runtime's
// usage error; and its message does not speak of the runtime's files.
func TestClassifyRawContainerExit(t *testing.T) {
	for _, code := range []int{1, UsageExitCode} {
		r := ClassifyFiles(Exit{Code: code, StderrTail: []string{"boom"}}, Files{Raw: true, OutputNames: []string{"x"}})
		if r.Outcome != Crashed || r.Error.Kind != machine.KindUser || !r.Error.Recoverable {
			t.Errorf("raw exit %d: %v %+v, want a recoverable user crash", code, r.Outcome, r.Error)
			continue
		}
		if !strings.HasPrefix(r.Error.Message, "the container's command exited with code") || strings.Contains(r.Error.Message, runlayout.ErrorFile) ||
			!strings.Contains(r.Error.Message, "boom") {
			t.Errorf("raw exit %d: message %q", code, r.Error.Message)
		}
	}
	if r := ClassifyFiles(Exit{Code: UsageExitCode}, Files{}); r.Error == nil || r.Error.Code != CodeUsageError {
		t.Errorf("the runtime's exit 2 is no longer a usage error: %+v", r)
	}
}
