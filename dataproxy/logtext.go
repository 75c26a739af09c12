package dataproxy

import (
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/dataproxy/dataproxyconnect"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/loglink"
)

// serveLog answers the manager's log endpoint (loglink.Pattern), where an
// attempt's log link points: the attempt's log as plain text, read as
// TailLogs reads it (RunData.Logs), so it is followed while the attempt
// runs and ends with it. Like every route it is behind the server's host
// guard; a browser opens it as a page of text.
func (s *Service) serveLog(w http.ResponseWriter, r *http.Request) {
	if s.Runs == nil {
		plain(w, http.StatusServiceUnavailable, "logs are not available yet")
		return
	}
	a, err := loglink.FromPath(r.PathValue)
	if err != nil {
		plain(w, http.StatusBadRequest, err.Error())
		return
	}
	req := &dataproxy.TailLogsRequest{
		ActionId: &common.ActionIdentifier{
			Run:  &common.RunIdentifier{Org: a.Org, Project: a.Project, Domain: a.Domain, Name: a.Run},
			Name: a.Action,
		},
		Attempt: uint32(a.Number),
	}
	ctx := r.Context()
	if s.authRead != nil { // with auth required: who may read TailLogs
		if ctx, err = s.authRead(r, dataproxyconnect.DataProxyServiceTailLogsProcedure, req); err != nil {
			s.logError(w, r, err)
			return
		}
	}
	rc := http.NewResponseController(w)
	started := false
	err = s.Runs.Logs(ctx, req, func(resp *dataproxy.TailLogsResponse) error {
		if !started {
			started = true
			logHeaders(w.Header())
			w.WriteHeader(http.StatusOK)
		}
		var b strings.Builder
		for _, l := range resp.GetLogs() {
			for _, line := range l.GetLines() {
				b.WriteString(strings.TrimSuffix(line.GetMessage(), "\n"))
				b.WriteByte('\n')
			}
		}
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
		// Each batch reaches the reader as it comes: the log is followed.
		return rc.Flush()
	})
	switch {
	case err == nil && !started: // the log exists and is empty
		logHeaders(w.Header())
		w.WriteHeader(http.StatusOK)
	case err == nil:
	case r.Context().Err() != nil: // the reader went away
	case started:
		// The status is sent; the text ends where the log could not go on.
		s.log.WarnContext(r.Context(), "log endpoint: the log ended early", "path", r.URL.Path, "error", err)
	default:
		s.logError(w, r, err)
	}
}

// logHeaders: the log is the task's own text, so it must never be taken
// for a page of the manager's origin.
func logHeaders(h http.Header) {
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "no-store")
	// Proxies that buffer responses would hold a followed log back.
	h.Set("X-Accel-Buffering", "no")
}

// logError answers a log that cannot be served, with the status and the
// message TailLogs would give (its Connect code); anything outside the
// error vocabulary is logged, and the reader only learns it was internal.
func (s *Service) logError(w http.ResponseWriter, r *http.Request, err error) {
	cerr, internal := errs.ToConnect(err)
	if internal {
		s.log.ErrorContext(r.Context(), "log endpoint", "path", r.URL.Path, "error", err)
		plain(w, http.StatusInternalServerError, "internal error")
		return
	}
	plain(w, httpStatus(cerr.Code()), cerr.Message())
}

// httpStatus is the HTTP status a plain route answers for a Connect code.
func httpStatus(c connect.Code) int {
	switch c {
	case connect.CodeInvalidArgument:
		return http.StatusBadRequest
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeFailedPrecondition, connect.CodeAborted, connect.CodeAlreadyExists:
		return http.StatusConflict
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case connect.CodeCanceled:
		return 499
	}
	return http.StatusInternalServerError
}
