package process

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// A log past its cap keeps its head, a marker with the dropped byte count,
// and its tail; the file stays within the cap and the segments are gone.
func TestLogIsCappedWithHeadAndTail(t *testing.T) {
	const capBytes = 1 << 20
	const n = 100000 // ~6 MB of records
	r := NewRunner(Config{KillGrace: patience, DrainTimeout: patience, MaxLogBytes: capBytes})
	a := newAttempt(t)
	st := start(t, r, a.spec(fmt.Sprintf(`seq 1 %d | sed 's/^/line /'`, n))).Wait()
	if st.Code != 0 {
		t.Fatalf("status %+v", st)
	}
	fi, err := os.Stat(a.log)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > capBytes+1024 {
		t.Errorf("log is %d bytes, cap %d", fi.Size(), capBytes)
	}
	for _, seg := range []string{".tail0", ".tail1"} {
		if _, err := os.Stat(a.log + seg); !os.IsNotExist(err) {
			t.Errorf("segment %s left behind (%v)", seg, err)
		}
	}
	lines, err := ReadLog(a.log)
	if err != nil {
		t.Fatal(err)
	}
	out := messages(lines, Stdout)
	if len(out) == 0 || out[0] != "line 1" || out[len(out)-1] != fmt.Sprintf("line %d", n) {
		t.Fatalf("stdout runs from %q to %q", out[0], out[len(out)-1])
	}
	// The numbers run without a gap up to the marker, then again from
	// somewhere later up to the end: exactly one gap, where the marker is.
	markerAt, gaps := -1, 0
	for i, l := range lines {
		if l.Stream == System && strings.HasPrefix(l.Message, "log truncated: ") {
			markerAt = i
			dropped, _ := strconv.Atoi(strings.Fields(l.Message)[2])
			if dropped <= 0 {
				t.Errorf("marker %q", l.Message)
			}
		}
	}
	prev := 0
	for _, m := range out {
		k, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
		if k != prev+1 {
			gaps++
		}
		prev = k
	}
	if !containsMsg(lines, System, "from here only its tail is kept") {
		t.Error("no notice where the head ends")
	}
	if markerAt < 0 || gaps != 1 {
		t.Errorf("marker at %d, %d gap(s) in the numbering", markerAt, gaps)
	}
	if last := lines[len(lines)-1]; last.Stream != System || !strings.Contains(last.Message, "exited with code 0") {
		t.Errorf("the tail does not end with the exit: %+v", last)
	}

	// Under the cap nothing is dropped.
	b := newAttempt(t)
	start(t, r, b.spec(`seq 1 1000`)).Wait()
	small, _ := ReadLog(b.log)
	if got := messages(small, Stdout); len(got) != 1000 || containsMsg(small, System, "log truncated") {
		t.Errorf("a small log: %d lines", len(got))
	}
}
