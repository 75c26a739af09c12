package apps

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/netns"
	pb "fmgr.dev/gen/go/flyteidl2/app"
)

// A replica's network. Where the host lets the manager make network
// namespaces (it runs as root), each replica gets one of its own (package
// netns) with only a loopback interface: the app binds the port it
// chooses (its container port, 8080 by default, which PORT also names) on
// 127.0.0.1 or 0.0.0.0, two replicas never meet, and the replica reaches
// nothing on the host's loopback. Two forwarders of the manager's bridge
// the namespaces:
//   - in: a Unix socket, <replica>/net/app.sock, in a directory only the
//     manager may enter, whose connections the manager dials into the
//     namespace to the app's port; the proxy dials the socket;
//   - out: listeners inside the namespace on 127.0.0.1 at the ports of the
//     manager's own addresses the replica is given (its API endpoint, the
//     S3 endpoint of a loopback storage), each joined to that address on
//     the host; the replica gets the endpoint as 127.0.0.1:<port>.
//
// Elsewhere (no privilege, or Config.Network "host") a replica shares the
// manager's network and gets a free port in PORT, as before.

// Network modes (Config.Network).
const (
	NetworkAuto      = "auto"      // a namespace per replica where the host allows it
	NetworkHost      = "host"      // the manager's network, a free port each
	NetworkNamespace = "namespace" // a namespace per replica, or no replica
)

// DefaultAppPort is the port an app binds when its spec names none (the
// SDK's AppEnvironment default).
const DefaultAppPort = 8080

// sockName is the replica's Unix socket in its net/ directory.
const sockName = "app.sock"

// useNamespaces decides once, from the configured mode and a probe, how
// replicas are networked, and says so in the log.
func (r *Runtime) useNamespaces() (bool, error) {
	r.netOnce.Do(func() {
		mode := r.cfg.Network
		if mode == "" {
			mode = NetworkAuto
		}
		switch mode {
		case NetworkHost:
			r.cfg.Log.Info("apps: replicas share the manager's network, each on a free port (apps.network: host)")
			return
		case NetworkAuto, NetworkNamespace:
		default:
			r.netErr = fmt.Errorf("apps.network %q is none of auto, namespace, host", mode)
			return
		}
		if err := netns.Supported(); err != nil {
			if mode == NetworkNamespace {
				r.netErr = fmt.Errorf("apps.network is namespace but this host does not allow network namespaces: %w", err)
				return
			}
			r.cfg.Log.Info("apps: this host does not allow network namespaces; replicas share the manager's network, each on a free port", "reason", err)
			return
		}
		r.netNS = true
		r.cfg.Log.Info("apps: each replica runs in a network namespace of its own, reached through a Unix socket in its directory")
	})
	return r.netNS, r.netErr
}

// replicaNet is how the manager reaches one replica.
type replicaNet struct {
	port int // the app's port, in its namespace or on the host
	ns   *netns.NS
	// dir is the replica's net/ directory, held open so that the socket's
	// path is short (/proc/self/fd/N/app.sock: a Unix socket path has
	// at most 107 bytes, and replica directories run deep).
	dir       *os.File
	sock      string
	in        *netns.Forwarder
	out       []*netns.Forwarder
	transport *http.Transport
}

// hostNet is a replica on the manager's network, at a free port.
func hostNet() (*replicaNet, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("no free port for a replica: %w", err)
	}
	n := &replicaNet{port: port}
	n.transport = newTransport(n.dialHost)
	return n, nil
}

// nsNet makes a replica's namespace in root: the socket in, and a way out
// to each of reach (host:port addresses of the manager's on loopback).
func nsNet(root string, port int, reach []string) (_ *replicaNet, err error) {
	ns, err := netns.New()
	if err != nil {
		return nil, err
	}
	n := &replicaNet{port: port, ns: ns}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	dir := filepath.Join(root, "net")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil { // no set-group-id bit
		return nil, err
	}
	if n.dir, err = os.Open(dir); err != nil {
		return nil, err
	}
	n.sock = fmt.Sprintf("/proc/self/fd/%d/%s", n.dir.Fd(), sockName)
	l, err := net.Listen("unix", n.sock)
	if err != nil {
		return nil, fmt.Errorf("the replica's socket: %w", err)
	}
	n.in = netns.Forward(l, func(ctx context.Context) (net.Conn, error) { return n.dialApp(ctx) })
	for _, addr := range reach {
		_, p, _ := net.SplitHostPort(addr)
		if p == strconv.Itoa(port) {
			return nil, fmt.Errorf("the app's port %d is where the replica reaches the manager (%s) in its network; give the app another port, or set apps.network: host", port, addr)
		}
		l, err := ns.Listen("tcp", net.JoinHostPort("127.0.0.1", p))
		if err != nil {
			return nil, fmt.Errorf("reaching %s from the replica's network: %w", addr, err)
		}
		n.out = append(n.out, netns.Forward(l, func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}))
	}
	n.transport = newTransport(func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", n.sock)
	})
	return n, nil
}

func newTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = dial
	return t
}

// addr is the app's address as the replica sees it.
func (n *replicaNet) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// dialApp connects to the app's port: inside its namespace, or on the host.
func (n *replicaNet) dialApp(ctx context.Context) (net.Conn, error) {
	if n.ns != nil {
		return n.ns.Dial(ctx, "tcp", n.addr())
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", n.addr())
}

func (n *replicaNet) dialHost(ctx context.Context, _, _ string) (net.Conn, error) {
	return n.dialApp(ctx)
}

// Dial is the replica's dial function for the proxy: whatever address it
// is given, it reaches the app (through the socket in a namespace).
func (n *replicaNet) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return n.transport.DialContext(ctx, network, addr)
}

// probe reports whether the app accepts connections on its port.
func (n *replicaNet) probe() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c, err := n.dialApp(ctx)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// close ends the forwarders and lets the namespace go.
func (n *replicaNet) close() {
	if n.transport != nil {
		n.transport.CloseIdleConnections()
	}
	if n.in != nil {
		_ = n.in.Close()
	}
	for _, f := range n.out {
		_ = f.Close()
	}
	if n.dir != nil {
		_ = n.dir.Close()
	}
	_ = n.ns.Close()
}

// appPort is the port the app's container names first, else the default.
func appPort(s *pb.Spec) int {
	for _, p := range s.GetContainer().GetPorts() {
		if p.GetContainerPort() > 0 {
			return int(p.GetContainerPort())
		}
	}
	return DefaultAppPort
}

// reachable is what a replica in a namespace must reach of the manager's:
// its endpoint, and every loopback address in the operator's and the
// storage's variables (the S3 endpoint). Only the manager's own
// configuration opens a way out, never the app's env.
func reachable(endpoint string, env []contract.KV) []string {
	var out []string
	add := func(hostport string) {
		host, port, err := net.SplitHostPort(hostport)
		if err != nil || port == "" || !loopback(host) {
			return
		}
		if !slices.ContainsFunc(out, func(o string) bool { _, p, _ := net.SplitHostPort(o); return p == port }) {
			out = append(out, net.JoinHostPort("127.0.0.1", port))
		}
	}
	if _, _, err := net.SplitHostPort(endpoint); err == nil {
		// The endpoint is always reached (as 127.0.0.1:<port> inside,
		// whatever host the manager advertises).
		out = append(out, endpoint)
	}
	for _, kv := range env {
		u, err := url.Parse(kv.Value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" {
			continue
		}
		add(u.Host)
	}
	return out
}

// insideEndpoint is the endpoint as a replica in a namespace reaches it.
func insideEndpoint(endpoint string) string {
	_, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return endpoint
	}
	return net.JoinHostPort("127.0.0.1", port)
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
