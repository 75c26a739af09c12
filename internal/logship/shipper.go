package logship

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
)

// Defaults of a Shipper's tunables.
const (
	DefaultChunkBytes = 256 << 10
	DefaultFlushEvery = 5 * time.Second
	// retryEvery is how soon a source that returned (its Pod's container
	// had not started, or the stream broke) is read again while the
	// attempt has not ended; the wait doubles, up to maxRetryEvery, while
	// reads bring nothing new (a Pod that waits for its image asks nothing
	// of the database and the API server every second).
	retryEvery    = time.Second
	maxRetryEvery = 8 * time.Second
)

// Metrics count what shippers did; an executor makes them under its own
// names and registers them.
type Metrics struct {
	Bytes    prometheus.Counter // message bytes stored
	Failures prometheus.Counter // chunk or final writes that failed
}

func (m *Metrics) shipped(n int64) {
	if m != nil && m.Bytes != nil {
		m.Bytes.Add(float64(n))
	}
}

func (m *Metrics) failed() {
	if m != nil && m.Failures != nil {
		m.Failures.Inc()
	}
}

// Source reads an attempt's log from its beginning, passing its lines to
// emit in order, following it while it grows; it returns when the log ends
// (or cannot be read now). The shipper calls it again until the attempt
// has ended, skipping the lines it already has.
type Source func(ctx context.Context, emit func([]*dataplane.LogLine) error) error

// Shipper ships one attempt's log to Dir in Store.
type Shipper struct {
	Store *blob.Store
	Dir   string // runlayout.AttemptLogDir, as a key
	// ChunkBytes and FlushEvery: a chunk is written when it holds
	// ChunkBytes of messages, or FlushEvery after its first line.
	ChunkBytes int64
	FlushEvery time.Duration
	// MaxBytes caps the stored log (0: the source is capped already): it
	// keeps the first half of the cap, then a marker saying how much was
	// dropped, then the last lines within the other half.
	MaxBytes int64
	Metrics  *Metrics
	Log      *slog.Logger

	mu        sync.Mutex
	pending   []*dataplane.LogLine // the chunk being filled
	pendSize  int64
	pendSince time.Time
	next      int   // the next part's number
	taken     int   // lines taken from the source (stored, pending or dropped)
	headSize  int64 // bytes in parts and pending
	tail      []*dataplane.LogLine
	tailSize  int64
	dropped   int64
	// waitFor, when set, replaces time.After between reads of the source
	// (the tests see the waits asked for).
	waitFor func(time.Duration) <-chan time.Time
}

func (s *Shipper) after(d time.Duration) <-chan time.Time {
	if s.waitFor != nil {
		return s.waitFor(d)
	}
	return time.After(d)
}

func (s *Shipper) chunkBytes() int64 {
	if s.ChunkBytes > 0 {
		return s.ChunkBytes
	}
	return DefaultChunkBytes
}

func (s *Shipper) flushEvery() time.Duration {
	if s.FlushEvery > 0 {
		return s.FlushEvery
	}
	return DefaultFlushEvery
}

func (s *Shipper) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// Run ships the log of src until ended reports that the attempt ended (it
// is asked each time src returns): then src is read once more for the last
// lines, the final object written and the parts removed. When ctx ends
// first (the manager stops) what is pending is written as a part and Run
// returns ctx.Err(); the next shipper of the attempt goes on from there.
func (s *Shipper) Run(ctx context.Context, src Source, ended func(context.Context) bool) error {
	// Numbering parts from what is stored: a shipper that could not read
	// it would write over them, so it waits until it can.
	var (
		lines, next int
		size        int64
	)
	for {
		var err error
		if lines, size, next, err = countStored(ctx, s.Store, s.Dir); err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.Metrics.failed()
		s.log().Warn("log shipping: reading what is stored", "dir", s.Dir, "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.flushEvery()):
		}
	}
	s.mu.Lock()
	s.taken, s.headSize, s.next = lines, size, next
	s.mu.Unlock()

	tick := time.NewTicker(s.flushEvery() / 2)
	defer tick.Stop()
	stopTicks := make(chan struct{})
	ticksDone := make(chan struct{})
	go func() {
		defer close(ticksDone)
		for {
			select {
			case <-stopTicks:
				return
			case <-tick.C:
				s.flush(ctx, false)
			}
		}
	}()
	defer func() { close(stopTicks); <-ticksDone }()

	wait := retryEvery / 2 // doubled after a first read that brings nothing
	for {
		s.mu.Lock()
		before := s.taken
		s.mu.Unlock()
		err := s.follow(ctx, src)
		if ctx.Err() != nil {
			s.flushDetached(ctx)
			return ctx.Err()
		}
		s.mu.Lock()
		if s.taken == before {
			wait = min(2*wait, maxRetryEvery)
		} else {
			wait = retryEvery
		}
		s.mu.Unlock()
		if err != nil && !errors.Is(err, errs.ErrNotFound) {
			s.log().Debug("log shipping: the source ended early", "dir", s.Dir, "error", err)
		}
		if ended(ctx) {
			break
		}
		select {
		case <-ctx.Done():
			s.flushDetached(ctx)
			return ctx.Err()
		case <-s.after(wait):
		}
	}
	// Lines added as the attempt was recorded.
	if err := s.follow(ctx, src); err != nil && !errors.Is(err, errs.ErrNotFound) && ctx.Err() == nil {
		s.log().Debug("log shipping: the last read of the source", "dir", s.Dir, "error", err)
	}
	// The final object, tried again while storage fails; what cannot be
	// stored whole is left as parts.
	var err error
	for try := 0; try < finishTries && ctx.Err() == nil; try++ {
		if err = s.finish(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(1<<try) * retryEvery):
		}
	}
	s.flushDetached(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// finishTries bounds the attempts at writing the final object.
const finishTries = 5

// follow reads src from its beginning, skipping the lines already taken.
func (s *Shipper) follow(ctx context.Context, src Source) error {
	s.mu.Lock()
	skip := s.taken
	s.mu.Unlock()
	seen := 0 // lines of this read so far
	return src(ctx, func(lines []*dataplane.LogLine) error {
		from := min(max(skip-seen, 0), len(lines))
		seen += len(lines)
		if from < len(lines) && s.take(lines[from:]) {
			s.flush(ctx, true)
		}
		return nil
	})
}

// take adds lines to the pending chunk, or past the head to the tail; it
// reports that the chunk is full.
func (s *Shipper) take(lines []*dataplane.LogLine) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range lines {
		s.taken++
		n := lineSize(l)
		if s.MaxBytes <= 0 || (s.tail == nil && s.headSize+n <= s.MaxBytes/2) {
			if len(s.pending) == 0 {
				s.pendSince = time.Now()
			}
			s.pending = append(s.pending, l)
			s.pendSize += n
			s.headSize += n
			continue
		}
		s.tail = append(s.tail, l)
		s.tailSize += n
		for len(s.tail) > 1 && s.tailSize > s.MaxBytes/2 {
			d := lineSize(s.tail[0])
			s.tail[0] = nil
			s.tail = s.tail[1:]
			s.tailSize -= d
			s.dropped += d
		}
	}
	return s.pendSize >= s.chunkBytes()
}

// flush writes the pending lines as parts of at most ChunkBytes each: all
// of them with force or when the oldest waited FlushEvery, else the full
// chunks. A failed write keeps the lines for the next try.
func (s *Shipper) flush(ctx context.Context, force bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := time.Since(s.pendSince) >= s.flushEvery()
	for len(s.pending) > 0 && (force || old || s.pendSize >= s.chunkBytes()) {
		k, size := 0, int64(0)
		for k < len(s.pending) && (k == 0 || size+lineSize(s.pending[k]) <= s.chunkBytes()) {
			size += lineSize(s.pending[k])
			k++
		}
		key := PartKey(s.Dir, s.next)
		if err := s.Store.Put(ctx, key, encode(nil, s.pending[:k]), &blob.WriteOptions{ContentType: "application/octet-stream"}); err != nil {
			if ctx.Err() == nil {
				s.Metrics.failed()
				s.log().Warn("log shipping: writing a chunk", "key", key, "error", err)
			}
			return
		}
		s.Metrics.shipped(size)
		s.next++
		s.pending = slices.Delete(s.pending, 0, k)
		s.pendSize -= size
	}
}

// flushDetached writes what is pending after ctx ended (the manager stops).
func (s *Shipper) flushDetached(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s.flush(ctx, true)
}

// finish writes the final object, the parts then what is pending and the
// capped tail, and removes the parts.
func (s *Shipper) finish(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys, err := parts(ctx, s.Store, s.Dir)
	if err != nil {
		s.Metrics.failed()
		return fmt.Errorf("log shipping: listing the chunks of %s: %w", s.Dir, err)
	}
	rest := encode(nil, s.pending)
	restSize := s.pendSize
	if s.tail != nil {
		if s.dropped > 0 {
			marker := &dataplane.LogLine{
				Message: fmt.Sprintf("log truncated: %d bytes dropped here (the stored log keeps its first %d and its last %d bytes)\n",
					s.dropped, s.headSize, s.tailSize),
				Originator: dataplane.LogLineOriginator_SYSTEM,
				Timestamp:  timestamppb.Now(),
			}
			rest = encode(rest, []*dataplane.LogLine{marker})
		}
		rest = encode(rest, s.tail)
		restSize += s.tailSize
	}
	w, err := s.Store.NewWriter(ctx, FinalKey(s.Dir), &blob.WriteOptions{ContentType: "application/octet-stream"})
	if err != nil {
		s.Metrics.failed()
		return err
	}
	if err := joinParts(ctx, s.Store, keys, w, rest); err != nil {
		w.Abort()
		s.Metrics.failed()
		return fmt.Errorf("log shipping: writing the log of %s: %w", s.Dir, err)
	}
	if err := w.Close(); err != nil {
		s.Metrics.failed()
		return fmt.Errorf("log shipping: writing the log of %s: %w", s.Dir, err)
	}
	s.Metrics.shipped(restSize)
	s.pending, s.pendSize, s.tail, s.tailSize = nil, 0, nil, 0
	// The final object holds everything: the parts only cost space now.
	for _, k := range keys {
		if err := s.Store.Delete(ctx, k); err != nil && !errors.Is(err, errs.ErrNotFound) {
			s.log().Warn("log shipping: removing a chunk", "key", k, "error", err)
		}
	}
	return nil
}
