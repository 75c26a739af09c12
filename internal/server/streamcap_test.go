package server

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"fmgr.dev/gen/go/flyteidl2/actions/actionsconnect"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
)

// A client is counted by its IP (IPv6: its /64), whatever its port, and an
// IPv4 address counts the same written as IPv4-mapped IPv6.
func TestClientKey(t *testing.T) {
	for remote, want := range map[string]string{
		"127.0.0.1:5000":             "127.0.0.1",
		"[::ffff:127.0.0.1]:5001":    "127.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:9":   "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":          "fe80::/64",
		"[::1]:8090":                 "::/64",
		"pipe":                       "pipe",
	} {
		if got := clientKey(remote); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", remote, got, want)
		}
	}
}

// A task's WatchForUpdates (or StateService.Watch) is never capped per address: under the local
// executor every parent task process shares the manager's address. A cap
// of 0 is no cap.
func TestStreamCapExemptions(t *testing.T) {
	c := newStreamCap(1, 0, prometheus.NewRegistry())
	for i := range 100 {
		if _, err := c.acquire(actionsconnect.ActionsServiceWatchForUpdatesProcedure, "127.0.0.1:1"); err != nil {
			t.Fatalf("WatchForUpdates %d refused: %v", i, err)
		}
		if _, err := c.acquire(workflowconnect.StateServiceWatchProcedure, "127.0.0.1:1"); err != nil {
			t.Fatalf("StateService.Watch %d refused: %v", i, err)
		}
		if _, err := c.acquire(workflowconnect.RunServiceWatchRunsProcedure, "127.0.0.1:1"); err != nil {
			t.Fatalf("WatchRuns %d refused with no cap: %v", i, err)
		}
	}
	release, err := c.acquire(workflowconnect.RunServiceWatchActionsProcedure, "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.acquire(workflowconnect.RunServiceWatchActionDetailsProcedure, "127.0.0.1:2"); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("a second stream from one address: %v", err)
	}
	release()
	release() // a second release frees nothing more
	if _, err := c.acquire(workflowconnect.RunServiceWatchActionDetailsProcedure, "127.0.0.1:2"); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if _, err := c.acquire(workflowconnect.RunServiceWatchActionDetailsProcedure, "127.0.0.1:3"); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("a double release freed two slots: %v", err)
	}
}

// held is how many slots the open streams hold, over every client.
func (c *streamCap) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.open {
		n += v
	}
	return n
}
