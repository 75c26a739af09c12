package local

import (
	"log/slog"
	"os"
	"strconv"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/loglink"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// logLinker renders executor.local.logLinks for each attempt.
type logLinker struct {
	templates []loglink.Template
	hostname  string
}

// newLogLinker parses the configured links. The configuration was
// validated when it was loaded, so an entry that does not parse here is
// left out (and said so) rather than stopping the executor.
func newLogLinker(links []config.LogLink, log *slog.Logger) logLinker {
	var l logLinker
	for i, link := range links {
		ts, err := link.Templates(loglink.Local)
		if err != nil {
			log.Warn("ignoring a log link", "key", "executor.local.logLinks["+strconv.Itoa(i)+"]", "error", err)
			continue
		}
		l.templates = append(l.templates, ts...)
	}
	l.hostname, _ = os.Hostname()
	return l
}

// links renders the links of attempt n of key, of task spec: the
// configured ones (else the manager's log endpoint) and the task's own
// (log_links), with its identity and the manager's host. Links on the
// manager stay rooted paths until a client reads them (loglink.Resolve).
func (l logLinker) links(key store.ActionKey, n int32, spec *task.TaskSpec) []*core.TaskLog {
	att := runstate.LogAttempt(key, n)
	v := loglink.IdentityValues(att)
	v[loglink.Hostname] = l.hostname
	return loglink.ForAttempt(att, l.templates, spec, v)
}
