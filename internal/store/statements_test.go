package store_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// statementTally reads how many statements g has sent (the manager's own
// counter; BEGIN and COMMIT aside, which gorm does not see as statements).
type statementTally struct{ g *gorm.DB }

func (s statementTally) Load() int64 { return int64(db.StatementTotal(s.g)) }

func countStatements(t *testing.T, g *gorm.DB) statementTally {
	t.Helper()
	if db.StatementCounts(g) == nil {
		t.Fatal("the test database counts no statements: it was not opened by db.Open")
	}
	return statementTally{g}
}

// An executor's write costs seven statements alone on SQLite (the version,
// the fence, the action with its attempt, the attempt, the action, the
// change log, the event), and in a batch five per write plus three per
// batch: the version and the fence are the batch's, and the store's own
// writes take no savepoint. Creating a child costs seven. On PostgreSQL a
// write's statements after its read go as one (see chain.go): four alone,
// two per write in a batch (the read, the rest), and four for a child (its
// spec is stored by the statement that reads whether it exists).
func TestStatementsPerWrite(t *testing.T) {
	suite(t, func(t *testing.T, s *store.Store, g *gorm.DB) {
		ctx := context.Background()
		runs := createRuns(t, s, 9)
		lone, child1, perWrite := int64(7), int64(7), int64(5)
		if g.Dialector.Name() == db.Postgres {
			lone, child1, perWrite = 4, 4, 2
		}
		free := must[*store.Lease](t)(s.Leases.Get(ctx, store.LocalExecutorLease))
		lease := must[*store.Lease](t)(s.Leases.Acquire(ctx, *free, store.Claimant{Holder: "h"}, time.Hour))
		n := countStatements(t, g)

		before := n.Load()
		must[*store.Action](t)(s.Actions.Update(ctx, runs[8].ActionKey, runs[8].ResourceVersion,
			store.Update{Phase: phase.Initializing, Fence: lease.Token, Owner: lease.Token}))
		if got := n.Load() - before; got > lone {
			t.Errorf("a lone Update ran %d statements, want at most %d", got, lone)
		} else {
			t.Logf("a lone Update: %d statements", got)
		}

		before = n.Load()
		if _, _, err := s.Actions.CreateChild(ctx, child(runs[8].RunKey, "c1", store.RootName)); err != nil {
			t.Fatal(err)
		}
		if got := n.Load() - before; got > child1 {
			t.Errorf("a lone CreateChild ran %d statements, want at most %d", got, child1)
		} else {
			t.Logf("a lone CreateChild: %d statements", got)
		}

		release := holdCommitter(t, s)
		var pending []<-chan error
		for _, a := range runs[:8] {
			pending = append(pending, async(func() error {
				_, err := s.Actions.Update(ctx, a.ActionKey, a.ResourceVersion,
					store.Update{Phase: phase.Initializing, Fence: lease.Token, Owner: lease.Token})
				return err
			}))
		}
		waitQueued(t, s, len(pending))
		before = n.Load()
		release()
		for _, c := range pending {
			if err := <-c; err != nil {
				t.Fatal(err)
			}
		}
		// 1: the holding write's version handed back; then per batch the
		// version taken and written back and the fence, and per write its
		// statements.
		if got, want := n.Load()-before, 1+3+8*perWrite; got > want {
			t.Errorf("8 Updates in one batch ran %d statements, want at most %d", got, want)
		} else {
			t.Logf("8 Updates in one batch: %d statements", got)
		}
	})
}
