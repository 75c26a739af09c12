package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

// Group commit. Every action write (Update, CreateRun, CreateChild,
// RequestAbort, RecordEvents, InTx) is a job for the pool's committer:
// concurrent jobs share one transaction, so a burst of writers costs one
// BEGIN/COMMIT (one WAL write and sync on SQLite, one on PostgreSQL) and
// one lock of the resource version row instead of one each.
//
//   - A caller returns once its write committed, or with its own error, or
//     with the batch's error when the batch did not commit: never success
//     for something that did not commit.
//   - In a batch of several, a job that fails is rolled back alone and the
//     others still commit. A job that can be run again from scratch (a
//     replay job: the store's own action writes, which touch nothing outside
//     the transaction and set their results anew each time) runs without a
//     savepoint; when one fails, the batch is rolled back and its other jobs
//     run again, each in a savepoint. A batch with any other job (InTx)
//     takes a savepoint for every job. A savepoint is a round trip on
//     PostgreSQL, and failures are rare: most batches save one per job.
//   - The batch takes the resource version row first (UPDATE, which locks it
//     until COMMIT on PostgreSQL; SQLite's BEGIN IMMEDIATE already holds
//     the database), hands versions out in memory and writes the last one
//     back before COMMIT. Batches, of this committer, of another one or of
//     another manager on the same PostgreSQL, serialize on that row as
//     single writes did, so versions still commit in the order they are
//     handed out; versions of a job rolled back are handed out again.
//   - A writer that finds the committer idle commits at once (there is no
//     timer anywhere); writers that arrive meanwhile form the next batch.
//   - A job whose caller gave up (ctx done) before its turn writes nothing.
//   - A write made inside InTx is part of that job: it nests as a savepoint,
//     as before.
//   - On PostgreSQL, a batch without savepoints sends the statements of its
//     piped jobs (writes that read nothing first) as one pipeline with its
//     COMMIT (pipeline.go).

// maxBatch bounds the jobs of one transaction. On PostgreSQL each job's
// savepoint is a subtransaction, and a transaction with more than 64 of
// them makes every snapshot of every other session more expensive.
const maxBatch = 32

// writeTx is a batch's transaction as one job sees it.
type writeTx struct {
	tx *gorm.DB // bound to the batch's context; nil while rec is set
	b  *batch
	// rec is set while a piped job runs in a pipelined batch: the job's
	// statements are recorded, to go out with the others' at once.
	rec *recorder
}

// batch is the state a batch's jobs share.
type batch struct {
	reserved int64 // the value the batch's first statement left in resource_version
	last     int64 // the last version handed out
	// fences are lease tokens checkFence confirmed in this transaction:
	// the lease row stays locked until COMMIT, so they hold until then.
	fences     []int64
	savepoints int
	// broken is set when the transaction cannot be trusted any longer (a
	// savepoint could not be taken or rolled back to): nothing commits.
	broken error
}

// The batch's first and last statements on the resource version row.
const (
	reserveSQL = "UPDATE resource_version SET value = value + 1 WHERE id = 1 RETURNING value"
	settleSQL  = "UPDATE resource_version SET value = $1 WHERE id = 1"
)

// reserve takes the resource version row for the batch.
func (b *batch) reserve(tx *gorm.DB) error {
	var v int64
	err := tx.Raw(reserveSQL).Scan(&v).Error
	if err != nil {
		return fmt.Errorf("take resource version: %w", db.Translate(err))
	}
	if v == 0 {
		return fmt.Errorf("take resource version: counter row missing: %w", errs.ErrPrecondition)
	}
	b.reserved, b.last = v, v-1
	return nil
}

// settle writes the last version handed out back to the row (reserve left
// it one past the versions before the batch).
func (b *batch) settle(tx *gorm.DB) error {
	if b.last == b.reserved {
		return nil
	}
	if err := tx.Exec("UPDATE resource_version SET value = ? WHERE id = 1", b.last).Error; err != nil {
		return fmt.Errorf("record resource version %d: %w", b.last, db.Translate(err))
	}
	return nil
}

// changed reports whether the batch handed out a version, that is, appended
// to the change log.
func (b *batch) changed() bool { return b.last >= b.reserved }

// version hands out the next resource version.
func (w *writeTx) version() int64 {
	w.b.last++
	return w.b.last
}

// checkFence is checkFence once per transaction and token.
func (w *writeTx) checkFence(token int64) error {
	if slices.Contains(w.b.fences, token) {
		return nil
	}
	if w.rec != nil {
		if err := w.chain().expect(1, ErrFenced, fenceSQL, LocalExecutorLease, token); err != nil {
			return err
		}
	} else if err := checkFence(w.tx, token); err != nil {
		return err
	}
	w.b.fences = append(w.b.fences, token)
	return nil
}

// nest runs fn in a savepoint: when fn fails, what it wrote is rolled back,
// and so are the versions it took and the fences it checked (rolling back
// to a savepoint releases the locks taken after it on PostgreSQL).
func (w *writeTx) nest(fn func(*writeTx) error) error {
	if w.b.broken != nil {
		return w.b.broken
	}
	last, fences := w.b.last, len(w.b.fences)
	w.b.savepoints++
	name := fmt.Sprintf("fm_job%d", w.b.savepoints)
	if err := w.tx.Session(&gorm.Session{}).SavePoint(name).Error; err != nil {
		w.b.broken = fmt.Errorf("take savepoint: %w", db.Translate(err))
		return w.b.broken
	}
	err := run(w, fn)
	if err == nil {
		return nil
	}
	if rerr := w.tx.Session(&gorm.Session{}).RollbackTo(name).Error; rerr != nil {
		w.b.broken = fmt.Errorf("roll back to savepoint: %w", db.Translate(rerr))
		return err
	}
	w.b.last, w.b.fences = last, w.b.fences[:fences]
	return err
}

// panicked carries a job's panic back to its caller's goroutine.
type panicked struct{ value any }

func (p *panicked) Error() string { return fmt.Sprintf("store: write panicked: %v", p.value) }

// run calls fn, turning a panic into an error for the batch.
func run(w *writeTx, fn func(*writeTx) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicked{value: v}
		}
	}()
	return fn(w)
}

// writes is how a repository's action writes reach the database: through
// the pool's committer, nested in the job of a batch (repositories of
// InTx), or, for repositories over a transaction of the caller's own
// (New(tx)), nested in it as a batch of one.
type writes struct {
	c  *committer
	in *writeTx
	tx *gorm.DB
}

func (s writes) run(ctx context.Context, fn func(*writeTx) error) error {
	return s.write(ctx, fn, jobOnce)
}

// replay is run for a job that may be run again from scratch (see the
// group commit rules above): fn changes nothing outside the transaction
// and sets everything it returns anew on each run.
func (s writes) replay(ctx context.Context, fn func(*writeTx) error) error {
	return s.write(ctx, fn, jobReplay)
}

// pipe is replay for a job whose statements need no answer until the
// batch's end: fn writes only through w.chain() and w.checkFence, and reads
// nothing, so on PostgreSQL its statements can wait for the batch's
// pipeline (pipeline.go).
func (s writes) pipe(ctx context.Context, fn func(*writeTx) error) error {
	return s.write(ctx, fn, jobPiped)
}

func (s writes) write(ctx context.Context, fn func(*writeTx) error, kind jobKind) error {
	switch {
	case s.in != nil:
		if err := ctx.Err(); err != nil {
			return err
		}
		return s.in.nest(fn)
	case s.c != nil:
		return s.c.do(ctx, fn, kind)
	}
	return db.WithTx(ctx, s.tx, func(tx *gorm.DB) error {
		b := &batch{}
		if err := b.reserve(tx); err != nil {
			return err
		}
		w := &writeTx{tx: tx, b: b}
		if err := run(w, fn); err != nil {
			var p *panicked
			if errors.As(err, &p) {
				panic(p.value)
			}
			return err
		}
		return b.settle(tx)
	})
}

// committer batches the jobs of one pool.
type committer struct {
	db *gorm.DB
	// pipelined: batches without savepoints send their piped jobs'
	// statements as one pipeline (PostgreSQL; pipeline.go).
	pipelined bool

	mu      sync.Mutex
	queue   []*job
	running bool // a goroutine is committing batches

	hooksMu  sync.Mutex
	onCommit []func() // see Actions.OnCommit
}

// committed tells every OnCommit hook that a transaction with changes to
// actions committed.
func (c *committer) committed() {
	c.hooksMu.Lock()
	hooks := c.onCommit
	c.hooksMu.Unlock()
	for _, fn := range hooks {
		fn()
	}
}

type job struct {
	ctx   context.Context
	fn    func(*writeTx) error
	kind  jobKind
	state atomic.Int32 // jobQueued, then jobTaken (by the committer) or jobDropped (by its caller)
	done  chan error   // the outcome, once taken
}

// jobKind is what a job's fn allows the committer to do with it.
type jobKind int

const (
	jobOnce   jobKind = iota // runs once: in a batch of several, in a savepoint
	jobReplay                // may run again: no savepoint (see the rules above)
	jobPiped                 // jobReplay whose statements may wait for the batch's pipeline
)

const (
	jobQueued int32 = iota
	jobTaken
	jobDropped
)

// do runs fn as a job and returns once its outcome is known. A caller that
// finds the committer idle commits its batch itself, so a lone writer pays
// no hand-over.
func (c *committer) do(ctx context.Context, fn func(*writeTx) error, kind jobKind) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j := &job{ctx: ctx, fn: fn, kind: kind, done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, j)
	lead := !c.running
	c.running = true
	c.mu.Unlock()
	if lead {
		// The queue was empty: j heads the first batch. Whoever arrived
		// meanwhile is committed by a goroutine of their own, so that
		// this caller returns as soon as its own write committed.
		if c.commitNext() {
			go c.drain()
		}
	}
	var err error
	select {
	case err = <-j.done:
	case <-ctx.Done():
		if j.state.CompareAndSwap(jobQueued, jobDropped) {
			return ctx.Err()
		}
		err = <-j.done // taken: its outcome comes soon, and it must be told
	}
	var p *panicked
	if errors.As(err, &p) {
		panic(p.value)
	}
	return err
}

// drain commits batches until the queue is empty.
func (c *committer) drain() {
	for c.commitNext() {
	}
}

// commitNext commits the next batch and reports whether more jobs wait;
// when none do, the committer is idle again.
func (c *committer) commitNext() bool {
	c.mu.Lock()
	n := min(len(c.queue), maxBatch)
	jobs := slices.Clone(c.queue[:n])
	c.queue = slices.Delete(c.queue, 0, n)
	c.mu.Unlock()
	c.commit(jobs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.running = false
		return false
	}
	return true
}

// commit runs jobs in one transaction and tells each its outcome.
func (c *committer) commit(jobs []*job) {
	live := jobs[:0]
	for _, j := range jobs {
		if j.state.CompareAndSwap(jobQueued, jobTaken) {
			live = append(live, j)
		}
	}
	if len(live) == 0 {
		return
	}
	outcome := make([]error, len(live))
	defer func() {
		for i, j := range live {
			j.done <- outcome[i]
		}
	}()
	// The batch's statements run on a context of its own: a caller that
	// gives up must not break the transaction it shares (on PostgreSQL a
	// statement cancelled by its context takes the connection with it).
	// Once every caller gave up, the batch stops too.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waiting atomic.Int32
	waiting.Store(int32(len(live)))
	for _, j := range live {
		stop := context.AfterFunc(j.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}

	savepoints := slices.ContainsFunc(live, func(j *job) bool { return j.kind == jobOnce })
	var failed int
	if c.pipelined && !savepoints {
		failed = c.runPipelined(ctx, live, outcome)
	} else {
		failed = c.runBatch(ctx, live, outcome, savepoints)
	}
	if failed < 0 {
		return
	}
	// A replay job failed in a batch without savepoints, which rolled back:
	// it keeps its error, the others run again, each in a savepoint (and
	// so does a piped job that has to read to know what went wrong).
	again := func(i int) bool { return i != failed || errors.Is(outcome[i], errTakeTheLongWay) }
	var rest []*job
	var restOutcome []error
	for i, j := range live {
		if again(i) {
			rest = append(rest, j)
			restOutcome = append(restOutcome, nil)
		}
	}
	if len(rest) == 0 {
		return
	}
	c.runBatch(ctx, rest, restOutcome, true)
	for i, k := 0, 0; i < len(live); i++ {
		if again(i) {
			outcome[i] = restOutcome[k]
			k++
		}
	}
}

// runBatch runs jobs in one transaction and commits it, setting each job's
// outcome. With savepoints, or alone, a job that fails is rolled back by
// itself; without, the first job that fails rolls back the transaction and
// runBatch returns its index, with its outcome set and the others' not yet
// known (-1 otherwise).
func (c *committer) runBatch(ctx context.Context, jobs []*job, outcome []error, savepoints bool) (failed int) {
	fail := func(err error) { failAll(outcome, err) }
	tx := c.db.WithContext(ctx).Begin()
	if tx.Error != nil {
		fail(fmt.Errorf("begin: %w", db.Translate(tx.Error)))
		return -1
	}
	b := &batch{}
	if err := b.reserve(tx); err != nil {
		_ = tx.Rollback()
		fail(err)
		return -1
	}
	w := &writeTx{tx: tx, b: b}
	committed := 0
	for i, j := range jobs {
		switch {
		case j.ctx.Err() != nil: // gave up while the batch ran: not started, nothing written
			outcome[i] = j.ctx.Err()
		case len(jobs) == 1: // alone: no savepoint, a failure rolls back the transaction
			outcome[i] = run(w, j.fn)
		case !savepoints:
			if outcome[i] = run(w, j.fn); outcome[i] != nil {
				_ = tx.Rollback()
				return i
			}
		default:
			outcome[i] = w.nest(j.fn)
		}
		if b.broken != nil {
			_ = tx.Rollback()
			fail(b.broken)
			return -1
		}
		if outcome[i] == nil {
			committed++
		}
	}
	if committed == 0 {
		_ = tx.Rollback()
		return -1
	}
	if err := b.settle(tx); err != nil {
		_ = tx.Rollback()
		fail(err)
		return -1
	}
	if err := tx.Commit().Error; err != nil {
		fail(fmt.Errorf("commit: %w", db.Translate(err)))
		return -1
	}
	// Before any caller hears its outcome: a writer that returns has
	// already woken the watchers of what it wrote.
	if b.changed() {
		c.committed()
	}
	return -1
}
