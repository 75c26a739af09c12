package logship

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/testkit"
)

const dir = "runs/_/p/d/r1/a0/1/_logs"

func openStore(t *testing.T) *blob.Store {
	t.Helper()
	st, err := blob.Open(context.Background(), "file://"+filepath.ToSlash(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fakeLog is a live source: the lines written so far, followed until done.
type fakeLog struct {
	mu    sync.Mutex
	lines []string
	done  bool
}

func (f *fakeLog) add(msgs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lines = append(f.lines, msgs...)
}

func (f *fakeLog) finish() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = true
}

func (f *fakeLog) ended(context.Context) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

func (f *fakeLog) src(ctx context.Context, emit func([]*dataplane.LogLine) error) error {
	i := 0
	for {
		f.mu.Lock()
		batch, done := slices.Clone(f.lines[i:]), f.done
		f.mu.Unlock()
		if len(batch) > 0 {
			out := make([]*dataplane.LogLine, len(batch))
			for k, m := range batch {
				out[k] = &dataplane.LogLine{Message: m + "\n"}
			}
			if err := emit(out); err != nil {
				return err
			}
			i += len(batch)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func numbered(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("line %05d", i))
	}
	return out
}

// stored reads the stored log back as messages without their newlines.
func stored(t *testing.T, st *blob.Store) []string {
	t.Helper()
	var out []string
	err := ReadStored(context.Background(), st, dir, func(ls []*dataplane.LogLine) error {
		for _, l := range ls {
			out = append(out, strings.TrimSuffix(l.GetMessage(), "\n"))
		}
		return nil
	})
	if err != nil && !errors.Is(err, errs.ErrNotFound) {
		t.Fatal(err)
	}
	return out
}

func partKeys(t *testing.T, st *blob.Store) []string {
	t.Helper()
	keys, err := parts(context.Background(), st, dir)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestPartKeysListInOrder(t *testing.T) {
	for _, n := range []int{1, 9, 10, 99999999} {
		k := PartKey(dir, n)
		if got, ok := partNumber(k); !ok || got != n {
			t.Errorf("partNumber(%q) = %d, %v", k, got, ok)
		}
	}
	for _, k := range []string{dir + "/log.pb", dir + "/part-x.pb", dir + "/part-00000000.pb", dir + "/part-00000001"} {
		if _, ok := partNumber(k); ok {
			t.Errorf("partNumber(%q) accepted", k)
		}
	}
}

// While the attempt runs its log reaches storage chunk by chunk; when it
// ends one final object holds it all and the chunks are gone.
func TestShipChunksWhileRunningThenFinal(t *testing.T) {
	st := openStore(t)
	f := &fakeLog{}
	sh := &Shipper{Store: st, Dir: dir, ChunkBytes: 200, FlushEvery: 20 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- sh.Run(context.Background(), f.src, f.ended) }()

	f.add(numbered(0, 100)...)
	testkit.Eventually(t, "the first lines in stored chunks", 10*time.Second, func() bool {
		return len(stored(t, st)) == 100
	})
	if n := len(partKeys(t, st)); n < 5 {
		t.Fatalf("%d chunks for 1100 bytes of 200-byte chunks", n)
	}
	// A quiet log still reaches storage: the last, small chunk after FlushEvery.
	f.add("a last line")
	testkit.Eventually(t, "a small chunk flushed by time", 10*time.Second, func() bool {
		return len(stored(t, st)) == 101
	})
	f.add(numbered(100, 150)...)
	f.finish()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := append(append(numbered(0, 100), "a last line"), numbered(100, 150)...)
	if got := stored(t, st); !slices.Equal(got, want) {
		t.Fatalf("final log:\n got %d lines %q...\nwant %d lines", len(got), got[:min(3, len(got))], len(want))
	}
	if ok, _ := st.Exists(context.Background(), FinalKey(dir)); !ok {
		t.Fatal("no final object")
	}
	if k := partKeys(t, st); len(k) != 0 {
		t.Fatalf("chunks left after the final object: %v", k)
	}
}

// A manager that stops mid-attempt leaves chunks that read back in order
// (a prefix of the log); the next shipper of the attempt goes on after them
// without repeating a line.
func TestShipResumesAfterACrash(t *testing.T) {
	st := openStore(t)
	f := &fakeLog{}
	f.add(numbered(0, 120)...)
	ctx, cancel := context.WithCancel(context.Background())
	first := &Shipper{Store: st, Dir: dir, ChunkBytes: 100, FlushEvery: time.Hour}
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx, f.src, f.ended) }()
	testkit.Eventually(t, "chunks written", 10*time.Second, func() bool { return len(partKeys(t, st)) >= 11 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after its context ended: %v", err)
	}
	// The crash: the chunk being filled is lost, and with it the last one
	// written (a kill between two writes).
	keys := partKeys(t, st)
	if err := st.Delete(context.Background(), keys[len(keys)-1]); err != nil {
		t.Fatal(err)
	}
	got := stored(t, st)
	if len(got) == 0 || len(got) >= 120 || !slices.Equal(got, numbered(0, len(got))) {
		t.Fatalf("a partial chunk set read back as %d lines, not a prefix in order: %q", len(got), got)
	}

	f.add(numbered(120, 200)...)
	f.finish()
	second := &Shipper{Store: st, Dir: dir, ChunkBytes: 100, FlushEvery: time.Hour}
	if err := second.Run(context.Background(), f.src, f.ended); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, st); !slices.Equal(got, numbered(0, 200)) {
		t.Fatalf("resumed log: %d lines, want 200 in order without repeats", len(got))
	}
}

// With a cap, the stored log keeps its head and its tail around a marker.
func TestShipCapKeepsHeadMarkerTail(t *testing.T) {
	st := openStore(t)
	f := &fakeLog{}
	f.add(numbered(0, 1000)...) // 11 bytes a line with its newline
	f.finish()
	sh := &Shipper{Store: st, Dir: dir, MaxBytes: 2200, ChunkBytes: 300}
	if err := sh.Run(context.Background(), f.src, f.ended); err != nil {
		t.Fatal(err)
	}
	got := stored(t, st)
	if len(got) != 201 {
		t.Fatalf("%d lines stored, want 100 head + marker + 100 tail", len(got))
	}
	if !slices.Equal(got[:100], numbered(0, 100)) || !slices.Equal(got[101:], numbered(900, 1000)) {
		t.Fatalf("head or tail wrong: %q ... %q", got[:2], got[len(got)-2:])
	}
	if !strings.HasPrefix(got[100], "log truncated: 8800 bytes dropped") {
		t.Fatalf("marker: %q", got[100])
	}
}

// Serve picks one source: the live one while the attempt runs, storage
// when it ended, and each other's fallback.
func TestServePicksTheSource(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	line := func(m string) []*dataplane.LogLine { return []*dataplane.LogLine{{Message: m + "\n"}} }
	live := func(m string) func(func([]*dataplane.LogLine) error) error {
		return func(emit func([]*dataplane.LogLine) error) error { return emit(line(m)) }
	}
	gone := func(func([]*dataplane.LogLine) error) error { return errs.NotFoundf("no such Pod") }
	serve := func(running bool, src func(func([]*dataplane.LogLine) error) error) (string, error) {
		var b strings.Builder
		// A running attempt ends at the follower's second look.
		looks := 0
		isRunning := func(context.Context) bool { looks++; return running && looks < 3 }
		err := Serve(ctx, st, dir, isRunning, src, func(ls []*dataplane.LogLine) error {
			for _, l := range ls {
				b.WriteString(l.GetMessage())
			}
			return nil
		})
		return b.String(), err
	}
	check := func(what string, running bool, src func(func([]*dataplane.LogLine) error) error, want string, wantErr error) {
		t.Helper()
		got, err := serve(running, src)
		if (wantErr == nil && err != nil) || (wantErr != nil && !errors.Is(err, wantErr)) || got != want {
			t.Errorf("%s: %q, %v; want %q, %v", what, got, err, want, wantErr)
		}
	}
	check("nothing anywhere", false, gone, "", errs.ErrNotFound)
	check("running, live", true, live("live"), "live\n", nil)
	check("ended, nothing stored yet", false, live("live"), "live\n", nil)

	if err := st.Put(ctx, PartKey(dir, 1), encode(nil, line("part1")), nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, PartKey(dir, 2), encode(nil, line("part2")), nil); err != nil {
		t.Fatal(err)
	}
	check("running elsewhere", true, gone, "part1\npart2\n", nil)
	t.Run("followed elsewhere", func(t *testing.T) {
		FollowPoll = time.Millisecond
		defer func() { FollowPoll = time.Second }()
		var (
			mu    sync.Mutex
			got   strings.Builder
			ended bool
		)
		done := make(chan error, 1)
		go func() {
			done <- Serve(ctx, st, dir, func(context.Context) bool { mu.Lock(); defer mu.Unlock(); return !ended }, gone, func(ls []*dataplane.LogLine) error {
				mu.Lock()
				defer mu.Unlock()
				for _, l := range ls {
					got.WriteString(l.GetMessage())
				}
				return nil
			})
		}()
		text := func() string { mu.Lock(); defer mu.Unlock(); return got.String() }
		testkit.Eventually(t, "the stored parts", 10*time.Second, func() bool { return text() == "part1\npart2\n" })
		if err := st.Put(ctx, PartKey(dir, 3), encode(nil, line("part3")), nil); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "a part written while followed", 10*time.Second, func() bool { return text() == "part1\npart2\npart3\n" })
		// It ends: the final object replaces the parts, and only what the
		// follower has not seen is sent.
		var all []byte
		for _, m := range []string{"part1", "part2", "part3", "last"} {
			all = encode(all, line(m))
		}
		if err := st.Put(ctx, FinalKey(dir), all, nil); err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 3; n++ {
			if err := st.Delete(ctx, PartKey(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		ended = true
		mu.Unlock()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := text(); got != "part1\npart2\npart3\nlast\n" {
			t.Fatalf("followed log %q", got)
		}
		if err := st.Delete(ctx, FinalKey(dir)); err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 2; n++ {
			if err := st.Put(ctx, PartKey(dir, n), encode(nil, line(fmt.Sprintf("part%d", n))), nil); err != nil {
				t.Fatal(err)
			}
		}
	})
	check("ended, cut short, source gone", false, gone, "part1\npart2\n", nil)
	check("ended, cut short, source here", false, live("whole"), "whole\n", nil)

	if err := st.Put(ctx, FinalKey(dir), encode(nil, line("final")), nil); err != nil {
		t.Fatal(err)
	}
	check("ended", false, live("live"), "final\n", nil)
	check("ended, source gone", false, gone, "final\n", nil)
	if err := Serve(ctx, nil, dir, func(context.Context) bool { return false }, gone, func([]*dataplane.LogLine) error { return nil }); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("no storage, no source: %v", err)
	}
}

// A source that has nothing yet (a Pod waiting for its image) is read
// again less and less often (1, 2, 4, 8, 8 s), not every second; once
// lines come, after a second again; all its lines are stored.
func TestNothingYetIsAskedLessOften(t *testing.T) {
	st := openStore(t)
	f := &fakeLog{}
	var mu sync.Mutex
	reads := 0
	src := func(ctx context.Context, emit func([]*dataplane.LogLine) error) error {
		mu.Lock()
		reads++
		n := reads
		mu.Unlock()
		switch {
		case n <= 5:
			return errors.New("container is waiting to start")
		case n == 6:
			return emit([]*dataplane.LogLine{{Message: "started at last\n"}})
		}
		return f.src(ctx, emit)
	}
	var waits []time.Duration
	sh := &Shipper{Store: st, Dir: dir, FlushEvery: time.Hour}
	sh.waitFor = func(d time.Duration) <-chan time.Time {
		mu.Lock()
		waits = append(waits, d)
		if len(waits) == 6 {
			f.finish()
		}
		mu.Unlock()
		c := make(chan time.Time, 1)
		c <- time.Now()
		return c
	}
	if err := sh.Run(context.Background(), src, f.ended); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, time.Second}
	if !slices.Equal(waits, want) {
		t.Errorf("waits between reads %v, want %v", waits, want)
	}
	if got := stored(t, st); !slices.Equal(got, []string{"started at last"}) {
		t.Fatalf("stored %q", got)
	}
}
