package testkit

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	var n atomic.Int32
	if msg := Poll(time.Minute, time.Millisecond, func() string {
		if n.Add(1) < 3 {
			return "not three"
		}
		return ""
	}); msg != "" || n.Load() != 3 {
		t.Errorf("Poll = %q after %d calls, want \"\" after 3", msg, n.Load())
	}
	n.Store(0)
	if msg := Poll(20*time.Millisecond, time.Millisecond, func() string { return fmt.Sprint("call ", n.Add(1)) }); msg != fmt.Sprint("call ", n.Load()) {
		t.Errorf("Poll = %q, want the last complaint (call %d)", msg, n.Load())
	}
}

func TestEventually(t *testing.T) {
	start := time.Now()
	Eventually(t, "a moment to pass", time.Minute, func() bool { return time.Since(start) > 30*time.Millisecond })
	EventuallyErr(t, "a moment to pass", time.Minute, func() (bool, error) { return time.Since(start) > 60*time.Millisecond, nil })
}

func TestBufferAwait(t *testing.T) {
	var b Buffer
	ch := b.AwaitText("ready")
	fmt.Fprint(&b, "getting ")
	select {
	case <-ch:
		t.Fatal("closed before the text came")
	default:
	}
	fmt.Fprint(&b, "ready\n")
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatal("not closed once the text came")
	}
	select {
	case <-b.AwaitText("getting"):
	default:
		t.Error("not closed at once for text already there")
	}
	if b.String() != "getting ready\n" {
		t.Errorf("String() = %q", b.String())
	}
}

func TestFreePort(t *testing.T) {
	if p, err := FreePort(); err != nil || p <= 0 {
		t.Errorf("FreePort() = %d, %v", p, err)
	}
}
