package runstate

import (
	"context"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// WatchGroups streams the task groups of f (a project's runs grouped by
// task): the page first, marked as the sentinel (the initial snapshot is
// complete), then the group of every task one of whose runs in f changed,
// recomputed. A subscriber that falls behind gets the page again.
func (s *Service) WatchGroups(ctx context.Context, f store.GroupFilter, page store.Page, send func(*workflow.WatchGroupsResponse) error) error {
	match := func(c store.Change) bool {
		return c.Kind == store.KindAction && c.Key.Name == store.RootName && c.Key.Org == f.Org &&
			c.Key.Project == f.Project && c.Key.Domain == f.Domain
	}
	inRange := func(a *store.Action) bool {
		return (f.CreatedAfter.IsZero() || !a.CreatedAt.Before(f.CreatedAfter)) &&
			(f.CreatedBefore.IsZero() || a.CreatedAt.Before(f.CreatedBefore))
	}
	for {
		sub := s.hub.Subscribe(Matching(match))
		groups, _, err := s.TaskGroups(ctx, f, page)
		if err == nil {
			err = send(&workflow.WatchGroupsResponse{TaskGroups: groups, Sentinel: true})
		}
		for err == nil {
			var c store.Change
			var resync bool
			if c, resync, err = next(ctx, sub); err != nil || resync {
				break
			}
			// Coalesce what is already queued: a fan-out of runs of one
			// task recomputes that group once.
			changed := map[string]bool{}
			for more := true; more && err == nil; {
				var a *store.Action
				if a, err = s.rowOf(ctx, c); err == nil && a != nil && inRange(a) {
					changed[a.Task.Name] = true
				}
				select {
				case c, more = <-sub.C:
				default:
					more = false
				}
			}
			if sub.Overflowed() {
				break // resync: the queue was closed under us
			}
			tasks := make([]string, 0, len(changed))
			for name := range changed {
				tasks = append(tasks, name)
			}
			slices.Sort(tasks)
			var out []*workflow.TaskGroup
			for _, name := range tasks {
				g, ok, gerr := s.store.Actions.TaskGroup(ctx, f, name)
				if err = gerr; err != nil {
					break
				}
				if ok {
					out = append(out, TaskGroupOf(&g))
				}
			}
			if err == nil && len(out) > 0 {
				err = send(&workflow.WatchGroupsResponse{TaskGroups: out})
			}
		}
		sub.Close()
		if err != nil {
			return err
		}
	}
}

// TaskGroups is one page of f's task groups.
func (s *Service) TaskGroups(ctx context.Context, f store.GroupFilter, page store.Page) ([]*workflow.TaskGroup, string, error) {
	rows, next, err := s.store.Actions.ListTaskGroups(ctx, f, page)
	if err != nil {
		return nil, "", err
	}
	out := make([]*workflow.TaskGroup, len(rows))
	for i := range rows {
		out[i] = TaskGroupOf(&rows[i])
	}
	return out, next, nil
}

// TaskGroupOf is the proto view of a task group. The failure rate is the
// share of its ended runs that failed or timed out (runs still going
// neither fail nor succeed yet).
func TaskGroupOf(g *store.TaskGroup) *workflow.TaskGroup {
	out := &workflow.TaskGroup{
		TaskName:             g.TaskName,
		EnvironmentName:      g.EnvironmentName,
		ShortName:            g.ShortName,
		TotalRuns:            g.Total,
		LatestRunTime:        ts(g.LatestRun),
		LatestFinishedTime:   tsPtr(g.LatestFinished),
		AverageDuration:      seconds(g.AvgDurationSeconds),
		AverageTimeToRunning: seconds(g.AvgToRunningSeconds),
		ErrorCounts:          &workflow.TaskGroup_ErrorCounts{},
	}
	var ended, failed int64
	phases := make([]phase.Phase, 0, len(g.PhaseCounts))
	for p, n := range g.PhaseCounts {
		phases = append(phases, p)
		if p.Terminal() {
			ended += n
		}
		if p == phase.Failed || p == phase.TimedOut {
			failed += n
		}
	}
	slices.Sort(phases)
	for _, p := range phases {
		out.PhaseCounts = append(out.PhaseCounts, &workflow.TaskGroup_PhaseCounts{Phase: p.Proto(), Count: g.PhaseCounts[p]})
	}
	if ended > 0 {
		out.AverageFailureRate = float64(failed) / float64(ended)
	}
	for _, r := range g.Recent {
		out.RecentStatuses = append(out.RecentStatuses, &workflow.TaskGroup_RecentStatus{RunName: r.RunName, Phase: r.Phase.Proto()})
	}
	for _, subject := range g.CreatedBy {
		out.CreatedBy = append(out.CreatedBy, &common.EnrichedIdentity{Principal: &common.EnrichedIdentity_User{
			User: &common.User{Id: &common.UserIdentifier{Subject: subject}},
		}})
	}
	for _, b := range g.FailureErrors {
		switch executionError(b).GetKind() {
		case core.ExecutionError_USER:
			out.ErrorCounts.UserError++
		case core.ExecutionError_SYSTEM:
			out.ErrorCounts.SystemError++
		default:
			out.ErrorCounts.UnspecifiedError++
		}
	}
	return out
}

func seconds(s float64) *durationpb.Duration {
	return durationpb.New(time.Duration(s * float64(time.Second)))
}
