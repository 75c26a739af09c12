package server

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"
)

// decompressRequests undoes Content-Encoding: gzip on unary Connect request
// bodies before connect-go sees them. The Python SDK gzips every unary
// request, and some of its bodies make connect-go fail with "gzip: invalid
// header" (e.g. an encoding header on a body that is not gzip data). Bodies
// that do not start with the gzip magic bytes are passed on as they are.
// Streaming protocols (Connect streaming, gRPC, gRPC-Web) compress per message
// and are left to connect-go. The configured maximum applies to the
// decompressed size.
func (s *Server) decompressRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(strings.TrimSpace(r.Header.Get("Content-Encoding")), "gzip") || isStreamingContentType(r.Header.Get("Content-Type")) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := s.readGzipBody(r.Body)
		if err != nil {
			s.log.WarnContext(r.Context(), "rejecting compressed request", "path", r.URL.Path, "error", err)
			_ = s.errors.Write(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Del("Content-Encoding")
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		next.ServeHTTP(w, r)
	})
}

// readGzipBody reads and decompresses a request body, bounded by the
// configured maximum message size.
func (s *Server) readGzipBody(body io.Reader) ([]byte, error) {
	limit := s.cfg.MaxRequestBytes
	br := bufio.NewReader(body)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("request body is not valid gzip: %w", err))
		}
		defer zr.Close()
		src = zr
	}
	data, err := io.ReadAll(io.LimitReader(src, limit+1))
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("reading gzip request body: %w", err))
	}
	if int64(len(data)) > limit {
		return nil, connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("request message exceeds the server's limit of %d bytes (server.maxRequestBytes) once decompressed", limit))
	}
	return data, nil
}

// isStreamingContentType reports the content types of protocols that frame
// and compress each message themselves.
func isStreamingContentType(ct string) bool {
	ct = strings.ToLower(strings.TrimSpace(ct))
	return strings.HasPrefix(ct, "application/grpc") || strings.HasPrefix(ct, "application/connect+")
}
