package server

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"fmgr.dev/internal/config"
)

// A second listener serves the same handler, and the host guard takes a
// page there for the manager's own: its Host and its Origin pass.
func TestListenAlsoServesTheSameHandler(t *testing.T) {
	var extra net.Addr
	ts := startServer(t, nil, func(s *Server) {
		if err := s.Handle(Route{Pattern: "GET /hello", Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "hello")
		})}); err != nil {
			t.Fatal(err)
		}
		a, err := s.ListenAlso("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		extra = a
	})
	port := extra.(*net.TCPAddr).Port
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{host: "localhost:" + strconv.Itoa(port), want: http.StatusOK},
		{host: "localhost:" + strconv.Itoa(port), origin: "http://localhost:" + strconv.Itoa(port), want: http.StatusOK},
		{host: "127.0.0.1:" + strconv.Itoa(port), want: http.StatusOK},
		// The API port's own origin is another origin for this page.
		{host: "localhost:" + strconv.Itoa(port), origin: ts.base, want: http.StatusForbidden},
		{host: "evil.example.com:" + strconv.Itoa(port), want: http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+extra.String()+"/hello", nil)
		req.Host = tc.host
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %s Origin %q: status %d (%s), want %d", tc.host, tc.origin, resp.StatusCode, body, tc.want)
		}
		if tc.want == http.StatusOK && string(body) != "hello" {
			t.Errorf("Host %s: body %q", tc.host, body)
		}
	}
	// The main listener still serves.
	resp, err := http.Get(ts.base + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("main listener: status %d", resp.StatusCode)
	}
}

func TestListenAlsoBusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	s := New(config.Default().Server, nil)
	if _, err := s.ListenAlso(busy.Addr().String()); err == nil || !strings.Contains(err.Error(), busy.Addr().String()) {
		t.Errorf("ListenAlso on a busy port: err = %v, want one naming the address", err)
	}
}
