package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"fmgr.dev/internal/testkit"
)

func TestGracefulShutdown(t *testing.T) {
	var order []string
	var mu sync.Mutex
	closer := func(name string) CloseFunc {
		return func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, name)
			return nil
		}
	}
	ts := startServer(t, nil, func(s *Server) {
		s.AddCloser("database", closer("database"))
		s.AddCloser("executor", closer("executor"))
	})

	slowDone := make(chan error, 1)
	go func() {
		client := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(false), ts.base+procSlow)
		resp, err := client.CallUnary(context.Background(), connect.NewRequest(wrapperspb.String("")))
		if err == nil && resp.Msg.GetValue() != "done" {
			err = fmt.Errorf("got %q", resp.Msg.GetValue())
		}
		slowDone <- err
	}()
	streamDone := make(chan error, 1)
	go func() {
		client := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient(true), ts.base+procHang)
		stream, err := client.CallServerStream(context.Background(), connect.NewRequest(wrapperspb.String("")))
		if err != nil {
			streamDone <- err
			return
		}
		for stream.Receive() {
		}
		streamDone <- stream.Err()
	}()
	for range 2 {
		select {
		case <-ts.started:
		case <-time.After(5 * time.Second):
			t.Fatal("calls did not start")
		}
	}
	if n := ts.caps.held(); n != 1 {
		t.Fatalf("the open stream holds %d slots of its client's cap, want 1", n)
	}

	ts.stop()
	// Release the slow call only once shutdown has begun: the listener no
	// longer accepts. If shutdown did not wait for it, the call fails.
	testkit.Eventually(t, "the listener to close", 30*time.Second, func() bool {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(ts.base, "http://"), time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil && ts.draining.Load()
	})
	select {
	case err := <-ts.served:
		t.Fatalf("Serve returned (%v) while a unary call was in flight", err)
	case err := <-slowDone:
		t.Fatalf("in-flight unary call ended before it was released: %v", err)
	default:
	}
	close(ts.release)
	if err := <-slowDone; err != nil {
		t.Errorf("in-flight unary call was not allowed to finish: %v", err)
	}
	if err := <-streamDone; connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("stream ended with %v, want unavailable", err)
	}
	if n := ts.caps.held(); n != 0 {
		t.Errorf("the stream shutdown ended still holds %d slots of its client's cap", n)
	}
	select {
	case err := <-ts.served:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
		ts.served <- err // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []string{"executor", "database"}) {
		t.Errorf("closers ran in order %q", order)
	}
	if _, err := httpClient(false).Get(ts.base + "/healthz"); err == nil {
		t.Error("still accepting connections after shutdown")
	}
}
