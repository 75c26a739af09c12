package app

import (
	"context"
	"errors"
	"sync"
	"time"

	"connectrpc.com/connect"

	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/store"
)

// Watching apps. Every change this manager makes (the API's writes and the
// runtime's reports) is published to the watchers in process; the runtime
// runs in the manager that runs the executor, so a watcher connected to it
// sees every status change. A watcher that falls behind by watchBuffer
// changes is ended with an error telling it to watch again.

const watchBuffer = 256

type changeKind int

const (
	changeCreate changeKind = iota
	changeUpdate
	changeDelete
)

// change is one write of an app: its row after (before, for an update).
type change struct {
	kind     changeKind
	cur, old *row
}

type watcher struct {
	match func(Key) bool
	ch    chan change
	lost  chan struct{} // closed when the watcher fell behind
}

type hub struct {
	mu   sync.Mutex
	subs map[*watcher]struct{}
}

func newHub() *hub { return &hub{subs: map[*watcher]struct{}{}} }

func (h *hub) subscribe(match func(Key) bool) *watcher {
	w := &watcher{match: match, ch: make(chan change, watchBuffer), lost: make(chan struct{})}
	h.mu.Lock()
	h.subs[w] = struct{}{}
	h.mu.Unlock()
	return w
}

func (h *hub) unsubscribe(w *watcher) {
	h.mu.Lock()
	delete(h.subs, w)
	h.mu.Unlock()
}

func (h *hub) publish(c change) {
	k := c.cur.key()
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.subs {
		if !w.match(k) {
			continue
		}
		select {
		case w.ch <- c:
		default:
			close(w.lost)
			delete(h.subs, w)
		}
	}
}

// Watch sends the apps of the target as they are, then every change to
// them until the client goes. For one app (app_id) the snapshot is an
// UpdateEvent, so that a client waiting for the app to become ACTIVE sees
// it even when that happened before it asked; for a project or an org the
// snapshot is one CreateEvent per app.
func (s *Service) Watch(ctx context.Context, req *connect.Request[pb.WatchRequest], stream *connect.ServerStream[pb.WatchResponse]) error {
	var (
		match func(Key) bool
		org   string
		one   *Key
		f     Filter
	)
	switch t := req.Msg.GetTarget().(type) {
	case *pb.WatchRequest_AppId:
		k, err := keyOf(t.AppId)
		if err != nil {
			return err
		}
		org, one = t.AppId.GetOrg(), &k
		match = func(x Key) bool { return x == k }
	case *pb.WatchRequest_Project:
		p := t.Project
		if p.GetName() == "" {
			return errs.Invalidf("watch: project.name is required")
		}
		org = p.GetOrganization()
		f = Filter{Org: ident.Org(org), Project: p.GetName(), Domain: p.GetDomain()}
		match = func(x Key) bool {
			return x.Org == f.Org && x.Project == f.Project && (f.Domain == "" || x.Domain == f.Domain)
		}
	case *pb.WatchRequest_Org:
		org = t.Org
		f = Filter{Org: ident.Org(org)}
		match = func(x Key) bool { return x.Org == f.Org }
	case *pb.WatchRequest_ClusterId:
		// One cluster: the manager's. Every app of the cluster's org.
		org = t.ClusterId.GetOrganization()
		f = Filter{Org: ident.Org(org)}
		match = func(x Key) bool { return x.Org == f.Org }
	default:
		return errs.Invalidf("watch needs a target: app_id, project, org or cluster_id")
	}
	w := s.hub.subscribe(match)
	defer s.hub.unsubscribe(w)

	// last is the one app's row as last sent: its changes made by another
	// manager (the one running its replicas) are found by reading it
	// every watchPoll.
	var last *row
	var poll <-chan time.Time
	if one != nil {
		r, err := s.store.Get(ctx, *one)
		if err != nil {
			return err
		}
		a, err := s.view(ctx, r, org)
		if err != nil {
			return err
		}
		if err := stream.Send(&pb.WatchResponse{Event: &pb.WatchResponse_UpdateEvent{UpdateEvent: &pb.UpdateEvent{UpdatedApp: a}}}); err != nil {
			return err
		}
		last = r
		t := time.NewTicker(watchPoll)
		defer t.Stop()
		poll = t.C
	} else if err := s.snapshot(ctx, f, org, stream); err != nil {
		return err
	}
	for {
		var c change
		select {
		case <-ctx.Done():
			return nil
		case <-w.lost:
			return connect.NewError(connect.CodeResourceExhausted, errors.New("this watch fell behind the changes to apps; watch again"))
		case c = <-w.ch:
		case <-poll:
			r, err := s.store.Get(ctx, *one)
			if errors.Is(err, errs.ErrNotFound) {
				c = change{kind: changeDelete, cur: last}
				break
			}
			if err != nil {
				return err
			}
			if r.Version <= last.Version {
				continue
			}
			c = change{kind: changeUpdate, cur: r, old: last}
		}
		if last != nil {
			if c.kind != changeDelete && c.cur.Version <= last.Version {
				continue // sent already
			}
			last = c.cur
		}
		resp, err := s.event(ctx, c, org)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
		if c.kind == changeDelete && one != nil {
			return nil
		}
	}
}

// watchPoll is how often a watch of one app reads it for changes made
// through another manager.
const watchPoll = 2 * time.Second

func (s *Service) snapshot(ctx context.Context, f Filter, org string, stream *connect.ServerStream[pb.WatchResponse]) error {
	page := store.Page{Limit: 200}
	for {
		rows, next, err := s.store.List(ctx, f, page)
		if err != nil {
			return err
		}
		for _, r := range rows {
			a, err := s.view(ctx, r, org)
			if err != nil {
				return err
			}
			if err := stream.Send(&pb.WatchResponse{Event: &pb.WatchResponse_CreateEvent{CreateEvent: &pb.CreateEvent{App: a}}}); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		page.Token = next
	}
}

func (s *Service) event(ctx context.Context, c change, org string) (*pb.WatchResponse, error) {
	cur, err := s.view(ctx, c.cur, org)
	if err != nil {
		return nil, err
	}
	switch c.kind {
	case changeCreate:
		return &pb.WatchResponse{Event: &pb.WatchResponse_CreateEvent{CreateEvent: &pb.CreateEvent{App: cur}}}, nil
	case changeDelete:
		return &pb.WatchResponse{Event: &pb.WatchResponse_DeleteEvent{DeleteEvent: &pb.DeleteEvent{App: cur}}}, nil
	}
	old, err := s.view(ctx, c.old, org)
	if err != nil {
		return nil, err
	}
	return &pb.WatchResponse{Event: &pb.WatchResponse_UpdateEvent{UpdateEvent: &pb.UpdateEvent{UpdatedApp: cur, OldApp: old}}}, nil
}
