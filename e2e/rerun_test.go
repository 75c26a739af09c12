package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testRerun: flyte.rerun copies its source run's spec, run_base_dir
// included; the rerun still writes under a base of its own, so the source's
// outputs are the same after the rerun as before it.
func testRerun(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 8*time.Minute)
	var res struct {
		Phases       []string
		SourceBefore any `json:"source_before"`
		SourceAfter  any `json:"source_after"`
		Rerun        any
		Dirs, Names  []string
	}
	prefix := "file://" + filepath.Join(m.Home, "blobs", "custom")
	driver(t, ctx, &res, "drive_rerun.py", sdkEndpoint(m), prefix)

	if len(res.Phases) != 2 || res.Phases[0] != "SUCCEEDED" || res.Phases[1] != "SUCCEEDED" {
		t.Fatalf("phases %v, want the source and its rerun SUCCEEDED", res.Phases)
	}
	checkJSON(t, "the source's output before the rerun", res.SourceBefore, `2`)
	checkJSON(t, "the rerun's output (x=41)", res.Rerun, `42`)
	checkJSON(t, "the source's output after the rerun", res.SourceAfter, `2`)
	if len(res.Dirs) != 2 || len(res.Names) != 2 || res.Dirs[0] == res.Dirs[1] {
		t.Fatalf("output dirs %v: the rerun must not write where its source did", res.Dirs)
	}
	for i, dir := range res.Dirs {
		if !strings.HasPrefix(dir, prefix+"/") || !strings.Contains(dir, "/"+res.Names[i]+"/") {
			t.Errorf("run %s wrote to %s, want a base of its own under %s", res.Names[i], dir, prefix)
		}
	}
}
