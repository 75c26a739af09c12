package ocibuild

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/core"
	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/images"
	"fmgr.dev/internal/runlayout"
)

// The build's Pod runs the manager's image with `flyte-manager image
// build-spec` (PodCommand): it reads the build task's inputs from storage
// (the spec, the context tarball, the target), builds and pushes, and
// writes the task's output, the fqin, into the attempt's output prefix, or
// error.pb naming the layer that failed. Its output is the attempt's log.

// Pod is what a build's Pod is given.
type Pod struct {
	Storage  string // the URL that opens the manager's storage
	Inputs   string // the URI of the attempt's inputs.pb
	Out      string // the attempt's output prefix
	Registry Registry
	UV       string // "" finds uv on PATH
}

// CodeBuildFailed is the error code of a build that failed.
const CodeBuildFailed = "ImageBuildFailed"

// Command is the Pod's argv.
func (p Pod) Command() []string {
	args := []string{"flyte-manager", "image", "build-spec", "--storage", p.Storage, "--inputs", p.Inputs, "--out", p.Out,
		"--registry", p.Registry.Prefix}
	if p.Registry.Insecure {
		args = append(args, "--insecure")
	}
	return args
}

// Run is the Pod's build. The error is also in error.pb when it could be
// written.
func (p Pod) Run(ctx context.Context, log io.Writer) error {
	blobs, err := blob.Open(ctx, p.Storage)
	if err != nil {
		return fmt.Errorf("opening the storage: %w", err)
	}
	outKey, err := blobs.Key(p.Out)
	if err != nil {
		return fmt.Errorf("the attempt's output prefix %s: %w", p.Out, err)
	}
	fqin, berr := p.build(ctx, blobs, log)
	if berr != nil {
		kind := core.ContainerError_RECOVERABLE
		var le *images.LayerError
		if errors.As(berr, &le) || errors.Is(berr, errs.ErrInvalid) {
			kind = core.ContainerError_NON_RECOVERABLE
		}
		doc := &core.ErrorDocument{Error: &core.ContainerError{Code: CodeBuildFailed, Message: berr.Error(), Kind: kind,
			Origin: core.ExecutionError_USER}}
		b, err := proto.Marshal(doc)
		if err == nil {
			err = blobs.Put(ctx, outKey+"/"+runlayout.ErrorFile, b, nil)
		}
		if err != nil {
			return fmt.Errorf("%v (and writing error.pb failed: %v)", berr, err)
		}
		return berr
	}
	out := &task.Outputs{Literals: []*task.NamedLiteral{{Name: images.OutputFQIN, Value: &core.Literal{Value: &core.Literal_Scalar{
		Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: fqin}}}}}}}}}
	b, err := proto.Marshal(out)
	if err != nil {
		return err
	}
	return blobs.Put(ctx, outKey+"/"+runlayout.OutputsFile, b, nil)
}

func (p Pod) build(ctx context.Context, blobs *blob.Store, log io.Writer) (string, error) {
	read := func(what, uri string) ([]byte, error) {
		key, err := blobs.Key(uri)
		if err != nil {
			return nil, errs.Invalidf("input %s: %q is not in this manager's storage", what, uri)
		}
		b, err := blobs.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("input %s: reading %s: %w", what, uri, err)
		}
		return b, nil
	}
	raw, err := read("inputs", p.Inputs)
	if err != nil {
		return "", err
	}
	inputs := &task.Inputs{}
	if err := proto.Unmarshal(raw, inputs); err != nil {
		return "", errs.Invalidf("the inputs are unreadable: %v", err)
	}
	in := map[string]string{}
	for _, l := range inputs.GetLiterals() {
		in[l.GetName()] = l.GetValue().GetScalar().GetPrimitive().GetStringValue()
	}
	if in[images.InputSpec] == "" || in[images.InputTarget] == "" {
		return "", errs.Invalidf("inputs %s (the uploaded ImageSpec) and %s (the image's name:tag) are required", images.InputSpec, images.InputTarget)
	}
	if raw, err = read(images.InputSpec, in[images.InputSpec]); err != nil {
		return "", err
	}
	spec := &ib.ImageSpec{}
	if err := proto.Unmarshal(raw, spec); err != nil {
		return "", errs.Invalidf("input %s: not an ImageSpec: %v", images.InputSpec, err)
	}
	var tarball []byte
	if uri := in[images.InputContext]; uri != "" {
		if tarball, err = read(images.InputContext, uri); err != nil {
			return "", err
		}
	}
	// The tag is the image's content: one the registry has is built (by
	// an earlier build whose GetImage raced this one).
	if fqin, err := p.Registry.Lookup(ctx, in[images.InputTarget]); err == nil {
		logf(log, "== %s is in the registry already: nothing to build", fqin)
		return fqin, nil
	}
	work, err := os.MkdirTemp("", "flyte-image-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	uv := p.UV
	if uv == "" {
		uv = "uv"
	}
	logf(log, "== building %s", p.Registry.FQIN(in[images.InputTarget]))
	return p.Registry.Build(ctx, Job{Spec: spec, Context: tarball, Target: in[images.InputTarget], UV: uv, WorkDir: work, Log: log})
}

// ParsePod reads the arguments Command puts after `build-spec`.
func ParsePod(args []string) (Pod, error) {
	fs := flag.NewFlagSet("build-spec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var p Pod
	fs.StringVar(&p.Storage, "storage", "", "the URL of the manager's storage")
	fs.StringVar(&p.Inputs, "inputs", "", "the URI of the build's inputs.pb")
	fs.StringVar(&p.Out, "out", "", "the attempt's output prefix")
	fs.StringVar(&p.Registry.Prefix, "registry", "", "the registry and repository prefix images go under")
	fs.BoolVar(&p.Registry.Insecure, "insecure", false, "reach registries over plain http")
	fs.StringVar(&p.UV, "uv", "", "the uv binary (default: uv on PATH)")
	if err := fs.Parse(args); err != nil {
		return Pod{}, err
	}
	if fs.NArg() > 0 || p.Storage == "" || p.Inputs == "" || p.Out == "" || p.Registry.Prefix == "" {
		return Pod{}, errors.New("usage: build-spec --storage URL --inputs URI --out PREFIX --registry PREFIX [--insecure] [--uv PATH]")
	}
	return p, nil
}
