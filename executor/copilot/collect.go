package copilot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/runlayout"
)

// Error codes of the error documents Collect writes.
const (
	CodeOutputMissing = "OutputMissing"
	CodeBadOutput     = "BadOutput"
	CodeUserError     = "UserError"
)

// dataDir, in the attempt's output prefix, holds the files and directories
// a raw container returned.
const dataDir = "data"

// maxScalarFile bounds a scalar output's file: a value, not a data set.
const maxScalarFile = 1 << 20

// UserError is something the command did wrong: an output it did not
// write, one that does not parse, or its own _ERROR file.
type UserError struct{ Code, Message string }

func (e *UserError) Error() string { return e.Message }

// Collect reads the outputs the command left in dir (the host directory it
// saw as its output directory) and records them under outPrefix, the
// attempt's output prefix: outputs.pb when every declared output is there
// and parses, else error.pb with a user error saying what is wrong. The
// error is for storage failures only.
func (j *Job) Collect(ctx context.Context, blobs *blob.Store, dir, outPrefix string) error {
	outKey, err := blobs.Key(outPrefix)
	if err != nil {
		return fmt.Errorf("the attempt's output prefix %s: %w", outPrefix, err)
	}
	outs, err := j.outputs(ctx, blobs, dir, outKey)
	var ue *UserError
	if errors.As(err, &ue) {
		doc := &core.ErrorDocument{Error: &core.ContainerError{Code: ue.Code, Message: ue.Message,
			Kind: core.ContainerError_NON_RECOVERABLE, Origin: core.ExecutionError_USER}}
		b, err := proto.Marshal(doc)
		if err != nil {
			return err
		}
		return blobs.Put(ctx, outKey+"/"+runlayout.ErrorFile, b, nil)
	}
	if err != nil {
		return err
	}
	b, err := proto.Marshal(outs)
	if err != nil {
		return err
	}
	return blobs.Put(ctx, outKey+"/"+runlayout.OutputsFile, b, nil)
}

func (j *Job) outputs(ctx context.Context, blobs *blob.Store, dir, outKey string) (*task.Outputs, error) {
	// Everything is read through root: a symbolic link the command left
	// (an output, or a file inside an output directory) resolves inside the
	// output directory or not at all, never to the host's files.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if b, err := readSmall(root, ErrorFile); err == nil {
		return nil, &UserError{Code: CodeUserError, Message: "the container reported an error in " +
			filepath.Join(j.OutputDir, ErrorFile) + ": " + strings.TrimSpace(string(b))}
	} else if !errors.Is(err, fs.ErrNotExist) {
		if escapes(err) {
			return nil, &UserError{Code: CodeBadOutput, Message: fmt.Sprintf("%s: %v", filepath.Join(j.OutputDir, ErrorFile), errOutside)}
		}
		return nil, err
	}
	outs := &task.Outputs{}
	for _, v := range j.Interface.GetOutputs().GetVariables() {
		name := v.GetKey()
		seen := filepath.Join(j.OutputDir, name)
		if !validName(name) {
			return nil, &UserError{Code: CodeBadOutput, Message: fmt.Sprintf("output %q cannot be a file name", name)}
		}
		if _, err := root.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return nil, &UserError{Code: CodeOutputMissing, Message: fmt.Sprintf(
				"the container did not write its output %q: expected %s", name, seen)}
		}
		lit, err := j.output(ctx, blobs, v.GetValue().GetType(), root, name, seen, outKey+"/"+dataDir+"/"+name)
		if escapes(err) {
			return nil, &UserError{Code: CodeBadOutput, Message: fmt.Sprintf("output %s: %v", seen, errOutside)}
		}
		if err != nil {
			return nil, err
		}
		outs.Literals = append(outs.Literals, &task.NamedLiteral{Name: name, Value: lit})
	}
	return outs, nil
}

// errOutside is what a command is told of a symbolic link that leads out
// of its output directory.
var errOutside = errors.New("it is a symbolic link that leads out of the output directory")

// escapes says whether err is os.Root refusing a path that leaves it.
func escapes(err error) bool {
	var pe *fs.PathError
	return err != nil && errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent"
}

// output reads one declared output, name in root, into a literal; files and
// directories are stored under key.
func (j *Job) output(ctx context.Context, blobs *blob.Store, t *core.LiteralType, root *os.Root, name, seen, key string) (*core.Literal, error) {
	if bt := t.GetBlob(); bt != nil {
		info, err := root.Stat(name)
		if err != nil {
			return nil, err
		}
		multi := bt.GetDimensionality() == core.BlobType_MULTIPART
		if multi != info.IsDir() {
			want := "a file"
			if multi {
				want = "a directory"
			}
			return nil, &UserError{Code: CodeBadOutput, Message: fmt.Sprintf("output %s must be %s", seen, want)}
		}
		if multi {
			err = uploadDir(ctx, blobs, root, name, key)
		} else {
			err = uploadFile(ctx, blobs, root, name, key)
		}
		if err != nil {
			return nil, err
		}
		return &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Blob{Blob: &core.Blob{
			Metadata: &core.BlobMetadata{Type: bt}, Uri: blobs.URI(key)}}}}}, nil
	}
	if t.GetSimple() == core.SimpleType_NONE && t.GetType() != nil {
		return scalar(&core.Scalar{Value: &core.Scalar_NoneType{NoneType: &core.Void{}}}), nil
	}
	if _, ok := t.GetType().(*core.LiteralType_Simple); !ok {
		return nil, &UserError{Code: CodeBadOutput, Message: fmt.Sprintf(
			"output %s: a raw container returns scalars, files and directories only, not %s", seen, typeName(t))}
	}
	b, err := readSmall(root, name)
	if escapes(err) {
		return nil, err
	}
	if err != nil {
		return nil, &UserError{Code: CodeBadOutput, Message: fmt.Sprintf("output %s: %v", seen, err)}
	}
	lit, err := parseSimple(t.GetSimple(), strings.Trim(string(b), " \n\t\r"))
	if err != nil {
		return nil, &UserError{Code: CodeBadOutput, Message: fmt.Sprintf("output %s is not a valid %s: %v",
			seen, strings.ToLower(t.GetSimple().String()), err)}
	}
	return lit, nil
}

func typeName(t *core.LiteralType) string {
	switch {
	case t.GetCollectionType() != nil:
		return "a list"
	case t.GetMapValueType() != nil:
		return "a map"
	case t.GetUnionType() != nil:
		return "a union"
	}
	return "this type"
}

func scalar(s *core.Scalar) *core.Literal {
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: s}}
}

func primitive(p *core.Primitive) *core.Literal {
	return scalar(&core.Scalar{Value: &core.Scalar_Primitive{Primitive: p}})
}

// parseSimple reads a scalar output the way Download writes one.
func parseSimple(t core.SimpleType, s string) (*core.Literal, error) {
	switch t {
	case core.SimpleType_STRING:
		return primitive(&core.Primitive{Value: &core.Primitive_StringValue{StringValue: s}}), nil
	case core.SimpleType_INTEGER:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, errors.Unwrap(err)
		}
		return primitive(&core.Primitive{Value: &core.Primitive_Integer{Integer: v}}), nil
	case core.SimpleType_FLOAT:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, errors.Unwrap(err)
		}
		return primitive(&core.Primitive{Value: &core.Primitive_FloatValue{FloatValue: v}}), nil
	case core.SimpleType_BOOLEAN:
		v, err := strconv.ParseBool(strings.ToLower(s))
		if err != nil {
			return nil, errors.New("expected true or false")
		}
		return primitive(&core.Primitive{Value: &core.Primitive_Boolean{Boolean: v}}), nil
	case core.SimpleType_DATETIME:
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, errors.New("expected an RFC 3339 time")
		}
		return primitive(&core.Primitive{Value: &core.Primitive_Datetime{Datetime: timestamppb.New(v)}}), nil
	case core.SimpleType_DURATION:
		v, err := time.ParseDuration(s)
		if err != nil {
			return nil, errors.New("expected a duration such as 1m30s")
		}
		return primitive(&core.Primitive{Value: &core.Primitive_Duration{Duration: durationpb.New(v)}}), nil
	case core.SimpleType_STRUCT:
		st := &structpb.Struct{}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(s), st); err != nil {
			return nil, errors.New("expected a JSON object")
		}
		return scalar(&core.Scalar{Value: &core.Scalar_Generic{Generic: st}}), nil
	}
	return nil, fmt.Errorf("type %s is not supported", t)
}

// readSmall reads the file name in root, of at most maxScalarFile bytes.
func readSmall(root *os.Root, name string) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, errors.New("it is a directory, not a file")
	}
	if info.Size() > maxScalarFile {
		return nil, fmt.Errorf("it holds %d bytes, more than the %d a value may have", info.Size(), maxScalarFile)
	}
	return io.ReadAll(f)
}

func uploadFile(ctx context.Context, blobs *blob.Store, root *os.Root, name, key string) error {
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := blobs.NewWriter(ctx, key, nil)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, f); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}

// uploadDir stores every regular file under the directory name in root
// (symbolic links inside it are not followed: they could point anywhere).
func uploadDir(ctx context.Context, blobs *blob.Store, root *os.Root, name, key string) error {
	return fs.WalkDir(root.FS(), name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel := strings.TrimPrefix(p, name+"/")
		return uploadFile(ctx, blobs, root, p, key+"/"+rel)
	})
}
