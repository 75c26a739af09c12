package mgrproc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A binary that exits before serving is reported at once with what it
// printed, not after the start deadline.
func TestStartReportsEarlyExit(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-manager")
	script := "#!/bin/sh\necho 'cannot open the database: boom' >&2\nexit 3\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{Bin: bin, Home: t.TempDir(), StartTimeout: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Start of a binary that exits = %v, want an error naming the exit and its output", err)
	}
}

func TestBufferAwait(t *testing.T) {
	var b Buffer
	seen := b.Await(ServingURL)
	b.Write([]byte("starting\n"))
	select {
	case <-seen:
		t.Fatal("Await fired before the banner")
	default:
	}
	b.Write([]byte("flyte-manager dev is serving on http://127.0.0.1:4242 (Connect)\n"))
	select {
	case <-seen:
	default:
		t.Fatal("Await did not fire on the banner")
	}
	if got := ServingURL(b.String()); got != "http://127.0.0.1:4242" {
		t.Errorf("ServingURL = %q", got)
	}
	select {
	case <-b.Await(ServingURL): // already there: closed at once
	default:
		t.Error("Await of text already written did not fire")
	}
}
