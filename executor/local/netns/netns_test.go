package netns

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
)

// A listener made inside a namespace is reached by Dial into it, not from
// the host; a forwarder on a Unix socket joins the host to it both ways.
func TestListenDialForward(t *testing.T) {
	if err := Supported(); err != nil {
		t.Skipf("no network namespaces here (run as root): %v", err)
	}
	ns, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	l, err := ns.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }() // echo
		}
	}()
	addr := l.Addr().String()
	if c, err := net.Dial("tcp", addr); err == nil {
		// The host's loopback has no such listener (the port is free
		// there unless another test took it: then it is not ours).
		_ = c.Close()
		t.Logf("something on the host listens on %s too", addr)
	}
	sock := filepath.Join(t.TempDir(), "s.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := Forward(ul, func(ctx context.Context) (net.Conn, error) { return ns.Dial(ctx, "tcp", addr) })
	defer f.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.UnixConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "ping" {
		t.Fatalf("echo through the forwarder: %q %v", got, err)
	}
	_ = c.Close()
}
