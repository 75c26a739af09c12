// Package copilot is the data contract of raw container tasks (the SDK's
// flyte.extras.ContainerTask, TaskTemplate.type "raw-container"): a command
// that knows nothing of the Flyte runtime reads its inputs as files under an
// input directory and leaves its outputs as files under an output
// directory. Around the command:
//
//   - Render fills `{{.inputs.<name>}}` in the command and arguments:
//     scalars as text, files and directories as the path they are
//     materialised at;
//   - Download materialises every input under the input directory, one
//     entry named after it (a text file for scalars, the file or directory
//     for blobs, a directory of entries for lists), plus inputs.pb (the
//     inputs as a core.LiteralMap) and inputs.json or inputs.yaml;
//   - Collect reads every declared output back (one file named after it,
//     parsed per its type; files and directories are stored under the
//     attempt's output prefix) and writes the attempt's outputs.pb, or an
//     error.pb naming what was wrong, so the attempt is classified like
//     any other.
//
// The layout follows the reference backend's copilot, so a container that
// works there works here. Both executor drivers use this package; the
// `flyte-manager copilot` commands wrap it for a Pod.
package copilot

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
)

// Default directories, as the SDK's ContainerTask sets them.
const (
	DefaultInputDir  = "/var/inputs"
	DefaultOutputDir = "/var/outputs"
)

// Names of the files Download writes next to the inputs, and the file a
// command may write to fail with a message of its own.
const (
	InputsProto = "inputs.pb"
	InputsJSON  = "inputs.json"
	InputsYAML  = "inputs.yaml"
	ErrorFile   = "_ERROR"
)

// Job is the data contract of one raw container attempt.
type Job struct {
	// InputDir and OutputDir are where the command finds its inputs and
	// leaves its outputs (clean absolute paths).
	InputDir, OutputDir string
	// Format is the format of the inputs' metadata file besides inputs.pb.
	Format core.DataLoadingConfig_LiteralMapFormat
	// Layout says how a single file input is placed: DIRECT at
	// <input dir>/<name>, NAMED_DIR at <input dir>/<name>/<base name>.
	Layout core.DataLoadingConfig_FileInputLayout
	// Image is the container image the task declares.
	Image string
	// Inputs are the attempt's inputs; Interface declares its outputs.
	Inputs    *task.Inputs
	Interface *core.TypedInterface
	// InputsURI is where the attempt's inputs file is in storage (for a
	// Pod's init container, which reads them there itself).
	InputsURI string
	// HostFiles lets Download copy file and directory inputs that name a
	// path on this host outside the manager's storage (the SDK keeps the
	// local path of File.from_local when its raw-data path is file://).
	// Only for a driver whose command runs on this host with its
	// filesystem anyway: it gains nothing it could not read itself.
	HostFiles bool
	// HostRoot, when set, limits HostFiles to paths below it (read through
	// an os.Root on it): for a command that does not have this host's
	// filesystem, only what tasks made in their own directories.
	HostRoot string
}

// IsRaw says whether a template is a raw container: it has a data loading
// config that is enabled. Python tasks (the `a0` runtime) have none.
func IsRaw(t *core.TaskTemplate) bool {
	return t.GetContainer().GetDataConfig().GetEnabled()
}

// NewJob lays out the contract of a raw container template with its inputs.
// It fails when the directories cannot be used (relative, or one inside
// the other, which would mix inputs and outputs).
func NewJob(t *core.TaskTemplate, inputs *task.Inputs) (*Job, error) {
	dc := t.GetContainer().GetDataConfig()
	j := &Job{
		InputDir:  orDefault(dc.GetInputPath(), DefaultInputDir),
		OutputDir: orDefault(dc.GetOutputPath(), DefaultOutputDir),
		Format:    dc.GetFormat(),
		Layout:    dc.GetFileInputLayout(),
		Image:     t.GetContainer().GetImage(),
		Inputs:    inputs,
		Interface: t.GetInterface(),
	}
	for _, d := range []string{j.InputDir, j.OutputDir} {
		if !path.IsAbs(d) || d == "/" {
			return nil, fmt.Errorf("the data directory %q must be an absolute path below /", d)
		}
	}
	if within(j.InputDir, j.OutputDir) || within(j.OutputDir, j.InputDir) {
		return nil, fmt.Errorf("the input directory %q and the output directory %q must not contain each other", j.InputDir, j.OutputDir)
	}
	return j, nil
}

func orDefault(p, def string) string {
	if p == "" {
		return def
	}
	return path.Clean(p)
}

// within says whether p is d or below it.
func within(p, d string) bool { return p == d || strings.HasPrefix(p, d+"/") }

// inputRE matches `{{.inputs.<name>}}`, with any case in "inputs" and any
// spaces inside the braces, as the reference backend accepts it.
var inputRE = regexp.MustCompile(`(?i)\{\{\s*\.inputs\.([A-Za-z0-9_]+)\s*\}\}`)

// Render fills the `{{.inputs.<name>}}` templates in args. A name the
// inputs do not have is an error: the command would run with the template
// in its text.
func (j *Job) Render(args []string) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		var missing string
		out[i] = inputRE.ReplaceAllStringFunc(a, func(m string) string {
			name := inputRE.FindStringSubmatch(m)[1]
			lit := j.input(name)
			if lit == nil {
				if missing == "" {
					missing = name
				}
				return m
			}
			return j.text(name, lit)
		})
		if missing != "" {
			return nil, fmt.Errorf("the command refers to {{.inputs.%s}}, but the task has no input %q", missing, missing)
		}
	}
	return out, nil
}

func (j *Job) input(name string) *core.Literal {
	for _, nl := range j.Inputs.GetLiterals() {
		if nl.GetName() == name {
			return nl.GetValue()
		}
	}
	return nil
}

// text is how an input appears in the command: a scalar's value, or the
// path a file, a directory or a list is materialised at.
func (j *Job) text(name string, lit *core.Literal) string {
	if p := lit.GetScalar().GetPrimitive(); p != nil {
		return primitiveText(p)
	}
	if lit.GetScalar().GetNoneType() != nil {
		return "null"
	}
	return j.inputPath(name, lit)
}

// inputPath is where input name is materialised, as the command sees it.
func (j *Job) inputPath(name string, lit *core.Literal) string {
	p := path.Join(j.InputDir, name)
	if b := lit.GetScalar().GetBlob(); b != nil && j.namedFile(b) {
		p = path.Join(p, blobBase(b.GetUri(), name))
	}
	return p
}

// namedFile: a single file placed in a directory of its own under its
// original name (NAMED_DIR), so tools that look at extensions work.
func (j *Job) namedFile(b *core.Blob) bool {
	return j.Layout == core.DataLoadingConfig_NAMED_DIR && b.GetMetadata().GetType().GetDimensionality() != core.BlobType_MULTIPART
}

func blobBase(uri, fallback string) string {
	b := path.Base(strings.TrimRight(uri, "/"))
	if b == "." || b == "/" || b == "" {
		return fallback
	}
	return b
}

// primitiveText is a primitive as the command reads it, in the file and in
// templates: integers and floats in decimal, booleans as true/false,
// datetimes in RFC 3339, durations in Go's form (1m30s).
func primitiveText(p *core.Primitive) string {
	switch v := p.GetValue().(type) {
	case *core.Primitive_StringValue:
		return v.StringValue
	case *core.Primitive_Integer:
		return strconv.FormatInt(v.Integer, 10)
	case *core.Primitive_FloatValue:
		return strconv.FormatFloat(v.FloatValue, 'f', -1, 64)
	case *core.Primitive_Boolean:
		return strconv.FormatBool(v.Boolean)
	case *core.Primitive_Datetime:
		return v.Datetime.AsTime().UTC().Format(time.RFC3339Nano)
	case *core.Primitive_Duration:
		return v.Duration.AsDuration().String()
	}
	return "null"
}
