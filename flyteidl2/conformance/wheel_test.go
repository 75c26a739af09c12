package conformance

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The official descriptors ship inside the flyteidl2 wheel as serialized
// FileDescriptorProtos, one Python bytes literal per generated _pb2.py file.
// Reading the wheel directly keeps this test free of a Python interpreter.

var serializedFile = regexp.MustCompile(`AddSerializedFile\(b'((?:[^'\\]|\\.)*)'\)`)

// officialWheel finds the pinned wheel: $FLYTEIDL2_WHEEL, else the newest
// flyteidl2-*.whl in <repo>/.cache/wheels (filled by `make wheels`).
func officialWheel(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FLYTEIDL2_WHEEL"); p != "" {
		return p
	}
	matches, _ := filepath.Glob(filepath.Join("..", "..", ".cache", "wheels", "flyteidl2-*.whl"))
	if len(matches) == 0 {
		t.Fatalf("the official flyteidl2 wheel is missing: run `make wheels` (pip download of the version that flyte pins) or set FLYTEIDL2_WHEEL")
	}
	sort.Strings(matches)
	return matches[len(matches)-1]
}

// loadOfficial returns every FileDescriptorProto in the wheel, by file name.
func loadOfficial(t *testing.T) map[string]*descriptorpb.FileDescriptorProto {
	t.Helper()
	path := officialWheel(t)
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("open wheel %s: %v", path, err)
	}
	defer zr.Close()
	files := map[string]*descriptorpb.FileDescriptorProto{}
	for _, f := range zr.File {
		if !strings.HasPrefix(f.Name, "flyteidl2/") || !strings.HasSuffix(f.Name, "_pb2.py") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatalf("read %s: %v", f.Name, err)
		}
		src, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("read %s: %v", f.Name, err)
		}
		m := serializedFile.FindSubmatch(src)
		if m == nil {
			t.Fatalf("%s: no serialized descriptor found", f.Name)
		}
		raw, err := unescapePythonBytes(m[1])
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		fd := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(raw, fd); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		files[fd.GetName()] = fd
	}
	if len(files) == 0 {
		t.Fatalf("%s holds no flyteidl2 descriptors", path)
	}
	return files
}

// unescapePythonBytes decodes the body of a Python bytes literal as written by
// repr(): printable ASCII, \xNN, \n, \r, \t, \\, \' and \".
func unescapePythonBytes(lit []byte) ([]byte, error) {
	var out bytes.Buffer
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		if c != '\\' {
			out.WriteByte(c)
			continue
		}
		i++
		if i >= len(lit) {
			return nil, fmt.Errorf("dangling backslash")
		}
		switch lit[i] {
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case '\\', '\'', '"':
			out.WriteByte(lit[i])
		case 'x':
			if i+2 >= len(lit) {
				return nil, fmt.Errorf("short \\x escape")
			}
			var b byte
			if _, err := fmt.Sscanf(string(lit[i+1:i+3]), "%02x", &b); err != nil {
				return nil, fmt.Errorf("bad \\x escape %q", lit[i+1:i+3])
			}
			out.WriteByte(b)
			i += 2
		default:
			return nil, fmt.Errorf("unexpected escape \\%c", lit[i])
		}
	}
	return out.Bytes(), nil
}
