// Package s3test runs an S3 API server in the test process (gofakes3 over
// memory), for tests of the manager and of task processes on S3 storage.
//
// The server is reachable over plain HTTP on 127.0.0.1 with path-style
// addressing. It checks that every request is made with the server's
// access key ID (in a SigV4 Authorization header or a presigned URL's
// X-Amz-Credential) and answers 403 otherwise, so a test proves that
// credentials reached whoever calls it; it does not verify signatures.
package s3test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"fmgr.dev/internal/blob"
)

// Credentials the server accepts.
const (
	AccessKeyID     = "fmgr-test-access"
	SecretAccessKey = "fmgr-test-secret-3f1b9c" // a test's own; never a real key
	Region          = "us-east-1"
)

// Server is a running S3 server with one bucket.
type Server struct {
	// URL is the endpoint, http://127.0.0.1:<port>.
	URL string
	// Bucket exists when Start returns.
	Bucket string
	// ignoreConditional makes the server drop If-None-Match, as stores
	// without conditional writes do.
	ignoreConditional atomic.Bool
	// denied counts requests refused for their credentials.
	denied atomic.Int64
	// presigned counts requests made with a presigned URL.
	presigned atomic.Int64
}

// Option tunes Start.
type Option func(*Server)

// WithoutConditionalWrites makes the server ignore If-None-Match on
// writes, like S3-compatible stores that lack conditional writes.
func WithoutConditionalWrites() Option {
	return func(s *Server) { s.ignoreConditional.Store(true) }
}

// Start runs a server with bucket "flyte" until the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{Bucket: "flyte"}
	for _, o := range opts {
		o(s)
	}
	backend := s3mem.New()
	if err := backend.CreateBucket(s.Bucket); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()), gofakes3.WithIntegrityCheck(true))
	srv := httptest.NewServer(s.wrap(fake.Server()))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *Server) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hasAccessKey(r) {
			s.denied.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist in our records.</Message></Error>`)
			return
		}
		if r.URL.Query().Has("X-Amz-Signature") {
			s.presigned.Add(1)
		}
		if s.ignoreConditional.Load() {
			r.Header.Del("If-None-Match")
		}
		next.ServeHTTP(w, r)
	})
}

// hasAccessKey: the request names AccessKeyID as its credential.
func hasAccessKey(r *http.Request) bool {
	want := "Credential=" + AccessKeyID + "/"
	if strings.Contains(r.Header.Get("Authorization"), want) {
		return true
	}
	return strings.HasPrefix(r.URL.Query().Get("X-Amz-Credential"), AccessKeyID+"/")
}

// Presigned is how many requests came with a presigned URL.
func (s *Server) Presigned() int64 { return s.presigned.Load() }

// Denied is how many requests were refused for their credentials.
func (s *Server) Denied() int64 { return s.denied.Load() }

// Options are the blob options that reach this server.
func (s *Server) Options() blob.S3Options {
	return blob.S3Options{Endpoint: s.URL, Region: Region, AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey, ForcePathStyle: true}
}

// StorageURL is the storage URL of the bucket, under prefix when not "".
func (s *Server) StorageURL(prefix string) string {
	if prefix == "" {
		return "s3://" + s.Bucket
	}
	return "s3://" + s.Bucket + "/" + prefix
}

// Open opens the bucket (under prefix) as a blob store, closed when the
// test ends.
func (s *Server) Open(t testing.TB, prefix string) *blob.Store {
	t.Helper()
	st, err := blob.OpenWith(context.Background(), s.StorageURL(prefix), blob.Options{S3: s.Options()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// ManagerEnv are the environment variables that put a flyte-manager
// process on this server's bucket (under prefix).
func (s *Server) ManagerEnv(prefix string) []string {
	return []string{
		"FLYTE_MANAGER_STORAGE_URL=" + s.StorageURL(prefix),
		"FLYTE_MANAGER_STORAGE_S3_ENDPOINT=" + s.URL,
		"FLYTE_MANAGER_STORAGE_S3_REGION=" + Region,
		"FLYTE_MANAGER_STORAGE_S3_ACCESS_KEY_ID=" + AccessKeyID,
		"FLYTE_MANAGER_STORAGE_S3_SECRET_ACCESS_KEY=" + SecretAccessKey,
		"FLYTE_MANAGER_STORAGE_S3_FORCE_PATH_STYLE=true",
	}
}

// ClientEnv are the environment variables through which an SDK process
// (a client, or a task run by hand) reaches this server, under the names
// the SDK reads.
func (s *Server) ClientEnv() []string {
	env, secret := s.Options().ProcessEnv()
	var out []string
	for _, m := range []map[string]string{env, secret} {
		for k, v := range m {
			out = append(out, k+"="+v)
		}
	}
	return out
}
