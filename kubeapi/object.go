package kubeapi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// An action as a TaskAction: named and labelled as the kubernetes executor
// names its objects (v1.Placement), its spec from the row, its status the
// same projection the executor writes (v1.TaskAction.SetProgress).

func refOf(k store.ActionKey) v1.ActionRef {
	return v1.ActionRef{Org: k.Org, Project: k.Project, Domain: k.Domain, Run: k.RunName, Action: k.Name}
}

// uidOf is a stable UID for key: the same action has the same UID on every
// replica and after a restart, as informers require.
func uidOf(k store.ActionKey) types.UID {
	s := sha256.Sum256([]byte(k.String()))
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16]))
}

// gone reports whether a's object no longer exists: a deleted TaskAction
// aborts its action, so an action whose abort has completed has no object,
// as in the kubernetes executor; one being aborted shows a
// deletionTimestamp until then.
func gone(a *store.Action) bool {
	return a.AbortRequestedAt != nil && a.Phase.Terminal()
}

func (a *API) nameOf(k store.ActionKey) string { return a.d.Placement.NameOf(refOf(k)) }

func (a *API) namespaceOf(k store.ActionKey) string {
	return a.d.Placement.NamespaceOf(k.Project, k.Domain)
}

// objectOf is row as a TaskAction at resource version rv (the row's own
// when 0).
func (a *API) objectOf(row *store.Action, rv int64) *v1.TaskAction {
	if rv == 0 {
		rv = row.ResourceVersion
	}
	ta := &v1.TaskAction{
		TypeMeta: metav1.TypeMeta{Kind: Kind, APIVersion: v1.GroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{
			Name: a.nameOf(row.ActionKey), Namespace: a.namespaceOf(row.ActionKey),
			UID: uidOf(row.ActionKey), ResourceVersion: strconv.FormatInt(rv, 10), Generation: 1,
			CreationTimestamp: metav1.NewTime(row.CreatedAt.Truncate(time.Second)),
		},
		Spec: v1.TaskActionSpec{
			RunName: row.RunName, Project: row.Project, Domain: row.Domain, ActionName: row.Name,
			ParentActionName: row.ParentName, ActionType: v1.ActionTypeTask, InputURI: row.InputURI,
			RunOutputBase: row.RunOutputBase, CacheKey: row.CacheKey, TaskType: row.TaskType,
			ShortName: row.ShortName, Group: row.Group,
		},
	}
	if row.ActionType == store.ActionTypeCondition {
		ta.Spec.ActionType = v1.ActionTypeCondition
	}
	ta.Labels = ta.StandardLabels()
	if row.Org != "" {
		ta.Annotations = map[string]string{v1.AnnotationOrg: row.Org}
	}
	if row.ParentName != nil {
		parent := row.RunKey.Action(*row.ParentName)
		yes := true
		ta.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1.GroupVersion.String(), Kind: Kind,
			Name: a.nameOf(parent), UID: uidOf(parent), Controller: &yes, BlockOwnerDeletion: &yes}}
	}
	if row.AbortRequestedAt != nil && !row.Phase.Terminal() {
		t := metav1.NewTime(*row.AbortRequestedAt)
		ta.DeletionTimestamp = &t
	}
	st := &ta.Status
	st.Attempts = uint32(max(row.Attempts, 0))
	st.CacheStatus = row.CacheStatus
	st.ErrorState = v1.ErrorStateOf(row.ErrorInfo)
	msg := ta.SetProgress(row.Phase, row.Attempts)
	changed := metav1.NewTime(row.UpdatedAt)
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = changed
	}
	ta.RecordPhase(row.Phase.String(), msg, row.UpdatedAt)
	return ta
}

// withHistory fills the object's phase history from the action's events
// (one entry per phase change, across attempts); the list's objects carry
// only the current phase.
func withHistory(ta *v1.TaskAction, evs []store.Event) {
	ta.Status.PhaseHistory = nil
	for _, e := range evs {
		ta.RecordPhase(e.Phase.String(), e.Reason, e.OccurredAt)
	}
}

// eventsOf is the action's history as core/v1 Events of its object, which
// kubectl describe prints.
func eventsOf(ta *v1.TaskAction, evs []store.Event) *corev1.EventList {
	out := &corev1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}}
	for _, e := range evs {
		typ := corev1.EventTypeNormal
		if e.Phase == phase.Failed || e.Phase == phase.TimedOut || e.Phase == phase.Aborted {
			typ = corev1.EventTypeWarning
		}
		msg := fmt.Sprintf("attempt %d: %s", e.Attempt, e.Phase)
		if e.Reason != "" {
			msg += ": " + e.Reason
		}
		at := metav1.NewTime(e.OccurredAt)
		out.Items = append(out.Items, corev1.Event{
			TypeMeta:   metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", ta.Name, e.ID), Namespace: ta.Namespace},
			InvolvedObject: corev1.ObjectReference{Kind: Kind, APIVersion: v1.GroupVersion.String(),
				Name: ta.Name, Namespace: ta.Namespace, UID: ta.UID},
			Reason: phaseReason(e.Phase), Message: msg, Type: typ, Count: 1,
			FirstTimestamp: at, LastTimestamp: at, Source: corev1.EventSource{Component: "flyte-manager"},
		})
	}
	return out
}

// phaseReason is a phase in the CamelCase of Kubernetes event reasons.
func phaseReason(p phase.Phase) string {
	switch p {
	case phase.Queued:
		return "Queued"
	case phase.WaitingForResources:
		return "WaitingForResources"
	case phase.Initializing:
		return "Initializing"
	case phase.Running:
		return "Running"
	case phase.Succeeded:
		return "Succeeded"
	case phase.Failed:
		return "Failed"
	case phase.Aborted:
		return "Aborted"
	case phase.TimedOut:
		return "TimedOut"
	case phase.Paused:
		return "Paused"
	case phase.Recovered:
		return "Recovered"
	}
	return "Unknown"
}

// find returns the action whose object is ns/name, nil when there is none
// (or it is gone). Object names are not reversible in general (a hashed
// name, a project or run holding '-', an org prefix), so it first looks up
// the key a plain name spells (by the actions' unique index), then the run
// and action its last two parts name, and otherwise scans.
func (a *API) find(ctx context.Context, ns, name string) (*store.Action, error) {
	match := func(row *store.Action) bool {
		return a.nameOf(row.ActionKey) == name && a.namespaceOf(row.ActionKey) == ns
	}
	for _, f := range a.guesses(ns, name) {
		page, err := a.d.Actions.ListAll(ctx, f, 0, store.MaxPageSize)
		if err != nil {
			return nil, err
		}
		for i := range page.Actions {
			if match(&page.Actions[i]) {
				return seen(ctx, visible(&page.Actions[i])), nil
			}
		}
	}
	var found *store.Action
	err := a.each(ctx, store.AllFilter{}, func(row *store.Action) bool {
		if match(row) {
			found = row
			return false
		}
		return true
	})
	if err != nil || found == nil {
		return nil, err
	}
	return seen(ctx, visible(found)), nil
}

// guesses are the filters that may find the action named ns/name, most
// precise first.
func (a *API) guesses(ns, name string) []store.AllFilter {
	parts := strings.Split(name, "-")
	if len(parts) < 2 {
		return nil
	}
	run, action := parts[len(parts)-2], parts[len(parts)-1]
	var out []store.AllFilter
	if a.d.Placement.NamespacePerProject {
		if i := strings.LastIndexByte(ns, '-'); i > 0 {
			out = append(out, store.AllFilter{ExactOrg: true, Project: ns[:i], Domain: ns[i+1:], RunName: run, Name: action})
		}
	} else if len(parts) >= 4 {
		out = append(out, store.AllFilter{ExactOrg: true, Project: strings.Join(parts[:len(parts)-3], "-"),
			Domain: parts[len(parts)-3], RunName: run, Name: action})
	}
	return append(out, store.AllFilter{RunName: run, Name: action})
}

func visible(row *store.Action) *store.Action {
	if gone(row) {
		return nil
	}
	return row
}

// each calls fn for every action f selects, page by page, until fn returns
// false.
func (a *API) each(ctx context.Context, f store.AllFilter, fn func(*store.Action) bool) error {
	var after int64
	for {
		page, err := a.d.Actions.ListAll(ctx, f, after, store.MaxPageSize)
		if err != nil {
			return err
		}
		for i := range page.Actions {
			if !fn(&page.Actions[i]) {
				return nil
			}
			after = page.Actions[i].ID
		}
		if !page.More {
			return nil
		}
	}
}
