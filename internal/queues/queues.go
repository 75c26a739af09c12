// Package queues is the set of named queues the manager is configured
// with (config.Queue): admission at submit resolves a queue name against
// it, and the executors read each queue's limits from it.
package queues

import (
	"fmt"
	"slices"
	"strings"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
)

// Set is the configured queues by name. The zero Set (or a nil one) has
// no queues.
type Set struct {
	byName map[string]config.Queue
	names  []string // sorted, for messages and listings
}

// New is the set of cfg (already validated: names unique, not empty).
func New(cfg []config.Queue) *Set {
	s := &Set{byName: make(map[string]config.Queue, len(cfg))}
	for _, q := range cfg {
		s.byName[q.Name] = q
		s.names = append(s.names, q.Name)
	}
	slices.Sort(s.names)
	return s
}

// Get returns the queue called name.
func (s *Set) Get(name string) (config.Queue, bool) {
	if s == nil || name == "" {
		return config.Queue{}, false
	}
	q, ok := s.byName[name]
	return q, ok
}

// All lists the queues by name.
func (s *Set) All() []config.Queue {
	if s == nil {
		return nil
	}
	out := make([]config.Queue, len(s.names))
	for i, n := range s.names {
		out[i] = s.byName[n]
	}
	return out
}

// Resolve is the queue a submit names in field: the zero Queue for "" (no
// queue), and an InvalidArgument naming the queue and the known ones for
// a name that is not configured, so a typo never runs unbounded.
func (s *Set) Resolve(field, name string) (config.Queue, error) {
	if name == "" {
		return config.Queue{}, nil
	}
	if q, ok := s.Get(name); ok {
		return q, nil
	}
	known := "none are configured (add them under queues: in the manager's configuration)"
	if s != nil && len(s.names) > 0 {
		known = "the configured queues are " + quoteAll(s.names)
	}
	return config.Queue{}, errs.Invalidf("%s: unknown queue %q: %s", field, name, known)
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
