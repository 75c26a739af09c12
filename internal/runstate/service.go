// Package runstate owns the lifecycle of runs and actions as the API sees
// them: creating runs and child actions, aborting, reading details and
// watching changes. The Connect services (runs, actions, dataproxy) are thin
// adapters over it, and the executor reads its work from the same store and
// reports through it, so the API never disagrees with the executor.
package runstate

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/queues"
	"fmgr.dev/internal/store"
)

// Executor is told about work; it re-reads everything from the store.
type Executor interface {
	// Submit says key was created QUEUED.
	Submit(key store.ActionKey)
	// Abort says key was marked for abort.
	Abort(key store.ActionKey)
}

// Service is the run state shared by the services and the executor.
type Service struct {
	store    *store.Store
	blobs    *blob.Store
	projects config.Projects
	hub      *Hub
	log      *slog.Logger
	exec     Executor // set once in New, before the Service is shared; nil: nobody runs actions
	queues   *queues.Set

	specMu sync.Mutex
	specs  map[string]*task.TaskSpec // immutable by digest
}

// New builds the run state over st and blobs (hub fans changes out to
// watchers) together with the executor that runs its actions, and returns
// both.
//
// The two need each other: the run state tells the executor about created
// and aborted actions (Executor), and the executor reads and reports
// through the run state. New breaks that cycle at construction: it builds
// the Service, hands it to newExecutor, and keeps the executor before
// anyone else sees the Service. So there is no setter to forget, no window
// in which an action is created with nobody told, and no lock on every
// Submit. Pass NoExecutor where nothing runs actions.
func New[E Executor](st *store.Store, blobs *blob.Store, hub *Hub, projects config.Projects, log *slog.Logger, newExecutor func(*Service) E, opts ...Option) (*Service, E) {
	s := &Service{store: st, blobs: blobs, hub: hub, projects: projects, log: log, specs: map[string]*task.TaskSpec{}}
	for _, o := range opts {
		o(s)
	}
	e := newExecutor(s)
	if any(e) != nil {
		s.exec = e
	}
	return s, e
}

// Option configures a Service at New, before anyone sees it.
type Option func(*Service)

// WithQueues declares the named queues runs and actions may route to;
// without it there are none, and a submit naming a queue is refused.
func WithQueues(q *queues.Set) Option { return func(s *Service) { s.queues = q } }

// Queues are the configured named queues.
func (s *Service) Queues() *queues.Set { return s.queues }

// NoExecutor builds a run state whose actions nobody runs: they are created
// QUEUED and stay so (for services and tests that never execute).
func NoExecutor(*Service) Executor { return nil }

func (s *Service) executor() Executor { return s.exec }

// Blobs and Hub expose what the executor shares with the API. The store
// is not shared: callers read and write through the Service (records.go).
func (s *Service) Blobs() *blob.Store { return s.blobs }
func (s *Service) Hub() *Hub          { return s.hub }

// spec returns the TaskSpec stored under digest, cached: specs never change.
func (s *Service) spec(ctx context.Context, digest string) (*task.TaskSpec, error) {
	s.specMu.Lock()
	sp, ok := s.specs[digest]
	s.specMu.Unlock()
	if ok {
		return sp, nil
	}
	raw, err := s.store.Tasks.GetSpec(ctx, digest)
	if err != nil {
		return nil, err
	}
	sp = &task.TaskSpec{}
	if err := proto.Unmarshal(raw, sp); err != nil {
		return nil, fmt.Errorf("task spec %s is unreadable: %w", digest, err)
	}
	s.specMu.Lock()
	if len(s.specs) > 4096 { // bounded: drop everything rather than track recency
		s.specs = map[string]*task.TaskSpec{}
	}
	s.specs[digest] = sp
	s.specMu.Unlock()
	return sp, nil
}

// Spec returns an action's TaskSpec.
func (s *Service) Spec(ctx context.Context, a *store.Action) (*task.TaskSpec, error) {
	if a.SpecDigest == "" {
		return nil, errs.Invalidf("action %s has no task spec", a.ActionKey)
	}
	return s.spec(ctx, a.SpecDigest)
}

// RunSpec returns the RunSpec of key's run (stored on its root action);
// children inherit envs, labels and annotations from it.
func (s *Service) RunSpec(ctx context.Context, run store.RunKey) (*task.RunSpec, error) {
	root, err := s.store.Actions.Get(ctx, run.Action(store.RootName))
	if err != nil {
		return nil, err
	}
	rs := &task.RunSpec{}
	if err := proto.Unmarshal(root.RunSpec, rs); err != nil {
		return nil, fmt.Errorf("run spec of %s is unreadable: %w", run, err)
	}
	return rs, nil
}

// marshal is deterministic so equal messages digest equally.
func marshal(m proto.Message) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}
