// Package appruntime is the seam between the App service (app/), which
// keeps apps in the database and answers the API, and whatever runs their
// replicas (the local executor's executor/local/apps). The composition
// (manager/compose) wires one to the other; neither imports the other.
//
// The service tells the runtime what each app should be (Apply, Remove);
// the runtime tells the service what it observed (Reporter.Report), and
// the service turns reports into the app's conditions, newest last.
//
// Proxy (proxy.go) serves every runtime's apps at the manager's address:
// a runtime implements Served to say which backends of an app are ready
// and to hear of the requests it scales by.
package appruntime

import (
	"context"
	"fmt"
	"time"

	pb "fmgr.dev/gen/go/flyteidl2/app"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
)

// Key names one app.
type Key struct {
	Org, Project, Domain, Name string
}

func (k Key) String() string { return fmt.Sprintf("%s/%s/%s", k.Project, k.Domain, k.Name) }

// Target is what the service wants of one app: its spec at a revision.
type Target struct {
	Key      Key
	Revision uint64
	// Spec is the app's spec as stored; the runtime must not change it.
	Spec *pb.Spec
	// CodeBundleURI is the app's code bundle (Meta.code_bundle_uri).
	CodeBundleURI string
}

// Active reports whether the target wants the app running: any desired
// state but STOPPED.
func (t Target) Active() bool { return t.Spec.GetDesiredState() != pb.Spec_DESIRED_STATE_STOPPED }

// Report is what the runtime observed of one revision of an app.
type Report struct {
	Key      Key
	Revision uint64
	Status   pb.Status_DeploymentStatus
	Substate pb.Status_Substate
	// Message says what happened in words a user can act on (for a crash
	// loop, with the last lines the app printed).
	Message string
	// Replicas is how many replicas serve now.
	Replicas uint32
	// Started is set when replicas were (re)started for the revision.
	Started time.Time
}

// Reporter records reports (the App service).
type Reporter interface {
	Report(ctx context.Context, r Report) error
}

// Replica names one replica of an app and says how it is.
type Replica struct {
	Name   string
	Status string // "running", "starting", "crashed", ...
}

// Runtime runs apps' replicas.
type Runtime interface {
	// Apply makes the app's replicas match t: started, restarted at a new
	// revision, or stopped. It returns at once; reports follow.
	Apply(t Target)
	// Remove stops the app's replicas and forgets it (the app was
	// deleted).
	Remove(k Key)
	// Replicas lists the app's replicas, newest last; none when it has
	// none running (stopped, scaled to zero, or unknown).
	Replicas(k Key) []Replica
	// TailLogs sends what the app's replicas printed (one replica when
	// replica is not ""): what is there, then, while ctx lasts, what they
	// print next. It returns an errs.ErrNotFound error when the app or the
	// replica has no log.
	TailLogs(ctx context.Context, k Key, replica string, emit func(replica string, lines []*dataplane.LogLine) error) error
}
