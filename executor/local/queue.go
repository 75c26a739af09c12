package local

import (
	"sync"
	"time"

	"fmgr.dev/internal/store"
)

// queue is the driver's work queue of action keys. A key is in the queue at
// most once however often it is added, and it is handed to at most one
// worker at a time: a key added while a worker holds it is handed out again
// after that worker is done with it. Keys whose processing failed come back
// after a per-key exponential backoff; delayed adds wait on timers.
type queue struct {
	mu   sync.Mutex
	cond *sync.Cond

	items      []store.ActionKey
	dirty      map[store.ActionKey]bool // queued, or to be queued once processing ends
	processing map[store.ActionKey]bool
	failures   map[store.ActionKey]int
	shut       bool

	baseDelay, maxDelay time.Duration
}

func newQueue(baseDelay, maxDelay time.Duration) *queue {
	q := &queue{
		dirty:      map[store.ActionKey]bool{},
		processing: map[store.ActionKey]bool{},
		failures:   map[store.ActionKey]int{},
		baseDelay:  baseDelay,
		maxDelay:   maxDelay,
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// add queues key unless it is queued already.
func (q *queue) add(key store.ActionKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shut || q.dirty[key] {
		return
	}
	q.dirty[key] = true
	if q.processing[key] {
		return // done re-queues it
	}
	q.items = append(q.items, key)
	q.cond.Signal()
}

// addAfter queues key once d has passed.
func (q *queue) addAfter(key store.ActionKey, d time.Duration) {
	if d <= 0 {
		q.add(key)
		return
	}
	time.AfterFunc(d, func() { q.add(key) })
}

// retry queues key after its next backoff delay: baseDelay doubling with
// every consecutive failure up to maxDelay.
func (q *queue) retry(key store.ActionKey) {
	q.mu.Lock()
	n := q.failures[key]
	q.failures[key] = n + 1
	q.mu.Unlock()
	d := q.baseDelay
	for i := 0; i < n && d < q.maxDelay; i++ {
		d *= 2
	}
	q.addAfter(key, min(d, q.maxDelay))
}

// forget resets key's backoff after it was processed successfully.
func (q *queue) forget(key store.ActionKey) {
	q.mu.Lock()
	delete(q.failures, key)
	q.mu.Unlock()
}

// get blocks until a key is available and hands it out; false once the
// queue is shut down.
func (q *queue) get() (store.ActionKey, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.shut {
		q.cond.Wait()
	}
	if q.shut {
		return store.ActionKey{}, false
	}
	key := q.items[0]
	q.items[0] = store.ActionKey{}
	q.items = q.items[1:]
	delete(q.dirty, key)
	q.processing[key] = true
	return key, true
}

// done ends the processing of key, queueing it again if it was added
// meanwhile.
func (q *queue) done(key store.ActionKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if q.dirty[key] && !q.shut {
		q.items = append(q.items, key)
		q.cond.Signal()
	}
}

// shutdown wakes every worker; get returns false from now on and adds are
// ignored.
func (q *queue) shutdown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shut = true
	q.items = nil
	q.cond.Broadcast()
}

// len is the number of keys waiting to be handed out.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// limiter is a token bucket: at most burst events at once, refilled at qps.
// It paces the workers so a burst of submissions or a resync of many
// actions does not hammer the database.
type limiter struct {
	mu     sync.Mutex
	qps    float64
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time // the clock (tests set their own)
}

func newLimiter(qps float64, burst int) *limiter {
	return &limiter{qps: qps, burst: float64(burst), tokens: float64(burst), last: time.Now(), now: time.Now}
}

// reserve takes a token and returns how long to wait before using it.
func (l *limiter) reserve() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.qps)
	l.last = now
	l.tokens--
	if l.tokens >= 0 {
		return 0
	}
	return time.Duration(-l.tokens / l.qps * float64(time.Second))
}

// wait blocks until a token is available or stop is closed; false when
// stopped.
func (l *limiter) wait(stop <-chan struct{}) bool {
	d := l.reserve()
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}
