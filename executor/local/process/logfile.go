package process

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/config"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The attempt log is a text file with one record per line:
//
//	2026-03-04T05:06:07.123456789Z stdout the line as the task printed it
//
// a fixed-width UTC timestamp (when the manager read the line), the stream
// (stdout, stderr, or system for lines the manager adds: start, timeout,
// abort, exit), and the message: valid UTF-8 without its newline. A line
// longer than maxLine is split into several records.
//
// The log is capped (Config.MaxLogBytes): the first half of the cap is kept
// as it is written (the head), and past it records go to a rolling tail of
// two segment files beside the log, each a quarter of the cap, the older
// one overwritten when the newer fills. When the attempt ends a system
// record saying how many bytes were dropped, then the tail (between a
// quarter and a half of the cap), are appended to the log; a system record
// where the head ends tells a follower why the log pauses. So the log holds
// how the task began and how it ended, never more than the cap plus the
// marker, and a follower sees the head live and the tail at the end.

// Stream is where a log line came from.
type Stream uint8

// Streams.
const (
	Stdout Stream = iota + 1
	Stderr
	System
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	case System:
		return "system"
	}
	return "unknown"
}

func parseStream(s string) Stream {
	switch s {
	case "stdout":
		return Stdout
	case "stderr":
		return Stderr
	case "system":
		return System
	}
	return 0
}

const (
	timeLayout = "2006-01-02T15:04:05.000000000Z"
	maxLine    = 64 << 10
)

// Line is one record of an attempt log.
type Line struct {
	Time    time.Time
	Stream  Stream
	Message string
}

// Originator maps the stream to the API's originator: the task's own output
// is USER, the manager's annotations SYSTEM.
func (l Line) Originator() dataplane.LogLineOriginator {
	switch l.Stream {
	case Stdout, Stderr:
		return dataplane.LogLineOriginator_USER
	case System:
		return dataplane.LogLineOriginator_SYSTEM
	}
	return dataplane.LogLineOriginator_UNKNOWN
}

// Proto is the line as a TailLogs LogLine.
// The message keeps its line end: the SDK's log viewers print messages as
// they come and rely on each carrying its own newline.
func (l Line) Proto() *dataplane.LogLine {
	ll := &dataplane.LogLine{Message: l.Message + "\n", Originator: l.Originator()}
	if !l.Time.IsZero() {
		ll.Timestamp = timestamppb.New(l.Time)
	}
	return ll
}

func formatLine(buf []byte, t time.Time, s Stream, msg []byte) []byte {
	buf = t.UTC().AppendFormat(buf, timeLayout)
	buf = append(buf, ' ')
	buf = append(buf, s.String()...)
	buf = append(buf, ' ')
	buf = append(buf, bytes.ToValidUTF8(msg, []byte("\uFFFD"))...)
	return append(buf, '\n')
}

// ParseLine reads one record (without its newline). A record that does not
// follow the format is returned whole as the message, with no time or stream.
func ParseLine(s string) Line {
	ts, rest, ok := strings.Cut(s, " ")
	if !ok {
		return Line{Message: s}
	}
	t, err := time.Parse(timeLayout, ts)
	if err != nil {
		return Line{Message: s}
	}
	stream, msg, _ := strings.Cut(rest, " ")
	st := parseStream(stream)
	if st == 0 {
		return Line{Message: s}
	}
	return Line{Time: t, Stream: st, Message: msg}
}

// logWriter serialises records from both pipes and the manager into the
// file, within its cap (see the top of this file).
type logWriter struct {
	mu      sync.Mutex
	f       *os.File
	buf     []byte
	err     error
	head    int64 // bytes the log may hold before records go to the tail
	size    int64 // bytes in the log
	seg     [2]*os.File
	segLen  [2]int64
	cur     int   // the segment being written
	dropped int64 // bytes of overwritten segments
}

func newLogWriter(f *os.File, maxBytes int64) *logWriter {
	w := &logWriter{f: f, head: max(maxBytes, config.MinMaxLogBytes) / 2}
	if fi, err := f.Stat(); err == nil {
		w.size = fi.Size()
	}
	return w
}

func (w *logWriter) write(s Stream, msg []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil || w.err != nil {
		return
	}
	w.buf = formatLine(w.buf[:0], time.Now(), s, msg)
	if w.seg[0] == nil && w.size+int64(len(w.buf)) <= w.head {
		_, w.err = w.f.Write(w.buf)
		w.size += int64(len(w.buf))
		return
	}
	if w.seg[0] == nil {
		// Followers see the log stop here: say why.
		notice := formatLine(nil, time.Now(), System, fmt.Appendf(nil,
			"the log reached half its cap of %d bytes (executor.local.maxLogBytes): from here only its tail is kept, added when the attempt ends", 2*w.head))
		if _, w.err = w.f.Write(notice); w.err != nil {
			return
		}
		w.size += int64(len(notice))
	}
	w.err = w.writeTail(w.buf)
}

// writeTail appends a record to the rolling tail.
func (w *logWriter) writeTail(rec []byte) error {
	segMax := w.head / 2
	if w.seg[w.cur] != nil && w.segLen[w.cur] > 0 && w.segLen[w.cur]+int64(len(rec)) > segMax {
		w.cur ^= 1
		w.dropped += w.segLen[w.cur]
		w.segLen[w.cur] = 0
		if w.seg[w.cur] != nil {
			if err := w.seg[w.cur].Truncate(0); err != nil {
				return err
			}
			if _, err := w.seg[w.cur].Seek(0, io.SeekStart); err != nil {
				return err
			}
		}
	}
	if w.seg[w.cur] == nil {
		f, err := os.OpenFile(w.segPath(w.cur), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o640)
		if err != nil {
			return err
		}
		w.seg[w.cur] = f
	}
	n, err := w.seg[w.cur].Write(rec)
	w.segLen[w.cur] += int64(n)
	return err
}

func (w *logWriter) segPath(i int) string { return fmt.Sprintf("%s.tail%d", w.f.Name(), i) }

// flushTail appends the truncation marker and the tail, older segment
// first, to the log, and removes the segments.
func (w *logWriter) flushTail() error {
	if w.seg[0] == nil {
		return nil
	}
	var err error
	if w.dropped > 0 {
		marker := formatLine(nil, time.Now(), System, fmt.Appendf(nil,
			"log truncated: %d bytes dropped here (the log keeps its first %d and its last %d bytes; executor.local.maxLogBytes)",
			w.dropped, w.size, w.segLen[0]+w.segLen[1]))
		_, err = w.f.Write(marker)
	}
	for _, i := range []int{w.cur ^ 1, w.cur} {
		f := w.seg[i]
		if f == nil {
			continue
		}
		if err == nil {
			if _, err = f.Seek(0, io.SeekStart); err == nil {
				_, err = io.Copy(w.f, io.LimitReader(f, w.segLen[i]))
			}
		}
		f.Close()
		os.Remove(f.Name())
		w.seg[i] = nil
	}
	return err
}

func (w *logWriter) system(format string, args ...any) {
	w.write(System, []byte(fmt.Sprintf(format, args...)))
}

func (w *logWriter) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return w.err
	}
	err := errors.Join(w.err, w.flushTail(), w.f.Close())
	w.f = nil
	return err
}

// tail keeps the last n lines of a stream.
type tail struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func (t *tail) add(line []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, string(bytes.ToValidUTF8(line, nil)))
	if len(t.lines) > t.n {
		t.lines = append(t.lines[:0], t.lines[len(t.lines)-t.n:]...)
	}
}

func (t *tail) get() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines...)
}

// pump copies one pipe into the log line by line until EOF or close.
func pump(r io.Reader, s Stream, w *logWriter, t *tail) {
	br := bufio.NewReaderSize(r, maxLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			line = bytes.TrimSuffix(line, []byte("\n"))
			w.write(s, line)
			if t != nil {
				t.add(line)
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// ReadLog reads a whole attempt log into memory; for tests and small logs
// (TailLogs streams with FollowLog).
func ReadLog(path string) ([]Line, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines, rest := splitLines(b)
	if len(rest) > 0 {
		lines = append(lines, ParseLine(string(rest)))
	}
	return lines, nil
}

// splitLines parses the complete records in b and returns the unterminated
// remainder.
func splitLines(b []byte) ([]Line, []byte) {
	var out []Line
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return out, b
		}
		out = append(out, ParseLine(string(b[:i])))
		b = b[i+1:]
	}
}

// FollowPoll is how often FollowLog looks for new lines.
var FollowPoll = 100 * time.Millisecond

// FollowLog streams an attempt log: everything already in it, then new lines
// as they are written, in batches passed to emit, reading a bounded chunk
// at a time. done reports that the
// attempt ended (its log is complete); FollowLog then delivers the rest and
// returns nil. A log that does not exist yet is waited for. It returns
// ctx.Err() when ctx ends first, and emit's error if emit fails.
func FollowLog(ctx context.Context, path string, done func() bool, emit func([]Line) error) error {
	var (
		f       *os.File
		partial []byte
		buf     = make([]byte, 256<<10)
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		finished := done()
		if f == nil {
			var err error
			f, err = os.Open(path)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		// One chunk at a time, each emitted before the next is read, so
		// a log of any size costs a chunk and one partial record.
		for f != nil {
			n, err := f.Read(buf)
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			atEOF := n == 0
			partial = append(partial, buf[:n]...)
			lines, rest := splitLines(partial)
			partial = append(partial[:0], rest...)
			if atEOF && finished && len(partial) > 0 {
				lines = append(lines, ParseLine(string(partial)))
				partial = partial[:0]
			}
			if len(lines) > 0 {
				if err := emit(lines); err != nil {
					return err
				}
			}
			if atEOF {
				break
			}
		}
		if finished {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(FollowPoll):
		}
	}
}

// AppendSystemLine adds a manager's annotation to an attempt's log after its
// process ended (e.g. a warning about how its result was recorded).
func AppendSystemLine(path, msg string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(formatLine(nil, time.Now(), System, []byte(msg)))
	return errors.Join(err, f.Close())
}
