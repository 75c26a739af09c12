package contract

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/runlayout"
	"google.golang.org/protobuf/proto"
)

// Error codes Classify produces when the process left no error document.
const (
	CodeUsageError       = "UsageError"
	CodeOutputsMissing   = "OutputsMissing"
	CodeBadErrorDocument = "BadErrorDocument"
)

// UsageExitCode is what click exits with on a usage error (missing option,
// e.g. no _U_RUN_BASE): the same argv would fail again.
const UsageExitCode = 2

// Bounds on each stream's excerpt quoted in a failure message.
const (
	tailLines = 12
	tailBytes = 2048
)

// Exit is how an attempt's process ended, as the driver saw it.
type Exit struct {
	// Code is the exit code; meaningful when Signal is "".
	Code int
	// Signal names the signal that killed the process, if one did.
	Signal string
	// TimedOut: the driver killed the process because a timeout fired.
	TimedOut bool
	// Aborted: the driver killed the process because of an abort.
	Aborted bool
	// Unobserved: the process ran under an earlier manager, which is gone;
	// only what it left in its output directory tells how it ended.
	Unobserved bool
	// StdoutTail and StderrTail hold the last lines of each stream. Both
	// are quoted: the runtime prints a traceback's frames to stderr but its
	// final "Type: message" line to stdout (flyte/_excepthook.py).
	StdoutTail []string
	StderrTail []string
}

// Outcome is the class of an attempt's end.
type Outcome int

// Outcomes.
const (
	// Succeeded: a complete outputs.pb, no error.pb.
	Succeeded Outcome = iota + 1
	// Failed: error.pb written (whatever the exit code), or a failure
	// Classify can attribute (usage error, outputs missing).
	Failed
	// Crashed: non-zero exit or signal without error.pb or complete outputs.
	Crashed
	// TimedOut: killed by the driver's timeout.
	TimedOut
	// Aborted: killed by the driver because of an abort.
	Aborted
	// Lost: the process ended unobserved (under an earlier manager) and
	// left no complete result: an orphan, for the platform to retry.
	Lost
)

func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "Succeeded"
	case Failed:
		return "Failed"
	case Crashed:
		return "Crashed"
	case TimedOut:
		return "TimedOut"
	case Aborted:
		return "Aborted"
	case Lost:
		return "Lost"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is the classified end of an attempt.
type Result struct {
	Outcome Outcome
	// Error describes Failed and Crashed outcomes.
	Error *machine.Error
	// Document is the error document as the task wrote it, if it did.
	Document *core.ContainerError
	Exit     Exit
	// Warning is set when the result was read from files the process wrote
	// before it died (or before its manager did): it says how it ended, for
	// the log and the attempt's log.
	Warning string
}

// Files is what an attempt left in its output directory.
type Files struct {
	// ErrorDoc is the content of error.pb, nil when there is none.
	ErrorDoc []byte
	// Outputs is the content of outputs.pb, nil when there is none.
	Outputs []byte
	// OutputNames are the outputs the task's interface declares: a complete
	// outputs.pb carries every one of them.
	OutputNames []string
	// Raw says the task is a raw container (TaskTemplate.type
	// "raw-container"), whose command knows nothing of the runtime's files:
	// exit 0 is its success when it declares no outputs.
	Raw bool
}

// RawContainer is the task type of containers that do not run the Flyte
// runtime.
const RawContainer = "raw-container"

// Classify decides how an attempt ended from its exit and what it left in its
// output directory: errorDoc is the content of error.pb (nil when absent) and
// outputsFound says whether outputs.pb exists (taken as complete). See
// ClassifyFiles for the rules.
func Classify(exit Exit, errorDoc []byte, outputsFound bool) Result {
	f := Files{ErrorDoc: errorDoc}
	if outputsFound {
		f.Outputs = []byte{}
	}
	return ClassifyFiles(exit, f)
}

// ClassifyFiles decides how an attempt ended. Rules:
//
//   - killed by the driver for an abort or a timeout: Aborted / TimedOut;
//   - a readable error.pb: Failed with its code, message, origin (kind) and
//     recoverability, whatever the exit code (module-load failures write it
//     and exit non-zero);
//   - a complete outputs.pb (see OutputsComplete) and no error.pb: Succeeded,
//     whatever the exit. The SDK's runtime sometimes dies of SIGABRT during
//     interpreter shutdown after it wrote its outputs: the task has ended,
//     and running it again would repeat its side effects; the Result then
//     carries a Warning naming how the process died;
//   - the process was not watched to its end (Exit.Unobserved, an attempt of
//     an earlier manager) and left no complete file: Lost;
//   - exit 0 without complete outputs, or an unreadable error.pb: a
//     recoverable user failure (the task's own process broke the contract);
//   - exit 2: the runtime's usage error, a non-recoverable system failure
//     (the command line the platform built is wrong, and stays wrong);
//   - anything else: Crashed, with the exit code or signal and the last
//     stdout and stderr lines in the message. The machine counts a crash
//     against the task's own retries: the process that died is the user's.
func ClassifyFiles(exit Exit, f Files) Result {
	r := Result{Exit: exit}
	if exit.Aborted {
		r.Outcome = Aborted
		return r
	}
	if exit.TimedOut {
		r.Outcome = TimedOut
		return r
	}
	abnormal := exit.Signal != "" || exit.Code != 0
	if f.ErrorDoc != nil {
		var doc core.ErrorDocument
		err := proto.Unmarshal(f.ErrorDoc, &doc)
		if err == nil && doc.GetError() != nil {
			ce := doc.GetError()
			kind := machine.ErrorKind(ce.GetOrigin())
			if kind != machine.KindUser && kind != machine.KindSystem {
				kind = machine.KindUnknown
			}
			r.Outcome, r.Document = Failed, ce
			r.Error = &machine.Error{
				Kind:        kind,
				Code:        ce.GetCode(),
				Message:     ce.GetMessage(),
				Recoverable: ce.GetKind() == core.ContainerError_RECOVERABLE,
				Reported:    true,
			}
			if exit.Signal != "" || exit.Unobserved {
				r.Warning = "the task wrote " + runlayout.ErrorFile + " and then " + exit.how() + "; its error is recorded from the file"
			}
			return r
		}
		if exit.Unobserved {
			r.Outcome = Lost
			return r
		}
		why := "it is empty"
		if err != nil {
			why = err.Error()
		}
		r.Outcome = Failed
		r.Error = &machine.Error{
			Kind: machine.KindUser, Code: CodeBadErrorDocument, Recoverable: true,
			Message: "the task wrote an error document that cannot be read: " + why + exit.tails(),
		}
		return r
	}
	if OutputsComplete(f.Outputs, f.OutputNames) || (f.Raw && !abnormal && !exit.Unobserved && len(f.OutputNames) == 0) {
		r.Outcome = Succeeded
		if abnormal || exit.Unobserved {
			r.Warning = "the task wrote " + runlayout.OutputsFile + " completely and then " + exit.how() + "; its outputs are recorded from the file"
		}
		return r
	}
	switch {
	case exit.Unobserved:
		r.Outcome = Lost
	case !abnormal:
		what := "without writing " + runlayout.OutputsFile + " or " + runlayout.ErrorFile
		if f.Outputs != nil {
			what = "with an incomplete " + runlayout.OutputsFile + " and no " + runlayout.ErrorFile
		}
		r.Outcome = Failed
		r.Error = &machine.Error{
			Kind: machine.KindUser, Code: CodeOutputsMissing, Recoverable: true,
			Message: "the task exited 0 " + what + exit.tails(),
		}
	case !f.Raw && exit.Signal == "" && exit.Code == UsageExitCode:
		r.Outcome = Failed
		r.Error = &machine.Error{
			Kind: machine.KindSystem, Code: CodeUsageError, Recoverable: false,
			Message: "the task runtime rejected its command line (exit 2)" + exit.tails(),
		}
	default:
		msg := "the task process " + exit.how() + " without writing " + runlayout.ErrorFile
		if f.Raw {
			// A raw container's command knows nothing of error files.
			msg = "the container's command " + exit.how()
		}
		r.Outcome = Crashed
		r.Error = &machine.Error{
			Kind: machine.KindUser, Code: machine.CodeCrashed, Recoverable: true,
			Message: msg + exit.tails(),
		}
	}
	return r
}

// OutputsComplete says whether outputs (the content of outputs.pb, nil when
// absent) is a whole Outputs message carrying every declared output. The
// SDK writes the file in place, so a process that died while writing it can
// leave a prefix: a truncated message usually fails to parse, and one cut
// at a field boundary lacks a declared output.
func OutputsComplete(outputs []byte, names []string) bool {
	if outputs == nil {
		return false
	}
	var out task.Outputs
	if err := proto.Unmarshal(outputs, &out); err != nil {
		return false
	}
	have := make(map[string]bool, len(out.GetLiterals()))
	for _, l := range out.GetLiterals() {
		if l.GetValue() != nil {
			have[l.GetName()] = true
		}
	}
	for _, n := range names {
		if !have[n] {
			return false
		}
	}
	return true
}

// OutputNames lists the outputs an interface declares.
func OutputNames(iface *core.TypedInterface) []string {
	var names []string
	for _, v := range iface.GetOutputs().GetVariables() {
		names = append(names, v.GetKey())
	}
	return names
}

// how says how the process ended, for messages.
func (e Exit) how() string {
	switch {
	case e.Unobserved:
		return "ended while no manager watched it"
	case e.Signal != "":
		return "was killed by signal " + e.Signal
	}
	return fmt.Sprintf("exited with code %d", e.Code)
}

// ClassifyDir is ClassifyFiles for an output directory on the local
// filesystem. The error is for I/O failures other than a missing file.
func ClassifyDir(outputDir string, exit Exit, outputNames ...string) (Result, error) {
	f, err := Files{OutputNames: outputNames}.ReadDir(outputDir)
	if err != nil {
		return Result{}, err
	}
	return ClassifyFiles(exit, f), nil
}

// ReadDir returns f with the error document and the outputs that
// outputDir, a directory on the local filesystem, holds.
func (f Files) ReadDir(outputDir string) (Files, error) {
	var err error
	if f.ErrorDoc, err = readIfExists(filepath.Join(outputDir, runlayout.ErrorFile)); err != nil {
		return f, fmt.Errorf("read error document: %w", err)
	}
	if f.Outputs, err = readIfExists(filepath.Join(outputDir, runlayout.OutputsFile)); err != nil {
		return f, fmt.Errorf("read outputs: %w", err)
	}
	return f, nil
}

// readIfExists reads a file: nil for a missing one, never nil for one that
// exists.
func readIfExists(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	case b == nil:
		b = []byte{}
	}
	return b, nil
}

// Event is the machine event for the result of the given attempt.
func (r Result) Event(attempt uint32) machine.Event {
	switch r.Outcome {
	case Succeeded:
		return machine.Succeeded{Attempt: attempt}
	case TimedOut:
		return machine.TimedOut{Attempt: attempt, Code: machine.CodeMaxRuntime}
	case Aborted:
		return machine.AbortRequested{Reason: "attempt process stopped"}
	case Crashed:
		return machine.Crashed{Attempt: attempt, ExitCode: r.Exit.Code, Signal: r.Exit.Signal, Message: r.Error.Message}
	case Lost:
		return machine.Orphaned{Attempt: attempt}
	}
	e := r.Error
	if e == nil {
		e = &machine.Error{Kind: machine.KindSystem, Code: "Unknown", Recoverable: true}
	}
	return machine.Failed{Attempt: attempt, Kind: e.Kind, Recoverable: e.Recoverable, Code: e.Code, Message: e.Message, Reported: e.Reported}
}

// tails quotes the end of both streams for an error message.
func (e Exit) tails() string {
	return quote("stdout", e.StdoutTail) + quote("stderr", e.StderrTail)
}

// quote formats the last lines of a stream, bounded in lines and bytes (the
// end is kept: that is where tracebacks conclude).
func quote(stream string, lines []string) string {
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	s := strings.Join(lines, "\n")
	if len(s) > tailBytes {
		s = s[len(s)-tailBytes:]
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
		s = strings.ToValidUTF8(s, "")
	}
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return "\nlast " + stream + " lines:\n" + s
}
