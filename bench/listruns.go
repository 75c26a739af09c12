package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/store"
)

// The ListRuns paging scenario (-list-runs N): N runs of one project are
// created directly through the store (no manager, no executor), then the
// newest page, and the 100th page reached by following the tokens, are
// listed as the console lists them (100 a page, newest first). It prints
// the median latency of each page over a few repetitions: keyset paging
// should make the 100th page cost what the first does.

const (
	listRunsPageSize = 100
	listRunsDeepPage = 100
	listRunsRepeats  = 20
)

func runListRuns(ctx context.Context, o options, tmp string) error {
	for _, b := range o.backends {
		dsn, cleanup, err := listRunsDatabase(ctx, b, tmp)
		if err != nil {
			return err
		}
		err = listRunsOn(ctx, b, dsn, o.listRuns)
		cleanup()
		if err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
	}
	return nil
}

func listRunsDatabase(ctx context.Context, backend, tmp string) (string, func(), error) {
	if backend == "sqlite" {
		return "sqlite://" + filepath.Join(tmp, "listruns", "runs.db"), func() {}, nil
	}
	pg, err := pgtest.Start()
	if err != nil {
		return "", nil, err
	}
	dsn, err := createDatabase(ctx, pg, "listruns")
	if err != nil {
		pg.Stop()
		return "", nil, err
	}
	return dsn, pg.Stop, nil
}

func listRunsOn(ctx context.Context, backend, dsn string, n int) error {
	g, err := db.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close(g)
	if err := db.Migrate(ctx, g); err != nil {
		return err
	}
	st := store.New(g)
	start := time.Now()
	if err := createRuns(ctx, st, n); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: list-runs %s: created %d runs in %s\n", backend, n, round(time.Since(start)))

	f := store.RunFilter{Project: "flytesnacks", Domain: "development"}
	page := func(token string) (string, time.Duration, error) {
		t0 := time.Now()
		rows, next, err := st.Actions.ListRuns(ctx, f, store.Page{Limit: listRunsPageSize, Token: token})
		if err == nil && len(rows) != listRunsPageSize {
			err = fmt.Errorf("a page of %d runs, want %d", len(rows), listRunsPageSize)
		}
		return next, time.Since(t0), err
	}
	// The token of the 100th page, by following the pages as a user would.
	token := ""
	for i := 1; i < listRunsDeepPage; i++ {
		if token, _, err = page(token); err != nil {
			return err
		}
	}
	var first, deep []time.Duration
	for range listRunsRepeats {
		_, d, err := page("")
		if err != nil {
			return err
		}
		first = append(first, d)
		if _, d, err = page(token); err != nil {
			return err
		}
		deep = append(deep, d)
	}
	fmt.Printf("ListRuns %-8s %d runs, %d a page: first page %s, page %d %s (median of %d)\n",
		backend, n, listRunsPageSize, median(first), listRunsDeepPage, median(deep), listRunsRepeats)
	return nil
}

// createRuns writes n runs through the store from a few writers, whose
// concurrent writes share the store's batches as the executor's do.
func createRuns(ctx context.Context, st *store.Store, n int) error {
	base := time.Now().Add(-time.Duration(n) * time.Millisecond)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				key := store.RunKey{Project: "flytesnacks", Domain: "development", RunName: fmt.Sprintf("r%07d", i)}
				_, err := st.Actions.CreateRun(ctx, store.NewAction{
					Key: key.Action(store.RootName), ActionType: store.ActionTypeTask,
					Task:     store.TaskID{Project: key.Project, Domain: key.Domain, Name: fmt.Sprintf("bench.task%d", i%10), Version: "v1"},
					TaskType: "python", InputURI: "file:///bench/in", RunOutputBase: "file:///bench/out/",
					CreatedBy: "bench", CreatedAt: base.Add(time.Duration(i) * time.Millisecond),
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(10 * time.Microsecond)
}
