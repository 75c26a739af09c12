package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"fmgr.dev/internal/config"
)

// generous bounds what "soon" means on a loaded machine.
const generous = 30 * time.Second

func shortTimeouts(body, idle time.Duration) func(*config.Server) {
	return func(c *config.Server) {
		c.BodyReadTimeout = body
		c.IdleTimeout = idle
	}
}

// waitClosed reads from conn until the server closes it and returns how long
// that took; it fails the test if the connection is still open after the
// generous bound.
func waitClosed(t *testing.T, conn net.Conn, since time.Time) time.Duration {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(generous)); err != nil {
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after %s", generous)
	}
	return time.Since(since)
}

// A request that declares a body and never sends it is failed and its
// connection closed once the body has stalled for server.bodyReadTimeout,
// whether or not the handler reads the body.
func TestStalledBodyIsClosed(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ts := startServer(t, shortTimeouts(timeout, time.Hour), func(s *Server) {
		if err := s.Handle(Route{Pattern: "POST /ignore-body", Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "not reading it")
		})}); err != nil {
			t.Fatal(err)
		}
	})
	addr := strings.TrimPrefix(ts.base, "http://")
	for _, path := range []string{procSay, "/ignore-body"} {
		t.Run(path, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/proto\r\nConnect-Protocol-Version: 1\r\nContent-Length: 100\r\n\r\n", path, addr)
			if took := waitClosed(t, conn, start); took < timeout {
				t.Errorf("closed after %s, before server.bodyReadTimeout (%s)", took, timeout)
			}
		})
	}

	// Over HTTP/2 the stalled stream is failed; the connection serves on.
	t.Run("h2c", func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close()
		req, err := http.NewRequest(http.MethodPost, ts.base+procSay, pr)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = 100
		req.Header.Set("Content-Type", "application/proto")
		req.Header.Set("Connect-Protocol-Version", "1")
		ctx, cancel := context.WithTimeout(context.Background(), generous)
		defer cancel()
		client := httpClient(true)
		resp, err := client.Do(req.WithContext(ctx))
		if ctx.Err() != nil {
			t.Fatalf("stalled HTTP/2 request still pending after %s", generous)
		}
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("stalled request answered 200: %q", body)
			}
		}
		resp = postUnary(t, client, ts.base+procSay, mustMarshal(t, wrapperspb.String("after")), "")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("next call on the connection: %d", resp.StatusCode)
		}
	})
}

// A body that keeps delivering bytes is not cut, however long it takes in
// all: the deadline follows progress.
func TestSlowUploadInProgressIsNotCut(t *testing.T) {
	const timeout = 2 * time.Second
	ts := startServer(t, shortTimeouts(timeout, time.Hour), nil)
	payload := mustMarshal(t, &wrapperspb.BytesValue{Value: []byte(strings.Repeat("x", 40))})
	for _, h2c := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2c=%v", h2c), func(t *testing.T) {
			pr, pw := io.Pipe()
			go func() {
				// One byte every 100 ms: 4 s in all, twice the timeout.
				for i := range payload {
					time.Sleep(100 * time.Millisecond)
					if _, err := pw.Write(payload[i : i+1]); err != nil {
						return
					}
				}
				pw.Close()
			}()
			req, err := http.NewRequest(http.MethodPost, ts.base+procSize, pr)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = int64(len(payload))
			req.Header.Set("Content-Type", "application/proto")
			req.Header.Set("Connect-Protocol-Version", "1")
			resp, err := httpClient(h2c).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data := readBody(t, resp)
			resp.Body.Close()
			var n wrapperspb.Int64Value
			if resp.StatusCode != http.StatusOK || proto.Unmarshal(data, &n) != nil || n.GetValue() != 40 {
				t.Fatalf("slow upload: %d %q", resp.StatusCode, data)
			}
		})
	}
}

// An idle keep-alive connection is closed after server.idleTimeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	ts := startServer(t, shortTimeouts(time.Hour, idle), nil)
	addr := strings.TrimPrefix(ts.base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	start := time.Now()
	if err := conn.SetReadDeadline(time.Now().Add(generous)); err != nil {
		t.Fatal(err)
	}
	if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("idle connection still open after %s", generous)
	}
	// The server's idle clock starts when it has written the response, a
	// little before this side has read it: only a close far earlier than
	// the timeout is wrong.
	if took := time.Since(start); took < idle/2 {
		t.Errorf("closed after %s, long before server.idleTimeout (%s)", took, idle)
	}
}

// The HTTP/2 server advertises server.maxConcurrentStreams.
func TestMaxConcurrentStreamsIsAdvertised(t *testing.T) {
	ts := startServer(t, func(c *config.Server) { c.MaxConcurrentStreams = 7 }, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(generous)); err != nil {
		t.Fatal(err)
	}
	// Client preface, then an empty SETTINGS frame.
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		t.Fatal(err)
	}
	// The server's first frame is its SETTINGS: a 9-byte header (24-bit
	// length, type 4), then 6-byte entries (16-bit id, 32-bit value).
	var hdr [9]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		t.Fatal(err)
	}
	length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	if hdr[3] != 4 || length%6 != 0 {
		t.Fatalf("first frame: type %d length %d, want SETTINGS", hdr[3], length)
	}
	payload := make([]byte, length)
	if _, err := io.ReadFull(conn, payload); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < length; i += 6 {
		if binary.BigEndian.Uint16(payload[i:]) == 0x3 { // SETTINGS_MAX_CONCURRENT_STREAMS
			if v := binary.BigEndian.Uint32(payload[i+2:]); v != 7 {
				t.Errorf("MAX_CONCURRENT_STREAMS = %d, want 7", v)
			}
			return
		}
	}
	t.Error("server does not advertise MAX_CONCURRENT_STREAMS")
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
