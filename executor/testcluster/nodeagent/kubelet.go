package nodeagent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmgr.dev/executor/local/process"
)

// The agent answers the one kubelet API the API server proxies to that the
// manager uses: a container's log (pods/log, `kubectl logs`), read from the
// log file the agent's processes write. The API server reaches the node at
// its InternalIP and DaemonEndpoints port over HTTPS without checking the
// certificate (it has no kubelet CA), so a self-signed one serves.

// serveKubelet listens on the node's address and serves the kubelet API
// until ctx ends; it returns the port.
func (a *Agent) serveKubelet(ctx context.Context) (int, error) {
	cert, err := selfSigned()
	if err != nil {
		return 0, fmt.Errorf("nodeagent: kubelet certificate: %w", err)
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(hostIP, "0"), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return 0, fmt.Errorf("nodeagent: kubelet listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", a.containerLogs)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// containerLogs writes a container's log as a kubelet does: each line the
// process wrote (stdout and stderr), after its RFC 3339 time with ?timestamps=true;
// with ?follow=true until the Pod's run ended.
func (a *Agent) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	pod, err := a.opts.Client.CoreV1().Pods(ns).Get(r.Context(), name, metav1.GetOptions{})
	if err != nil {
		http.Error(w, fmt.Sprintf("pod %s/%s: %v", ns, name, err), http.StatusNotFound)
		return
	}
	path := filepath.Join(PodDir(a.opts.Dir, pod), container+".log")
	if _, err := os.Stat(path); err != nil {
		http.Error(w, fmt.Sprintf("container %q of pod %s/%s has not started", container, ns, name), http.StatusBadRequest)
		return
	}
	follow, stamps := r.URL.Query().Get("follow") == "true", r.URL.Query().Get("timestamps") == "true"
	done := func() bool { return true }
	if follow {
		done = func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			run, ok := a.pods[pod.UID]
			return !ok || run.ended
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	rc := http.NewResponseController(w)
	err = process.FollowLog(r.Context(), path, done, func(lines []process.Line) error {
		var b []byte
		for _, l := range lines {
			if l.Stream != process.Stdout && l.Stream != process.Stderr {
				continue // the runner's own notes: a container log has only the process's output
			}
			if stamps {
				b = l.Time.UTC().AppendFormat(b, time.RFC3339Nano)
				b = append(b, ' ')
			}
			b = append(append(b, l.Message...), '\n')
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		a.log.Warn("serving a container log", "pod", ns+"/"+name, "container", container, "error", err)
	}
}

// selfSigned makes the kubelet's serving certificate for the node's address.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "fmgr-nodeagent"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP(hostIP)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
