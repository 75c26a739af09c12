package dataproxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"fmgr.dev/dataproxy"
	dp "fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/errs"
)

// logRuns is a RunData whose Logs answers with logs; the other calls are
// the run service's business.
type logRuns struct {
	dataproxy.RunData
	logs func(req *dp.TailLogsRequest, send func(*dp.TailLogsResponse) error) error
}

func (r logRuns) Logs(_ context.Context, req *dp.TailLogsRequest, send func(*dp.TailLogsResponse) error) error {
	return r.logs(req, send)
}

func lines(msgs ...string) *dp.TailLogsResponse {
	var ls []*dataplane.LogLine
	for _, m := range msgs {
		ls = append(ls, &dataplane.LogLine{Message: m})
	}
	return &dp.TailLogsResponse{Logs: []*dp.TailLogsResponse_Logs{{Lines: ls}}}
}

// The log endpoint answers TailLogs' lines of the attempt its path names
// as plain text that no browser takes for a page, and its errors with
// TailLogs' codes as statuses; internal errors only as "internal error".
func TestLogEndpoint(t *testing.T) {
	var asked *dp.TailLogsRequest
	var answer func(send func(*dp.TailLogsResponse) error) error
	h := newHarness(t, withRuns(logRuns{logs: func(req *dp.TailLogsRequest, send func(*dp.TailLogsResponse) error) error {
		asked = req
		return answer(send)
	}}))
	const path = "/logs/local/p/d/r1/a0/2"

	answer = func(send func(*dp.TailLogsResponse) error) error {
		if err := send(lines("first\n", "<script>alert(1)</script>")); err != nil {
			return err
		}
		return send(lines("last\n"))
	}
	resp, err := http.Get(h.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK || body != "first\n<script>alert(1)</script>\nlast\n" {
		t.Errorf("GET %s = %d %q", path, resp.StatusCode, body)
	}
	for k, want := range map[string]string{"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff",
		"Content-Security-Policy": "default-src 'none'; sandbox"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	id := asked.GetActionId()
	if got := fmt.Sprintf("%q %s/%s/%s/%s %d", id.GetRun().GetOrg(), id.GetRun().GetProject(), id.GetRun().GetDomain(),
		id.GetRun().GetName(), id.GetName(), asked.GetAttempt()); got != `"" p/d/r1/a0 2` {
		t.Errorf("asked for %s", got)
	}

	for _, c := range []struct {
		err    error
		status int
		body   string
	}{
		{errs.NotFoundf("logs of attempt 2 of action a0 (not started yet?)"), http.StatusNotFound, "not started yet?"},
		{errs.Invalidf("action_id.run.project %q may only contain letters", "p!"), http.StatusBadRequest, "may only contain"},
		{fmt.Errorf("logs are not available from the cluster: %w", errs.ErrUnavailable), http.StatusServiceUnavailable, "not available from the cluster"},
		{errors.New("open /var/lib/secret/attempt.log: disk on fire"), http.StatusInternalServerError, "internal error"},
	} {
		answer = func(func(*dp.TailLogsResponse) error) error { return c.err }
		resp, err := http.Get(h.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != c.status || !strings.Contains(body, c.body) || strings.Contains(body, "/var/lib") {
			t.Errorf("%v: %d %q, want %d with %q", c.err, resp.StatusCode, body, c.status, c.body)
		}
	}

	// An attempt that is not a positive number never reaches the logs.
	asked = nil
	resp, err = http.Get(h.srv.URL + "/logs/local/p/d/r1/a0/0")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusBadRequest || asked != nil || !strings.Contains(body, "attempts count from 1") {
		t.Errorf("attempt 0: %d %q (logs asked: %v)", resp.StatusCode, body, asked != nil)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
