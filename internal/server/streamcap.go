package server

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"fmgr.dev/gen/go/flyteidl2/actions/actionsconnect"
	"fmgr.dev/gen/go/flyteidl2/workflow/workflowconnect"
)

// Every long-lived stream holds a goroutine and a subscription until its
// client goes, and a global watch (a run list) is offered every change of
// every run, so one client could slow every watcher by opening thousands.
// streamCap bounds the streams one client holds open at once, by the
// client's address. There is no identity before authentication exists, and
// the address is the only key a client cannot choose: forwarded headers
// (X-Forwarded-For, Forwarded) are the client's to write unless a trusted
// proxy rewrites them, so they are not read. Behind a proxy every client
// shares the proxy's address; raise or lift the caps there.

// streamClass is which cap a streaming procedure counts against.
type streamClass int

const (
	classStream streamClass = iota // any other long-lived stream
	classGlobal                    // follows every run: each change costs it a call
	classExempt                    // not capped per address (see exemptStreams)
)

// globalWatches subscribe to the changes of every run (runstate.Matching).
var globalWatches = map[string]bool{
	workflowconnect.RunServiceWatchRunsProcedure:   true,
	workflowconnect.RunServiceWatchGroupsProcedure: true,
}

// exemptStreams are the executor's: every parent task process follows its
// children with WatchForUpdates (StateService.Watch when the SDK is told
// not to use ActionsService), and under the local executor they all come
// from the manager's own host, hundreds at once in a wide fan-out. Their
// number is bounded by the executor's concurrency, not by a client.
var exemptStreams = map[string]bool{
	actionsconnect.ActionsServiceWatchForUpdatesProcedure: true,
	workflowconnect.StateServiceWatchProcedure:            true,
}

func classOf(procedure string) streamClass {
	switch {
	case exemptStreams[procedure]:
		return classExempt
	case globalWatches[procedure]:
		return classGlobal
	}
	return classStream
}

type capKey struct {
	class  streamClass
	client string
}

// streamCap counts the open streams of each client address and class.
type streamCap struct {
	maxStreams, maxGlobal int // 0: no cap
	refused               *prometheus.CounterVec

	mu   sync.Mutex
	open map[capKey]int
}

func newStreamCap(maxStreams, maxGlobal int, reg prometheus.Registerer) *streamCap {
	c := &streamCap{maxStreams: maxStreams, maxGlobal: maxGlobal, open: map[capKey]int{},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flyte_manager_rpc_streams_refused_total",
			Help: "Streams refused because their client address held as many open streams as it may (server.maxStreamsPerClient, server.maxGlobalWatchesPerClient), by procedure.",
		}, []string{"procedure"})}
	reg.MustRegister(c.refused)
	return c
}

// acquire takes a slot for a stream of procedure from addr (a RemoteAddr),
// or says why it may not open; release gives the slot back.
func (c *streamCap) acquire(procedure, addr string) (release func(), err error) {
	class := classOf(procedure)
	limit := c.maxStreams
	what, key := "streams", "server.maxStreamsPerClient"
	if class == classGlobal {
		limit = c.maxGlobal
		what, key = "run-list watches (WatchRuns, WatchGroups)", "server.maxGlobalWatchesPerClient"
	}
	if class == classExempt || limit <= 0 {
		return func() {}, nil
	}
	k := capKey{class: class, client: clientKey(addr)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[k] >= limit {
		c.refused.WithLabelValues(procedure).Inc()
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
			"too many open streams from this client (%s): one client address may hold %d %s at once (%s); close one and retry",
			k.client, limit, what, key))
	}
	c.open[k]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.open[k]--; c.open[k] <= 0 {
				delete(c.open, k)
			}
		})
	}, nil
}

// clientKey is the address a client is counted by: its IP, and for IPv6
// its /64, since one host commonly holds a whole /64 and could otherwise
// take a fresh key per stream. An address that is not host:port (a test's
// pipe) is its own key.
func clientKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return remote
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

// streamCapInterceptor refuses a stream over its client's cap before the
// handler runs, and frees the slot when the handler returns: the client
// went away, the stream ended, or the server is shutting down.
type streamCapInterceptor struct{ c *streamCap }

func (i *streamCapInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (i *streamCapInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *streamCapInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		release, err := i.c.acquire(conn.Spec().Procedure, conn.Peer().Addr)
		if err != nil {
			return err
		}
		defer release()
		return next(ctx, conn)
	}
}
