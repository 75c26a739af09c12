// Package contract is the task-process contract that every executor driver
// honours, so that the Flyte SDK's `a0` runtime behaves the same on a host
// process and in a pod:
//
//   - RenderArgs fills the `{{.input}}`-style templates of
//     TaskTemplate.container.args;
//   - BuildEnv assembles the environment the runtime requires;
//   - Classify reads what the process left behind (exit status, error.pb,
//     outputs.pb) and turns it into a machine event.
//
// It knows nothing about how a process is started or where state is stored.
package contract

import (
	"regexp"
	"strings"
	"time"

	"fmgr.dev/internal/runlayout"
)

// emptyCheckpoint is how a first attempt's previous-checkpoint template is
// rendered: the runtime reads the two characters `""` as "none".
const emptyCheckpoint = `""`

// Values are what the argv templates stand for, for one attempt.
type Values struct {
	// InputURI is where the action's inputs live: a directory for a root
	// action, the full `.../inputs.pb` path for a child. Either form is
	// accepted; see runlayout.InputFile.
	InputURI string
	// OutputPrefix is the attempt's output directory.
	OutputPrefix string
	// RawOutputDataPrefix is where the task may write offloaded data.
	RawOutputDataPrefix string
	// CheckpointOutputPrefix is where this attempt writes checkpoints.
	CheckpointOutputPrefix string
	// PrevCheckpointPrefix is the previous attempt's checkpoint prefix; empty
	// for a first attempt, rendered as the two characters `""`.
	PrevCheckpointPrefix string
	// RunName and ActionName; when empty the template stays in place and the
	// runtime falls back to the RUN_NAME / ACTION_NAME variables.
	RunName    string
	ActionName string
	// RunStartTime is rendered RFC3339 in UTC; when zero the template stays
	// in place and the runtime falls back to a constant epoch.
	RunStartTime time.Time
}

// templateRE matches `{{.name}}`, case-insensitively and with any spaces
// inside the braces, as the reference backend does.
var templateRE = regexp.MustCompile(`\{\{\s*\.([A-Za-z][A-Za-z0-9_]*)\s*\}\}`)

// RenderArgs returns args with every known template replaced. Unknown
// templates (`{{.perRetryUniqueKey}}`, `{{.Inputs.x}}`, ...) are left as they
// are. args is not modified.
func RenderArgs(args []string, v Values) []string {
	lookup := v.lookup()
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = templateRE.ReplaceAllStringFunc(a, func(m string) string {
			name := strings.ToLower(templateRE.FindStringSubmatch(m)[1])
			if val, ok := lookup[name]; ok {
				return val
			}
			return m
		})
	}
	return out
}

func (v Values) lookup() map[string]string {
	prev := v.PrevCheckpointPrefix
	if prev == "" {
		prev = emptyCheckpoint
	}
	m := map[string]string{
		"input":                  runlayout.InputFile(v.InputURI),
		"inputprefix":            runlayout.InputPrefix(v.InputURI),
		"outputprefix":           v.OutputPrefix,
		"rawoutputdataprefix":    v.RawOutputDataPrefix,
		"checkpointoutputprefix": v.CheckpointOutputPrefix,
		"prevcheckpointprefix":   prev,
	}
	if v.RunName != "" {
		m["runname"] = v.RunName
	}
	if v.ActionName != "" {
		m["actionname"] = v.ActionName
	}
	if !v.RunStartTime.IsZero() {
		m["runstarttime"] = v.RunStartTime.UTC().Format(time.RFC3339)
	}
	return m
}
