package nodeagent

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
)

// scheduler binds every Pod without a node to the agent's node: the test
// cluster has one node and no kube-scheduler.
type scheduler struct {
	client kubernetes.Interface
	node   string
	log    *slog.Logger
	queue  workqueue.TypedRateLimitingInterface[unbound]
}

type unbound struct {
	namespace, name string
	uid             types.UID
}

func newScheduler(client kubernetes.Interface, node string, log *slog.Logger) *scheduler {
	return &scheduler{
		client: client, node: node, log: log,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[unbound]()),
	}
}

func (s *scheduler) enqueue(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || terminal(pod) {
		return
	}
	s.queue.Add(unbound{pod.Namespace, pod.Name, pod.UID})
}

func (s *scheduler) run(ctx context.Context) {
	for {
		p, quit := s.queue.Get()
		if quit {
			return
		}
		err := s.bind(ctx, p)
		switch {
		case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsInvalid(err):
			// Bound, gone, bound by someone else, or deleted meanwhile.
			s.queue.Forget(p)
		case ctx.Err() == nil:
			s.log.Warn("binding a pod failed; retrying", "pod", p.namespace+"/"+p.name, "err", err)
			s.queue.AddRateLimited(p)
		}
		s.queue.Done(p)
	}
}

// bind is what a scheduler writes: a Binding, which sets spec.nodeName and
// the PodScheduled condition in one step.
func (s *scheduler) bind(ctx context.Context, p unbound) error {
	return s.client.CoreV1().Pods(p.namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: p.name, UID: p.uid},
		Target:     corev1.ObjectReference{Kind: "Node", Name: s.node},
	}, metav1.CreateOptions{})
}

func (s *scheduler) shutdown() { s.queue.ShutDown() }
