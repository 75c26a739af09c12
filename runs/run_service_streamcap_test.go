package runs_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/testkit"
)

// One client address may hold only so many watches open: the next is
// refused with RESOURCE_EXHAUSTED and a message naming the cap, a slot
// frees when a watch ends, and another address has caps of its own.
func TestWatchesCappedPerClient(t *testing.T) {
	const maxGlobal, maxStreams = 3, 2
	h := newHarnessServer(t, dbtest.SQLiteDSN(t), autoCreateProjects, func(s *config.Server) {
		s.MaxGlobalWatchesPerClient, s.MaxStreamsPerClient = maxGlobal, maxStreams
	})
	run := rid("", "flytesnacks", "development", "rcap")
	h.createRun(t, run, "env.main")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// watchRuns opens WatchRuns and returns its stream once the snapshot
	// came, or the error that ended it.
	watchRuns := func(c workflowconnect.RunServiceClient) (*connect.ServerStreamForClient[workflow.WatchRunsResponse], error) {
		s, err := c.WatchRuns(ctx, connect.NewRequest(&workflow.WatchRunsRequest{
			Target: &workflow.WatchRunsRequest_Org{Org: ""}}))
		if err != nil {
			return nil, err
		}
		if !s.Receive() {
			return nil, s.Err()
		}
		return s, nil
	}
	watchDetails := func(c workflowconnect.RunServiceClient) (*connect.ServerStreamForClient[workflow.WatchRunDetailsResponse], error) {
		s, err := c.WatchRunDetails(ctx, connect.NewRequest(&workflow.WatchRunDetailsRequest{RunId: run}))
		if err != nil {
			return nil, err
		}
		if !s.Receive() {
			return nil, s.Err()
		}
		return s, nil
	}

	var open []*connect.ServerStreamForClient[workflow.WatchRunsResponse]
	for range maxGlobal {
		s, err := watchRuns(h.runs)
		if err != nil {
			t.Fatalf("WatchRuns within the cap: %v", err)
		}
		open = append(open, s)
	}
	_, err := watchRuns(h.runs)
	wantCode(t, err, connect.CodeResourceExhausted, "127.0.0.1", "may hold 3 run-list watches (WatchRuns, WatchGroups) at once", "server.maxGlobalWatchesPerClient")
	// WatchGroups follows every run too, and counts with WatchRuns.
	g, err := h.runs.WatchGroups(ctx, connect.NewRequest(&workflow.WatchGroupsRequest{
		ScopeBy: &workflow.WatchGroupsRequest_ProjectId{ProjectId: &common.ProjectIdentifier{Name: "flytesnacks", Domain: "development"}}}))
	if err == nil && !g.Receive() {
		err = g.Err()
	}
	wantCode(t, err, connect.CodeResourceExhausted, "server.maxGlobalWatchesPerClient")

	// A run's own watches have the other cap, which the run lists do not use.
	for range maxStreams {
		s, err := watchDetails(h.runs)
		if err != nil {
			t.Fatalf("WatchRunDetails within its cap: %v", err)
		}
		defer s.Close()
	}
	_, err = watchDetails(h.runs)
	wantCode(t, err, connect.CodeResourceExhausted, "may hold 2 streams at once", "server.maxStreamsPerClient")

	// Another address is not affected.
	other := workflowconnect.NewRunServiceClient(clientFrom(t, "127.0.0.2"), h.srv.URL)
	for range maxGlobal {
		s, err := watchRuns(other)
		if err != nil {
			t.Fatalf("WatchRuns from 127.0.0.2: %v", err)
		}
		defer s.Close()
	}

	// Ending a watch frees its slot once the server saw the client go.
	if err := open[0].Close(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "a freed slot to take a new WatchRuns", 10*time.Second, func() bool {
		s, err := watchRuns(h.runs)
		if err != nil {
			if connect.CodeOf(err) != connect.CodeResourceExhausted {
				t.Fatalf("WatchRuns after a close: %v", err)
			}
			return false
		}
		open[0] = s
		return true
	})
	for _, s := range open {
		_ = s.Close()
	}

	resp, err := h.srv.Client().Get(h.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`flyte_manager_rpc_streams_refused_total{procedure="/flyteidl2.workflow.RunService/WatchRuns"}`,
		`flyte_manager_rpc_streams_refused_total{procedure="/flyteidl2.workflow.RunService/WatchGroups"} 1`,
		`flyte_manager_rpc_streams_refused_total{procedure="/flyteidl2.workflow.RunService/WatchRunDetails"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// clientFrom is an HTTP client whose connections leave from the local
// address ip (another loopback address is another client to the server).
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}
