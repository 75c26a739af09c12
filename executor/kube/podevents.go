package kube

// The Kubernetes Events of an attempt's Pod (Scheduled, Pulling, BackOff,
// FailedMount...) go into the action's history as cluster events, through
// the attempt core like every other record, each once.

import (
	"context"
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/store"
)

// podEventsSeen is what the driver knows of one action's reported Pod
// events: for which attempt, the Pod version it last looked at, and the
// events already in the history.
type podEventsSeen struct {
	attempt int32
	podRV   string
	keys    map[string]bool
}

// reportPodEvents records the Pod's events not yet in a's history. It looks
// only when the Pod changed since the last look (the events that matter
// come with a change of the Pod's status). A failure to list them (a role
// without the permission) costs the history its cluster events, not the
// attempt: it is logged and the attempt goes on.
func (d *Driver) reportPodEvents(ctx context.Context, a *store.Action, pod *corev1.Pod) (*store.Action, error) {
	d.mu.Lock()
	seen := d.podEvents[a.ActionKey]
	d.mu.Unlock()
	if seen != nil && seen.attempt == a.Attempts && seen.podRV == pod.ResourceVersion {
		return a, nil
	}
	if seen == nil || seen.attempt != a.Attempts {
		var err error
		if seen, err = d.reportedPodEvents(ctx, a); err != nil {
			return a, err
		}
	}
	var list corev1.EventList
	if err := d.reader.List(ctx, &list, client.InNamespace(pod.Namespace), client.MatchingFields{"involvedObject.uid": string(pod.UID)}); err != nil {
		d.log.Warn("listing the events of a Pod", "action", a.ActionKey.String(), "pod", pod.Name, "err", err)
		return a, nil
	}
	var news []*workflow.ClusterEvent
	for i := range list.Items {
		ce := clusterEventOf(&list.Items[i])
		if k := clusterEventKey(ce); !seen.keys[k] {
			seen.keys[k] = true
			news = append(news, ce)
		}
	}
	sort.SliceStable(news, func(i, j int) bool { return news[i].GetOccurredAt().AsTime().Before(news[j].GetOccurredAt().AsTime()) })
	if len(news) > 0 {
		updated, err := d.core.ReportClusterEvents(ctx, a, news)
		if err != nil {
			return a, err // not marked seen: the next pass reports them
		}
		d.own.add(updated.ResourceVersion)
		a = updated
	}
	seen.podRV = pod.ResourceVersion
	d.mu.Lock()
	d.podEvents[a.ActionKey] = seen
	d.mu.Unlock()
	return a, nil
}

// reportedPodEvents reads which cluster events of a's current attempt the
// history holds: a restarted manager reports none of them again.
func (d *Driver) reportedPodEvents(ctx context.Context, a *store.Action) (*podEventsSeen, error) {
	seen := &podEventsSeen{attempt: a.Attempts, keys: map[string]bool{}}
	evs, err := d.state.Events(ctx, a.ActionKey)
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		ae := &workflow.ActionEvent{}
		if e.Attempt != a.Attempts || len(e.Info) == 0 || proto.Unmarshal(e.Info, ae) != nil {
			continue
		}
		for _, ce := range ae.GetClusterEvents() {
			seen.keys[clusterEventKey(ce)] = true
		}
	}
	return seen, nil
}

// forgetPodEvents drops what was remembered for an action that ended.
func (d *Driver) forgetPodEvents(key store.ActionKey) {
	d.mu.Lock()
	delete(d.podEvents, key)
	d.mu.Unlock()
}

// clusterEventKey tells a Pod event apart from the others, and from itself
// seen again later with a higher count.
func clusterEventKey(ce *workflow.ClusterEvent) string {
	return fmt.Sprintf("%s|%s|%s|%d|%d", ce.GetSourceComponent(), ce.GetReason(), ce.GetMessage(), ce.GetCount(), ce.GetOccurredAt().GetSeconds())
}

func clusterEventOf(ev *corev1.Event) *workflow.ClusterEvent {
	at := ev.LastTimestamp.Time // the latest occurrence; older clients set only some of the times
	if at.IsZero() {
		at = ev.EventTime.Time
	}
	if at.IsZero() {
		at = ev.FirstTimestamp.Time
	}
	if at.IsZero() {
		at = ev.CreationTimestamp.Time
	}
	typ := workflow.ClusterEvent_TYPE_NORMAL
	if ev.Type == corev1.EventTypeWarning {
		typ = workflow.ClusterEvent_TYPE_WARNING
	}
	source := ev.Source.Component
	if source == "" {
		source = ev.ReportingController
	}
	count := ev.Count
	if ev.Series != nil && ev.Series.Count > count {
		count = ev.Series.Count
	}
	return &workflow.ClusterEvent{
		OccurredAt:      timestamppb.New(at),
		Message:         ev.Message,
		Type:            typ,
		Reason:          ev.Reason,
		SourceComponent: source,
		Count:           count,
	}
}
