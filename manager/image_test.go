package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"fmgr.dev/executor/local/images/imagetest"
)

// `flyte-manager image load` adds an OCI layout's image to the home's
// store, `image list` shows it; a path that is no image is refused.
func TestImageCommands(t *testing.T) {
	home := isolate(t)
	ctx := context.Background()
	layout := imagetest.BusyboxLayout(t)
	var stdout, stderr bytes.Buffer
	if c := run(ctx, []string{"image", "load", "--home", home, layout}, &stdout, &stderr); c != 0 {
		t.Fatalf("image load: exit %d: %s", c, stderr.String())
	}
	if !strings.Contains(stdout.String(), "loaded "+imagetest.BusyboxRef) {
		t.Errorf("image load printed %q", stdout.String())
	}
	stdout.Reset()
	if c := run(ctx, []string{"image", "list", "--home", home}, &stdout, &stderr); c != 0 {
		t.Fatalf("image list: exit %d: %s", c, stderr.String())
	}
	if !strings.Contains(stdout.String(), imagetest.BusyboxRef) || !strings.Contains(stdout.String(), "sha256:") {
		t.Errorf("image list printed %q", stdout.String())
	}
	stderr.Reset()
	if c := run(ctx, []string{"image", "load", "--home", home, t.TempDir()}, &stdout, &stderr); c == 0 ||
		!strings.Contains(stderr.String(), "not an OCI image layout") {
		t.Errorf("loading an empty directory: exit %d: %s", c, stderr.String())
	}
}
