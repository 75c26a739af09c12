// Package runlayout is where a run's data lives in blob storage: the run's
// base, each attempt's directory under it, the file names the SDK's runtime
// reads and writes there, and the content-addressed inputs outside every
// run. The run state (which creates runs and reads their outputs), the
// executor (which hands the locations to task processes) and the cache
// (which copies outputs between attempts) all lay data out through it, so
// the three cannot disagree about where a file is.
//
// Keys (relative to the blob store's root; processes see Store.URI(key)):
//
//	runs/<org|_>/<project>/<domain>/<run>/               run base (_U_RUN_BASE)
//	runs/.../<run>/<action>/<attempt>/                    an attempt's outputs
//	runs/.../<run>/<action>/<attempt>/_logs/              its shipped log (AttemptLogDir)
//	offloaded-inputs/<org|_>/<project>/<domain>/<hash>/   run inputs: UploadInputs'
//	                                                      and CreateRun's inline ones
//
// Inputs live by content hash, outside any run's prefix, so that storing
// them never touches a run that already exists.
package runlayout

import (
	"path"
	"strconv"
	"strings"
)

// File names the SDK's runtime reads and writes under an input or output
// prefix (flyte/_internal/runtime/io.py).
const (
	InputsFile     = "inputs.pb"
	OutputsFile    = "outputs.pb"
	ErrorFile      = "error.pb"
	ReportFile     = "report.html"
	CheckpointsDir = "_flytecheckpoints"
)

// scope is the org/project/domain part of a key. An empty org (what the SDK
// sends from a localhost endpoint) is spelled `_` so that keys never have an
// empty segment.
func scope(org, project, domain string) string {
	if org == "" {
		org = "_"
	}
	return path.Join(org, project, domain)
}

// ScopeDir is the org/project/domain part of a key (`<org|_>/<project>/<domain>`),
// as runs, run inputs and uploads are laid out under their roots.
func ScopeDir(org, project, domain string) string { return scope(org, project, domain) }

// RunBaseKey is the default base of a run, as a storage key.
func RunBaseKey(org, project, domain, run string) string {
	return path.Join("runs", scope(org, project, domain), run)
}

// IsAttemptKeyIn reports whether key is the output directory of an attempt
// of a run of org/project/domain in the default layout:
// runs/<org|_>/<project>/<domain>/<run>/<action>/<attempt>, exactly. The
// cache refuses a client's entry whose outputs are anything else. Exactly,
// because a run's run_base_dir may lie anywhere in storage, so another
// project's run can have its base below this project's runs/ prefix; its
// attempt directories are always deeper than this project's own.
func IsAttemptKeyIn(key, org, project, domain string) bool {
	rest, ok := strings.CutPrefix(key, RunBaseKey(org, project, domain, "")+"/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return false
	}
	_, err := strconv.ParseUint(parts[2], 10, 32)
	return err == nil
}

// RunBaseUnder is a run's base below a prefix the client asked for
// (run_spec.run_base_dir): `<prefix>/<org>/<project>/<domain>/<run>`, as the
// reference lays it out, so two runs never share one base.
func RunBaseUnder(prefix, org, project, domain, run string) string {
	return strings.TrimRight(prefix, "/") + "/" + path.Join(scope(org, project, domain), run)
}

// OffloadedInputsRoot is the key prefix of every run's content-addressed
// inputs, which only the manager writes.
const OffloadedInputsRoot = "offloaded-inputs"

// OffloadedInputsDir is the parent of a project/domain's content-addressed
// inputs, as a storage key.
func OffloadedInputsDir(org, project, domain string) string {
	return path.Join(OffloadedInputsRoot, scope(org, project, domain))
}

// OffloadedInputsUnder is the parent of a project/domain's content-addressed
// inputs below a prefix the client asked for (UploadInputs.base_dir):
// `<prefix>/offloaded-inputs/<org|_>/<project>/<domain>`.
func OffloadedInputsUnder(prefix, org, project, domain string) string {
	return strings.TrimRight(prefix, "/") + "/" + OffloadedInputsDir(org, project, domain)
}

// IsOffloadedInputsKeyOf reports whether key is a directory of
// content-addressed inputs of org/project/domain, as UploadInputs writes
// them: `[<prefix>/]offloaded-inputs/<org|_>/<project>/<domain>/<sha256>`,
// exactly. A run may only start from inputs of its own project and domain:
// another project's inputs end in its own scope, wherever its prefix is.
func IsOffloadedInputsKeyOf(key, org, project, domain string) bool {
	dir, hash := path.Split(key)
	dir = strings.TrimSuffix(dir, "/")
	own := OffloadedInputsDir(org, project, domain)
	if dir != own && !strings.HasSuffix(dir, "/"+own) {
		return false
	}
	if len(hash) != 64 {
		return false
	}
	for _, c := range hash {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// AttemptDir is the output directory of one attempt:
// `<runBase>/<action>/<attempt>`. The SDK's fallback for a FAILED child
// without an error in the update reads `<runBase>/<action>/1/error.pb`, so
// the layout must not add anything (like the reference's shard) in between.
func AttemptDir(runBase, action string, attempt uint32) string {
	return JoinURI(runBase, action, strconv.FormatUint(uint64(attempt), 10))
}

// InputFile normalises an input URI to the inputs.pb file: a root action's
// input is a directory, a child's is already `<dir>/inputs.pb`.
func InputFile(uri string) string {
	return JoinURI(InputPrefix(uri), InputsFile)
}

// InputPrefix is the directory that holds inputs.pb.
func InputPrefix(uri string) string {
	uri = strings.TrimRight(uri, "/")
	uri = strings.TrimSuffix(uri, "/"+InputsFile)
	return strings.TrimRight(uri, "/")
}

// JoinURI appends path elements to a URI or path with single slashes, leaving
// the scheme's `//` alone (filepath.Join would turn s3:// into s3:/).
func JoinURI(base string, elems ...string) string {
	out := strings.TrimRight(base, "/")
	for _, e := range elems {
		e = strings.Trim(e, "/")
		if e == "" {
			continue
		}
		switch {
		case out == "" && strings.HasPrefix(base, "/"):
			out = "/" + e
		case out == "":
			out = e
		default:
			out += "/" + e
		}
	}
	return out
}

// LogsDir is the directory, inside an attempt's output directory, where the
// executor ships the attempt's log (package logship lays out its objects).
const LogsDir = "_logs"

// AttemptLogDir is where attempt's log is stored: `<runBase>/<action>/<attempt>/_logs`,
// beside the attempt's outputs and under the run's base, so that deleting a
// run's prefix deletes its logs with everything else it owned.
func AttemptLogDir(runBase, action string, attempt uint32) string {
	return JoinURI(AttemptDir(runBase, action, attempt), LogsDir)
}
