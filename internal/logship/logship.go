// Package logship keeps attempts' logs in blob storage, so that a log
// outlives the attempt's working directory, its Pod and the replica that ran
// it.
//
// An attempt's log lives under one directory (runlayout.AttemptLogDir, a
// storage key under the run's base):
//
//	<dir>/part-00000001.pb ...   chunks written while the attempt runs
//	<dir>/log.pb                 the whole log, written when it ended
//
// Every object is a sequence of size-delimited dataplane.LogLine messages
// (protodelim), so the final object is the parts back to back and any set
// of parts, read in order, is a prefix of the log. A Shipper writes them
// (one per running attempt, on the executor that runs it); Serve reads them
// and picks between them and the executor's live source.
//
// Object stores have no append: each chunk is an object of its own. A
// chunk is written when it reaches ChunkBytes or FlushEvery after its first
// line, so a manager that dies loses at most the chunk it was filling; the
// next shipper of the attempt (after a restart, on the new executor lease
// holder) counts the lines already stored and goes on after them.
package logship

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
)

// Object names inside an attempt's log directory.
const (
	finalName  = "log.pb"
	partPrefix = "part-"
	partSuffix = ".pb"
)

// FinalKey is the key of the whole log of the attempt whose log directory is dir.
func FinalKey(dir string) string { return path.Join(dir, finalName) }

// PartKey is the key of chunk n (from 1) of the log in dir. The number is
// zero-padded so that listing the directory yields the parts in order.
func PartKey(dir string, n int) string {
	return path.Join(dir, fmt.Sprintf("%s%08d%s", partPrefix, n, partSuffix))
}

// partNumber parses a part's key; ok is false for anything else.
func partNumber(key string) (int, bool) {
	name := path.Base(key)
	digits, ok := strings.CutPrefix(name, partPrefix)
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, partSuffix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil && n > 0
}

// encode appends the size-delimited encoding of lines to buf.
func encode(buf []byte, lines []*dataplane.LogLine) []byte {
	for _, l := range lines {
		b, err := proto.Marshal(l)
		if err != nil {
			continue // a LogLine always marshals
		}
		buf = protowire.AppendVarint(buf, uint64(len(b)))
		buf = append(buf, b...)
	}
	return buf
}

// lineSize is what a line costs in the stored log (for the cap and the
// chunk size): its message.
func lineSize(l *dataplane.LogLine) int64 { return int64(len(l.GetMessage())) }

// Batch bounds of what decode passes to emit at once (one TailLogs message).
const (
	batchLines = 500
	batchBytes = 1 << 20
)

// decode reads a stored object and emits its lines in bounded batches.
func decode(r io.Reader, emit func([]*dataplane.LogLine) error) (int, error) {
	br := bufio.NewReader(r)
	var (
		batch []*dataplane.LogLine
		size  int64
		n     int
	)
	for {
		l := &dataplane.LogLine{}
		err := protodelim.UnmarshalFrom(br, l)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("a stored log is corrupt: %w", err)
		}
		n++
		batch = append(batch, l)
		size += lineSize(l)
		if len(batch) >= batchLines || size >= batchBytes {
			if err := emit(batch); err != nil {
				return n, err
			}
			batch, size = nil, 0
		}
	}
	if len(batch) > 0 {
		return n, emit(batch)
	}
	return n, nil
}

// parts lists the chunk keys in dir, in order.
func parts(ctx context.Context, st *blob.Store, dir string) ([]string, error) {
	var err error
	for try := 0; try < 3; try++ {
		var out []string
		if out, err = listParts(ctx, st, dir); !errors.Is(err, errs.ErrNotFound) {
			return out, err
		}
		// A directory store lists a file that a writer renamed meanwhile
		// (a part being written) as not found: list again.
	}
	return nil, err
}

func listParts(ctx context.Context, st *blob.Store, dir string) ([]string, error) {
	var out []string
	for o, err := range st.List(ctx, dir+"/"+partPrefix) {
		if err != nil {
			return nil, err
		}
		if _, ok := partNumber(o.Key); ok {
			out = append(out, o.Key)
		}
	}
	return out, nil
}

// readObject decodes one object; a missing object is ErrNotFound.
func readObject(ctx context.Context, st *blob.Store, key string, emit func([]*dataplane.LogLine) error) (int, error) {
	r, err := st.NewReader(ctx, key)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return decode(r, emit)
}

// ReadStored emits the stored log in dir: the final object when there is
// one, else the parts in order (a log whose shipper was cut short). It
// returns errs.ErrNotFound when nothing of the log is stored.
func ReadStored(ctx context.Context, st *blob.Store, dir string, emit func([]*dataplane.LogLine) error) error {
	_, err := readObject(ctx, st, FinalKey(dir), emit)
	if !errors.Is(err, errs.ErrNotFound) {
		return err
	}
	keys, err := parts(ctx, st, dir)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return errs.NotFoundf("no stored log")
	}
	for _, k := range keys {
		if _, err := readObject(ctx, st, k, emit); err != nil && !errors.Is(err, errs.ErrNotFound) {
			return err
		}
	}
	return nil
}

// Serve sends an attempt's log, from the one place that has it:
//   - a running attempt (running reports true): its live source,
//     followed; where the source does not have it (errs.ErrNotFound:
//     another replica runs it, or its process has not started), the
//     stored parts, followed as they come until the attempt ended, then
//     the rest from the final object;
//   - an ended one: the stored log; where nothing is stored yet (its
//     shipper is still writing the final object, or the attempt predates
//     shipping), the live source, and then the stored parts.
//
// st may be nil (a run whose base lies outside storage): only the live
// source then. live's errs.ErrNotFound is what Serve returns when no
// source has the log.
func Serve(ctx context.Context, st *blob.Store, dir string, running func(context.Context) bool, live func(emit func([]*dataplane.LogLine) error) error, emit func([]*dataplane.LogLine) error) error {
	stored := func() error {
		if st == nil {
			return errs.NotFoundf("no stored log")
		}
		return ReadStored(ctx, st, dir, emit)
	}
	if running(ctx) {
		err := live(emit)
		if !errors.Is(err, errs.ErrNotFound) || st == nil {
			return err
		}
		if ferr := followStored(ctx, st, dir, running, emit); !errors.Is(ferr, errs.ErrNotFound) {
			return ferr
		}
		return err
	}
	if st != nil {
		_, err := readObject(ctx, st, FinalKey(dir), emit)
		if !errors.Is(err, errs.ErrNotFound) {
			return err
		}
	}
	// Nothing of the live source was emitted when it is not found, so the
	// parts can follow without repeating a line.
	err := live(emit)
	if !errors.Is(err, errs.ErrNotFound) {
		return err
	}
	if serr := stored(); !errors.Is(serr, errs.ErrNotFound) {
		return serr
	}
	return err
}

// FollowPoll is how often a follower of stored parts looks for new ones.
var FollowPoll = time.Second

// followStored sends the parts in dir as they are written while running
// reports true, then what the final object holds beyond them (or the
// parts written meanwhile, when there is none). errs.ErrNotFound: nothing
// is stored yet.
func followStored(ctx context.Context, st *blob.Store, dir string, running func(context.Context) bool, emit func([]*dataplane.LogLine) error) error {
	sent, next, first := 0, 1, true
	sendParts := func() error {
		keys, err := parts(ctx, st, dir)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if p, _ := partNumber(k); p < next {
				continue
			}
			n, err := readObject(ctx, st, k, emit)
			if errors.Is(err, errs.ErrNotFound) {
				return nil // replaced by the final object meanwhile
			}
			if err != nil {
				return err
			}
			sent += n
			next, _ = partNumber(k)
			next++
		}
		return nil
	}
	for {
		ended := !running(ctx)
		if ended || !first {
			// The final object holds every part: skip what was sent.
			seen := 0
			_, err := readObject(ctx, st, FinalKey(dir), func(lines []*dataplane.LogLine) error {
				from := min(max(sent-seen, 0), len(lines))
				seen += len(lines)
				if from == len(lines) {
					return nil
				}
				return emit(lines[from:])
			})
			if !errors.Is(err, errs.ErrNotFound) {
				return err
			}
		}
		if err := sendParts(); err != nil {
			return err
		}
		if first && next == 1 {
			return errs.NotFoundf("no stored log")
		}
		first = false
		if ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(FollowPoll):
		}
	}
}

// countStored counts the lines and bytes (as lineSize counts them) already
// in dir's parts, and returns the next part's number.
func countStored(ctx context.Context, st *blob.Store, dir string) (lines int, size int64, next int, err error) {
	keys, err := parts(ctx, st, dir)
	if err != nil {
		return 0, 0, 1, err
	}
	next = 1
	for _, k := range keys {
		n, err := readObject(ctx, st, k, func(ls []*dataplane.LogLine) error {
			for _, l := range ls {
				size += lineSize(l)
			}
			return nil
		})
		if err != nil {
			return 0, 0, 1, err
		}
		lines += n
		if p, _ := partNumber(k); p >= next {
			next = p + 1
		}
	}
	return lines, size, next, nil
}

// joinParts writes the parts, then tail, to w.
func joinParts(ctx context.Context, st *blob.Store, keys []string, w io.Writer, tail []byte) error {
	for _, k := range keys {
		r, err := st.NewReader(ctx, k)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, r)
		r.Close()
		if err != nil {
			return err
		}
	}
	_, err := io.Copy(w, bytes.NewReader(tail))
	return err
}
