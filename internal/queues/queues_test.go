package queues

import (
	"errors"
	"strings"
	"testing"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
)

func TestResolve(t *testing.T) {
	s := New([]config.Queue{{Name: "serial-1", MaxActionConcurrency: 1}, {Name: "depth-limited", MaxDepth: 5}})
	if q, err := s.Resolve("f", "depth-limited"); err != nil || q.MaxDepth != 5 {
		t.Errorf("known queue: %+v %v", q, err)
	}
	if q, err := s.Resolve("f", ""); err != nil || q != (config.Queue{}) {
		t.Errorf("no queue: %+v %v", q, err)
	}
	_, err := s.Resolve("run_spec.queue", "seral-1")
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), `run_spec.queue: unknown queue "seral-1": the configured queues are "depth-limited", "serial-1"`) {
		t.Errorf("unknown queue: %v", err)
	}
	var none *Set
	if _, err := none.Resolve("f", "x"); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "none are configured") {
		t.Errorf("unknown queue with none configured: %v", err)
	}
	if got := s.All(); len(got) != 2 || got[0].Name != "depth-limited" {
		t.Errorf("All = %+v", got)
	}
}
