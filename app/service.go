package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/internal/appruntime"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/store"
)

// maxConditions bounds an app's condition history: the oldest go first.
const maxConditions = 20

var (
	// An app's name becomes part of host names and paths: a DNS label.
	namePattern  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	scopePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
)

// Service implements AppService over a Store.
type Service struct {
	store     *Store
	runtime   appruntime.Runtime
	noRuntime string
	publicURL func(ctx context.Context, k Key) string
	hub       *hub
	resync    time.Duration
	log       *slog.Logger
}

var _ appruntime.Reporter = (*Service)(nil)

// NewService serves the apps of s.
func NewService(s *Store, o Options) *Service {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.NoRuntime == "" {
		o.NoRuntime = "no runtime runs apps in this manager"
	}
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	return &Service{store: s, runtime: o.Runtime, noRuntime: o.NoRuntime, publicURL: o.PublicURL, hub: newHub(), resync: o.Resync,
		log: o.Log.With("component", "apps")}
}

// keyOf validates an app identifier.
func keyOf(id *pb.Identifier) (Key, error) {
	if id == nil {
		return Key{}, errs.Invalidf("app_id is required")
	}
	for _, p := range []struct{ field, v string }{{"project", id.GetProject()}, {"domain", id.GetDomain()}} {
		if p.v == "" {
			return Key{}, errs.Invalidf("app id: %s is required", p.field)
		}
		if len(p.v) > 63 || !scopePattern.MatchString(p.v) {
			return Key{}, errs.Invalidf("app id: %s %q may only contain letters, digits, '-' and '_'", p.field, p.v)
		}
	}
	name := id.GetName()
	switch {
	case name == "":
		return Key{}, errs.Invalidf("app id: name is required")
	case len(name) > 63 || !namePattern.MatchString(name):
		return Key{}, errs.Invalidf("app name %q must be a DNS label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return Key{Org: ident.Org(id.GetOrg()), Project: id.GetProject(), Domain: id.GetDomain(), Name: name}, nil
}

// checkSpec validates what the manager needs of a spec to run it.
func checkSpec(s *pb.Spec) error {
	if s == nil {
		return errs.Invalidf("app spec is required")
	}
	if s.GetContainer() == nil && s.GetPod() == nil {
		return errs.Invalidf("app spec needs a container (or a pod)")
	}
	if r := s.GetAutoscaling().GetReplicas(); r != nil && r.GetMax() > 0 && r.GetMin() > r.GetMax() {
		return errs.Invalidf("app autoscaling: min replicas %d is more than max %d", r.GetMin(), r.GetMax())
	}
	if _, ok := pb.Spec_DesiredState_name[int32(s.GetDesiredState())]; !ok {
		return errs.Invalidf("app spec: desired_state %d is not a known state", s.GetDesiredState())
	}
	return nil
}

// defaultSpec fills what the SDK reads back when it compares a deployed
// spec with the one it would send (remote.App.replace): the ingress, and
// the creator, which it copies from the stored spec into its own (so a
// stored spec without one never compares equal, and every deploy of an
// unchanged app would restart it). Both come from old when it has them.
func defaultSpec(s, old *pb.Spec) {
	if s.Ingress == nil {
		s.Ingress = old.GetIngress()
		if s.Ingress == nil {
			s.Ingress = &pb.IngressConfig{}
		}
	}
	if s.Creator == nil {
		s.Creator = old.GetCreator()
		if s.Creator == nil {
			s.Creator = &common.EnrichedIdentity{}
		}
	}
}

// condition is a condition of the app's current revision, now.
func condition(rev uint64, st pb.Status_DeploymentStatus, sub pb.Status_Substate, msg string) *pb.Condition {
	return &pb.Condition{LastTransitionTime: timestamppb.New(db.Now()), DeploymentStatus: st, Substate: sub, Message: msg, Revision: rev}
}

// addCondition appends c unless it says what the newest condition says;
// it reports whether it did.
func addCondition(s *pb.Status, c *pb.Condition) bool {
	if n := len(s.Conditions); n > 0 {
		last := s.Conditions[n-1]
		if last.GetDeploymentStatus() == c.GetDeploymentStatus() && last.GetSubstate() == c.GetSubstate() &&
			last.GetMessage() == c.GetMessage() && last.GetRevision() == c.GetRevision() {
			return false
		}
	}
	s.Conditions = append(s.Conditions, c)
	if n := len(s.Conditions); n > maxConditions {
		s.Conditions = append([]*pb.Condition(nil), s.Conditions[n-maxConditions:]...)
	}
	return true
}

// deployCondition is the condition a revision starts with.
func (s *Service) deployCondition(rev uint64, spec *pb.Spec) *pb.Condition {
	switch {
	case spec.GetDesiredState() == pb.Spec_DESIRED_STATE_STOPPED:
		return condition(rev, pb.Status_DEPLOYMENT_STATUS_STOPPED, 0, "stopped")
	case s.runtime == nil:
		return condition(rev, pb.Status_DEPLOYMENT_STATUS_PENDING, 0, s.noRuntime)
	}
	return condition(rev, pb.Status_DEPLOYMENT_STATUS_DEPLOYING, pb.Status_INITIALIZING, fmt.Sprintf("deploying revision %d", rev))
}

// view is a row as the API shows it, with the id in the caller's org
// spelling and the public URL for the caller's base URL.
func (s *Service) view(ctx context.Context, r *row, org string) (*pb.App, error) {
	a, err := r.app(org)
	if err != nil {
		return nil, err
	}
	if s.publicURL != nil {
		if a.Status.Ingress == nil {
			a.Status.Ingress = &pb.Ingress{}
		}
		a.Status.Ingress.PublicUrl = s.publicURL(ctx, r.key())
	}
	return a, nil
}

// apply tells the runtime what r wants.
func (s *Service) apply(r *row) {
	if s.runtime == nil {
		return
	}
	a, err := r.app("")
	if err != nil {
		s.log.Error("cannot run an app", "app", r.key().String(), "err", err)
		return
	}
	s.runtime.Apply(appruntime.Target{Key: r.key(), Revision: r.Revision, Spec: a.Spec, CodeBundleURI: a.Metadata.GetCodeBundleUri()})
}

func (s *Service) Create(ctx context.Context, req *connect.Request[pb.CreateRequest]) (*connect.Response[pb.CreateResponse], error) {
	in := req.Msg.GetApp()
	k, err := keyOf(in.GetMetadata().GetId())
	if err != nil {
		return nil, err
	}
	if err := checkSpec(in.GetSpec()); err != nil {
		return nil, err
	}
	a := proto.Clone(in).(*pb.App)
	defaultSpec(a.Spec, nil)
	a.Status = &pb.Status{}
	addCondition(a.Status, s.deployCondition(1, a.Spec))
	r, err := s.store.Create(ctx, k, a)
	if err != nil {
		return nil, err
	}
	s.hub.publish(change{kind: changeCreate, cur: r})
	s.apply(r)
	out, err := s.view(ctx, r, in.GetMetadata().GetId().GetOrg())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.CreateResponse{App: out}), nil
}

func (s *Service) Get(ctx context.Context, req *connect.Request[pb.GetRequest]) (*connect.Response[pb.GetResponse], error) {
	if req.Msg.GetIngress() != nil {
		return nil, errs.Invalidf("look apps up by app_id; lookup by ingress is not supported")
	}
	k, err := keyOf(req.Msg.GetAppId())
	if err != nil {
		return nil, err
	}
	r, err := s.store.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	out, err := s.view(ctx, r, req.Msg.GetAppId().GetOrg())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.GetResponse{App: out}), nil
}

// Update replaces the app's spec (a start or stop is a spec with another
// desired state) and labels. A revision that is not the stored one is
// ABORTED: the app changed since the caller read it. A spec equal to the
// stored one changes nothing and keeps the revision.
func (s *Service) Update(ctx context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	in := req.Msg.GetApp()
	k, err := keyOf(in.GetMetadata().GetId())
	if err != nil {
		return nil, err
	}
	if err := checkSpec(in.GetSpec()); err != nil {
		return nil, err
	}
	want := in.GetMetadata().GetRevision()
	reason := req.Msg.GetReason()
	old, cur, err := s.store.Change(ctx, k, func(r *row) error {
		if want != 0 && want != r.Revision {
			return fmt.Errorf("app %s is at revision %d, not %d: read it again and retry: %w", k, r.Revision, want, errs.ErrConflict)
		}
		a, err := r.app("")
		if err != nil {
			return err
		}
		spec := proto.Clone(in.GetSpec()).(*pb.Spec)
		defaultSpec(spec, a.Spec)
		sameSpec := proto.Equal(spec, a.Spec)
		labels := in.GetMetadata().GetLabels()
		if sameSpec && (labels == nil || maps.Equal(labels, a.Metadata.GetLabels())) {
			return errUnchanged
		}
		a.Spec = spec
		if labels != nil {
			a.Metadata.Labels = labels
		}
		if !sameSpec {
			r.Revision++
			c := s.deployCondition(r.Revision, spec)
			if reason != "" {
				c.Message += ": " + reason
			}
			addCondition(a.Status, c)
		}
		return r.fill(a)
	})
	if err != nil {
		return nil, err
	}
	if cur != old {
		s.hub.publish(change{kind: changeUpdate, cur: cur, old: old})
		if cur.Revision != old.Revision {
			s.apply(cur)
		}
	}
	out, err := s.view(ctx, cur, in.GetMetadata().GetId().GetOrg())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.UpdateResponse{App: out}), nil
}

// UpdateStatus records the status a data plane reports for an app. The
// manager's own runtime reports through Report; this is for others.
func (s *Service) UpdateStatus(ctx context.Context, req *connect.Request[pb.UpdateStatusRequest]) (*connect.Response[pb.UpdateStatusResponse], error) {
	in := req.Msg.GetApp()
	k, err := keyOf(in.GetMetadata().GetId())
	if err != nil {
		return nil, err
	}
	if in.GetStatus() == nil {
		return nil, errs.Invalidf("app status is required")
	}
	want := in.GetMetadata().GetRevision()
	old, cur, err := s.store.Change(ctx, k, func(r *row) error {
		if want != 0 && want != r.Revision {
			return fmt.Errorf("app %s is at revision %d, not %d: %w", k, r.Revision, want, errs.ErrConflict)
		}
		a, err := r.app("")
		if err != nil {
			return err
		}
		a.Status = proto.Clone(in.GetStatus()).(*pb.Status)
		return r.fill(a)
	})
	if err != nil {
		return nil, err
	}
	s.hub.publish(change{kind: changeUpdate, cur: cur, old: old})
	out, err := s.view(ctx, cur, in.GetMetadata().GetId().GetOrg())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.UpdateStatusResponse{App: out}), nil
}

func (s *Service) Delete(ctx context.Context, req *connect.Request[pb.DeleteRequest]) (*connect.Response[pb.DeleteResponse], error) {
	k, err := keyOf(req.Msg.GetAppId())
	if err != nil {
		return nil, err
	}
	r, err := s.store.Delete(ctx, k)
	if err != nil {
		return nil, err
	}
	if s.runtime != nil {
		s.runtime.Remove(k)
	}
	s.hub.publish(change{kind: changeDelete, cur: r})
	return connect.NewResponse(&pb.DeleteResponse{}), nil
}

// Report records what the runtime observed of an app: a condition when it
// says something new, and the replica count. A report of another revision
// than the stored one is stale and dropped.
func (s *Service) Report(ctx context.Context, rep appruntime.Report) error {
	old, cur, err := s.store.Change(ctx, rep.Key, func(r *row) error {
		if r.Revision != rep.Revision {
			return errUnchanged
		}
		a, err := r.app("")
		if err != nil {
			return err
		}
		added := addCondition(a.Status, condition(rep.Revision, rep.Status, rep.Substate, rep.Message))
		replicas := a.Status.CurrentReplicas != rep.Replicas
		if !added && !replicas {
			return errUnchanged
		}
		a.Status.CurrentReplicas = rep.Replicas
		if !rep.Started.IsZero() {
			a.Status.LastStartedAt = timestamppb.New(rep.Started)
		}
		return r.fill(a)
	})
	if errors.Is(err, errs.ErrNotFound) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return err
	}
	if cur != old {
		s.hub.publish(change{kind: changeUpdate, cur: cur, old: old})
	}
	return nil
}

// DefaultResync is how often Run hands the runtime every app again.
const DefaultResync = 10 * time.Second

// Run hands the runtime every app when the manager starts (after a
// restart, the apps that should run start again), then again every
// Options.Resync, which is how changes made through another manager on
// the same database reach the one that runs the replicas; an app gone from
// the database is removed from the runtime.
func (s *Service) Run(ctx context.Context) error {
	seen := map[Key]bool{}
	for {
		now, err := s.applyAll(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("reading the apps to run (will retry)", "err", err)
		}
		if err == nil {
			for k := range seen {
				if !now[k] {
					s.runtime.Remove(k)
				}
			}
			seen = now
			if g, ok := s.runtime.(appruntime.Syncer); ok {
				g.Synced() // the proxy may now say an app does not exist
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.resync):
		}
	}
}

func (s *Service) applyAll(ctx context.Context) (map[Key]bool, error) {
	keys := map[Key]bool{}
	page := store.Page{Limit: 200}
	for {
		rows, next, err := s.store.List(ctx, Filter{AllOrgs: true}, page)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			keys[r.key()] = true
			s.apply(r)
		}
		if next == "" {
			return keys, nil
		}
		page.Token = next
	}
}
