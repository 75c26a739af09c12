package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/dataproxy/dataproxyconnect"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
)

// statusKB reads a "Vm...: N kB" field of /proc/<pid>/status, in bytes.
func statusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// resetPeakRSS makes the kernel start VmHWM (the peak RSS) afresh from the
// current RSS, so VmHWM afterwards is the peak of what follows.
func resetPeakRSS(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset the manager's peak RSS: %v", err)
	}
}

// A task printing 300 MB: its log is capped (head, marker, tail), TailLogs
// over the real RPC streams it, and neither running the task nor serving its
// log raises the manager's peak RSS by 50 MB.
func TestHugeLogIsCappedAndStreamed(t *testing.T) {
	const printed = 300_000_000
	m := startManager(t, "sqlite://"+filepath.Join(t.TempDir(), "fm.db"), pathLocations)
	pid := m.PID()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	httpc := &http.Client{Timeout: 10 * time.Minute}

	// 3 million lines "l<n> xxx...": numbered, so the head and the tail
	// can be told apart.
	script := fmt.Sprintf(`seq 1 %d | sed 's/^/l/; s/$/ %s/'; : > "$1/outputs.pb"`, printed/100, strings.Repeat("x", 90))
	spec := &task.TaskSpec{TaskTemplate: &core.TaskTemplate{
		Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: testProject, Domain: testDomain, Name: "e2e.loud", Version: "v1"},
		Type:     "python",
		Metadata: &core.TaskMetadata{},
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "ignored",
			Args:  []string{"/bin/sh", "-c", script, "sh", "{{.outputPrefix}}"},
		}},
	}}
	runs := workflowconnect.NewRunServiceClient(httpc, m.URL)
	baseline := statusKB(t, pid, "VmRSS")
	resetPeakRSS(t, pid)
	created, err := runs.CreateRun(ctx, connect.NewRequest(&workflow.CreateRunRequest{
		Id:   &workflow.CreateRunRequest_ProjectId{ProjectId: projectID()},
		Task: &workflow.CreateRunRequest_TaskSpec{TaskSpec: spec},
	}))
	if err != nil {
		t.Fatal(err)
	}
	id := &common.ActionIdentifier{Run: created.Msg.GetRun().GetAction().GetId().GetRun(), Name: "a0"}
	for {
		d, err := runs.GetActionDetails(ctx, connect.NewRequest(&workflow.GetActionDetailsRequest{ActionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		if p := d.Msg.GetDetails().GetStatus().GetPhase(); p == common.ActionPhase_ACTION_PHASE_SUCCEEDED {
			break
		} else if p >= common.ActionPhase_ACTION_PHASE_FAILED {
			t.Fatalf("the task ended %s: %v", p, d.Msg.GetDetails().GetErrorInfo())
		}
		if ctx.Err() != nil {
			t.Fatal("the task did not end")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if grew := statusKB(t, pid, "VmHWM") - baseline; grew > 50<<20 {
		t.Errorf("running the task raised the manager's peak RSS by %d MB", grew>>20)
	}

	before := statusKB(t, pid, "VmRSS")
	resetPeakRSS(t, pid)
	proxy := dataproxyconnect.NewDataProxyServiceClient(httpc, m.URL)
	stream, err := proxy.TailLogs(ctx, connect.NewRequest(&dataproxy.TailLogsRequest{ActionId: id, Attempt: 1}))
	if err != nil {
		t.Fatal(err)
	}
	var (
		lines, bytes     int64
		first, last      string
		marker           string
		afterMarker      int
		beforeMarkerLast string
		prev             string
	)
	for stream.Receive() {
		for _, l := range stream.Msg().GetLogs() {
			for _, line := range l.GetLines() {
				msg := strings.TrimSuffix(line.GetMessage(), "\n")
				lines++
				bytes += int64(len(msg))
				if strings.HasPrefix(msg, "l") && first == "" {
					first = msg
				}
				switch {
				case strings.HasPrefix(msg, "log truncated:"):
					marker, beforeMarkerLast = msg, prev
				case marker != "" && strings.HasPrefix(msg, "l"):
					if afterMarker++; afterMarker == 1 {
						t.Logf("first line after the marker: %.20s", msg)
					}
				}
				if strings.HasPrefix(msg, "l") {
					last, prev = msg, msg
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	peak := statusKB(t, pid, "VmHWM")
	t.Logf("TailLogs: %d lines, %d MB; manager RSS %d MB before, peak %d MB while serving", lines, bytes>>20, before>>20, peak>>20)
	if grew := peak - before; grew > 50<<20 {
		t.Errorf("serving the log raised the manager's peak RSS by %d MB (from %d MB)", grew>>20, before>>20)
	}
	if marker == "" || !strings.Contains(marker, "bytes dropped") {
		t.Fatalf("no truncation marker in %d lines", lines)
	}
	want := fmt.Sprintf("l%d ", printed/100)
	if !strings.HasPrefix(first, "l1 ") || !strings.HasPrefix(last, want) || afterMarker == 0 {
		t.Errorf("head starts %.10q, tail ends %.12q (want %q), %d lines after the marker", first, last, want, afterMarker)
	}
	if n := lineNumber(beforeMarkerLast); n <= 0 || n >= printed/100-afterMarker {
		t.Errorf("the head ends at line %d, with %d tail lines", n, afterMarker)
	}
	// The default cap is 100 MiB: what is served stays within it.
	if bytes > 100<<20 || bytes < 50<<20 {
		t.Errorf("served %d MB of a 300 MB output with a 100 MiB cap", bytes>>20)
	}
}

func lineNumber(msg string) int {
	s, _, _ := strings.Cut(strings.TrimPrefix(msg, "l"), " ")
	n, _ := strconv.Atoi(s)
	return n
}
