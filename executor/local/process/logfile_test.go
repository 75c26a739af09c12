package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"google.golang.org/protobuf/proto"
)

func TestLogsCaptureBothStreams(t *testing.T) {
	r := testRunner()
	a := newAttempt(t)
	script := `echo out1; echo err1 >&2; printf 'bad \377 byte\n'; echo out2; echo err2 >&2;` +
		`head -c 70000 /dev/zero | tr '\0' x; echo; printf 'no newline'`
	before := time.Now()
	p := start(t, r, a.spec(script))
	st := p.Wait()
	if st.Code != 0 {
		t.Fatalf("status %+v", st)
	}
	if strings.Join(st.StderrTail, "|") != "err1|err2" || len(st.StdoutTail) != 6 || st.StdoutTail[0] != "out1" || st.StdoutTail[5] != "no newline" {
		t.Errorf("tails %.200q %q", st.StdoutTail, st.StderrTail)
	}
	lines, err := ReadLog(a.log)
	if err != nil {
		t.Fatal(err)
	}
	if got := messages(lines, Stderr); strings.Join(got, "|") != "err1|err2" {
		t.Errorf("stderr %q", got)
	}
	out := messages(lines, Stdout)
	if len(out) != 6 || out[0] != "out1" || out[1] != "bad \uFFFD byte" || out[2] != "out2" ||
		len(out[3])+len(out[4]) != 70000 || len(out[3]) != maxLine || out[5] != "no newline" {
		short := make([]string, len(out))
		for i, o := range out {
			short[i] = fmt.Sprintf("%.20s(%d)", o, len(o))
		}
		t.Errorf("stdout %q", short)
	}
	sys := messages(lines, System)
	if len(sys) != 2 || !strings.HasPrefix(sys[0], "started ") || sys[1] != strings.TrimSpace(sys[1]) || !strings.HasPrefix(sys[1], "process exited with code 0") {
		t.Errorf("system %q", sys)
	}
	if lines[0].Stream != System || lines[len(lines)-1].Stream != System {
		t.Errorf("first/last %+v %+v", lines[0], lines[len(lines)-1])
	}
	prev := before.Add(-time.Millisecond)
	for _, l := range lines {
		if l.Time.Before(prev) || l.Time.After(time.Now()) || l.Time.Location() != time.UTC {
			t.Errorf("timestamp %v out of order (prev %v)", l.Time, prev)
		}
		prev = l.Time
		pl := l.Proto()
		want := dataplane.LogLineOriginator_USER
		if l.Stream == System {
			want = dataplane.LogLineOriginator_SYSTEM
		}
		if pl.GetOriginator() != want || pl.GetMessage() != l.Message+"\n" || !pl.GetTimestamp().AsTime().Equal(l.Time) {
			t.Errorf("proto %v for %+v", pl, l)
		}
		if _, err := proto.Marshal(pl); err != nil {
			t.Errorf("line does not marshal: %v", err)
		}
	}
	raw, _ := os.ReadFile(a.log)
	first := strings.SplitN(string(raw), "\n", 2)[0]
	if len(first) < 31 || first[29] != 'Z' || first[30:38] != " system " {
		t.Errorf("record format: %q", first)
	}
}

func TestParseLine(t *testing.T) {
	ts := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)
	rec := string(formatLine(nil, ts.In(time.FixedZone("X", 7200)), Stderr, []byte("hello  world ")))
	if rec != "2026-03-04T05:06:07.123456789Z stderr hello  world \n" {
		t.Errorf("record %q", rec)
	}
	if l := ParseLine(strings.TrimSuffix(rec, "\n")); !l.Time.Equal(ts) || l.Stream != Stderr || l.Message != "hello  world " {
		t.Errorf("parsed %+v", l)
	}
	if l := ParseLine("2026-03-04T05:06:07.123456789Z stdout "); l.Stream != Stdout || l.Message != "" {
		t.Errorf("empty message %+v", l)
	}
	for _, junk := range []string{"garbage", "not-a-time stdout x", "2026-03-04T05:06:07.123456789Z bogus x", ""} {
		if l := ParseLine(junk); l.Message != junk || !l.Time.IsZero() || l.Stream != 0 {
			t.Errorf("junk %q parsed as %+v", junk, l)
		}
		if o := ParseLine(junk).Originator(); o != dataplane.LogLineOriginator_UNKNOWN {
			t.Errorf("junk originator %v", o)
		}
	}
	if pl := (Line{Message: "x"}).Proto(); pl.Timestamp != nil {
		t.Errorf("zero time became %v", pl.Timestamp)
	}
}

func TestFollowLog(t *testing.T) {
	r := testRunner()
	a := newAttempt(t)
	var got []Line
	followErr := make(chan error, 1)
	// Follow before the log exists.
	started := make(chan *Process, 1)
	go func() {
		p := <-started
		followErr <- FollowLog(context.Background(), a.log, p.Finished, func(ls []Line) error {
			got = append(got, ls...)
			return nil
		})
	}()
	p := start(t, r, a.spec(`for i in 1 2 3 4 5; do echo "line $i"; sleep 0.1; done; printf tail`))
	started <- p
	select {
	case err := <-followErr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(patience):
		t.Fatal("FollowLog did not return after the process ended")
	}
	if !p.Finished() {
		t.Fatal("follow returned before the end")
	}
	if want := "line 1|line 2|line 3|line 4|line 5|tail"; strings.Join(messages(got, Stdout), "|") != want {
		t.Errorf("followed %q", messages(got, Stdout))
	}
	if last := got[len(got)-1]; last.Stream != System || !strings.Contains(last.Message, "exited with code 0") {
		t.Errorf("last line %+v", last)
	}
	all, _ := ReadLog(a.log)
	if len(all) != len(got) {
		t.Errorf("followed %d lines, file has %d", len(got), len(all))
	}

	// Cancellation and emit errors end the follow.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	never := func() bool { return false }
	if err := FollowLog(ctx, filepath.Join(t.TempDir(), "missing.log"), never, func([]Line) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}
	boom := errors.New("client gone")
	if err := FollowLog(context.Background(), a.log, never, func([]Line) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("emit error: %v", err)
	}
	// A log that never appears, for an attempt that ended, ends the follow.
	if err := FollowLog(context.Background(), filepath.Join(t.TempDir(), "missing.log"), func() bool { return true }, func([]Line) error {
		t.Error("emitted lines of a missing log")
		return nil
	}); err != nil {
		t.Errorf("missing log of a finished attempt: %v", err)
	}
	if _, err := ReadLog(filepath.Join(t.TempDir(), "missing.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadLog missing: %v", err)
	}
}

func messages(lines []Line, s Stream) []string {
	var out []string
	for _, l := range lines {
		if l.Stream == s {
			out = append(out, l.Message)
		}
	}
	return out
}

func containsMsg(lines []Line, s Stream, sub string) bool {
	for _, l := range lines {
		if l.Stream == s && strings.Contains(l.Message, sub) {
			return true
		}
	}
	return false
}
