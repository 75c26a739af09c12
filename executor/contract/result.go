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
	// Succeeded: exit 0, outputs.pb written, no error.pb.
	Succeeded Outcome = iota + 1
	// Failed: error.pb written (whatever the exit code), or a failure
	// Classify can attribute (usage error, outputs missing).
	Failed
	// Crashed: non-zero exit or signal without error.pb.
	Crashed
	// TimedOut: killed by the driver's timeout.
	TimedOut
	// Aborted: killed by the driver because of an abort.
	Aborted
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
}

// Classify decides how an attempt ended from its exit and what it left in its
// output directory: errorDoc is the content of error.pb (nil when absent) and
// outputsFound says whether outputs.pb exists. Rules:
//
//   - killed for an abort or a timeout: Aborted / TimedOut;
//   - error.pb present: Failed with its code, message, origin (kind) and
//     recoverability, whatever the exit code (module-load failures write it
//     and exit non-zero); an unreadable one is a recoverable system failure;
//   - exit 0: Succeeded if outputs.pb exists, else a recoverable system
//     failure (the runtime always writes outputs.pb on success);
//   - exit 2: the runtime's usage error, a non-recoverable system failure;
//   - anything else: Crashed, with the exit code or signal and the last
//     stdout and stderr lines in the message.
func Classify(exit Exit, errorDoc []byte, outputsFound bool) Result {
	r := Result{Exit: exit}
	switch {
	case exit.Aborted:
		r.Outcome = Aborted
	case exit.TimedOut:
		r.Outcome = TimedOut
	case errorDoc != nil:
		r.Outcome = Failed
		var doc core.ErrorDocument
		if err := proto.Unmarshal(errorDoc, &doc); err != nil || doc.GetError() == nil {
			why := "it is empty"
			if err != nil {
				why = err.Error()
			}
			r.Error = &machine.Error{
				Kind: machine.KindSystem, Code: CodeBadErrorDocument, Recoverable: true,
				Message: "the task wrote an error document that cannot be read: " + why,
			}
			break
		}
		ce := doc.GetError()
		r.Document = ce
		kind := machine.ErrorKind(ce.GetOrigin())
		if kind != machine.KindUser && kind != machine.KindSystem {
			kind = machine.KindUnknown
		}
		r.Error = &machine.Error{
			Kind:        kind,
			Code:        ce.GetCode(),
			Message:     ce.GetMessage(),
			Recoverable: ce.GetKind() == core.ContainerError_RECOVERABLE,
		}
	case exit.Signal == "" && exit.Code == 0:
		if outputsFound {
			r.Outcome = Succeeded
			break
		}
		r.Outcome = Failed
		r.Error = &machine.Error{
			Kind: machine.KindSystem, Code: CodeOutputsMissing, Recoverable: true,
			Message: "the task exited 0 without writing " + OutputsFile + " or " + ErrorFile + exit.tails(),
		}
	case exit.Signal == "" && exit.Code == UsageExitCode:
		r.Outcome = Failed
		r.Error = &machine.Error{
			Kind: machine.KindSystem, Code: CodeUsageError, Recoverable: false,
			Message: "the task runtime rejected its command line (exit 2)" + exit.tails(),
		}
	default:
		r.Outcome = Crashed
		how := fmt.Sprintf("exited with code %d", exit.Code)
		if exit.Signal != "" {
			how = "was killed by signal " + exit.Signal
		}
		r.Error = &machine.Error{
			Kind: machine.KindSystem, Code: machine.CodeCrashed, Recoverable: true,
			Message: "the task process " + how + " without writing " + ErrorFile + exit.tails(),
		}
	}
	return r
}

// ClassifyDir is Classify for an output directory on the local filesystem.
// The error is for I/O failures other than a missing file.
func ClassifyDir(outputDir string, exit Exit) (Result, error) {
	doc, err := os.ReadFile(filepath.Join(outputDir, ErrorFile))
	switch {
	case err == nil:
		if doc == nil {
			doc = []byte{}
		}
	case errors.Is(err, fs.ErrNotExist):
		doc = nil
	default:
		return Result{}, fmt.Errorf("read error document: %w", err)
	}
	_, err = os.Stat(filepath.Join(outputDir, OutputsFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Result{}, fmt.Errorf("stat outputs: %w", err)
	}
	return Classify(exit, doc, err == nil), nil
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
	}
	e := r.Error
	if e == nil {
		e = &machine.Error{Kind: machine.KindSystem, Code: "Unknown", Recoverable: true}
	}
	return machine.Failed{Attempt: attempt, Kind: e.Kind, Recoverable: e.Recoverable, Code: e.Code, Message: e.Message}
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
