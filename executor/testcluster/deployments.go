package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// The deployment controller stands in for the one of kube-controller-manager
// (envtest runs none), as the collector stands in for its garbage
// collector. It is small on purpose:
//
//   - A Deployment owns its Pods directly (no ReplicaSet): each carries a
//     controller owner reference to it and the label pod-template-hash, a
//     hash of the Deployment's Pod template.
//   - Scaling creates Pods up to spec.replicas and deletes the extra ones,
//     those not ready first, then the newest.
//   - A new template replaces every Pod of an older one at once (no rolling
//     update: maxSurge and maxUnavailable are not read), and a Pod that
//     ended (Failed or Succeeded) is deleted and replaced.
//   - status: replicas (Pods not being deleted), updatedReplicas (of the
//     current template), readyReplicas and availableReplicas (Ready Pods;
//     minReadySeconds is not read), observedGeneration, and the conditions
//     Available (availableReplicas >= spec.replicas) and Progressing.
//
// Reads go to the API server, not to a cache, so that a Pod created a
// moment ago is never created twice; the informers only say when to look.
type deployments struct {
	client kubernetes.Interface
	log    *slog.Logger
	queue  workqueue.TypedRateLimitingInterface[cache.ObjectName]
}

// LabelPodTemplateHash is the label of a Deployment's Pods naming the
// template they were made from.
const LabelPodTemplateHash = "pod-template-hash"

func newDeployments(client kubernetes.Interface, log *slog.Logger) *deployments {
	return &deployments{client: client, log: log,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]())}
}

// run watches Deployments and their Pods until ctx ends; synced is closed
// once the informers synced.
func (d *deployments) run(ctx context.Context, synced chan<- struct{}) {
	f := informers.NewSharedInformerFactory(d.client, collectorResyncPeriod)
	depInf := f.Apps().V1().Deployments().Informer()
	enqueue := func(obj any) {
		if n, err := cache.DeletionHandlingObjectToName(obj); err == nil {
			d.queue.Add(n)
		}
	}
	_, _ = depInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }})
	owner := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Deployment" {
			d.queue.Add(cache.ObjectName{Namespace: p.Namespace, Name: ref.Name})
		}
	}
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: owner, UpdateFunc: func(_, o any) { owner(o) }, DeleteFunc: owner})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	close(synced)
	go func() { <-ctx.Done(); d.queue.ShutDown() }()
	defer f.Shutdown()
	for {
		n, quit := d.queue.Get()
		if quit {
			return
		}
		if err := d.reconcile(ctx, n); err != nil && ctx.Err() == nil {
			d.log.Warn("reconciling a deployment (will retry)", "deployment", n.String(), "err", err)
			d.queue.AddRateLimited(n)
		} else {
			d.queue.Forget(n)
		}
		d.queue.Done(n)
	}
}

// templateHash names a Pod template.
func templateHash(t *corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t)
	h := fnv.New32a()
	_, _ = h.Write(b)
	return fmt.Sprintf("%x", h.Sum32())
}

func (d *deployments) reconcile(ctx context.Context, n cache.ObjectName) error {
	dep, err := d.client.AppsV1().Deployments(n.Namespace).Get(ctx, n.Name, metav1.GetOptions{})
	if kerrors.IsNotFound(err) {
		return nil // its Pods go with it (the collector)
	}
	if err != nil || dep.DeletionTimestamp != nil {
		return err
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return fmt.Errorf("its selector: %w", err)
	}
	list, err := d.client.CoreV1().Pods(n.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return err
	}
	hash := templateHash(&dep.Spec.Template)
	var current []*corev1.Pod
	var all []*corev1.Pod // not being deleted
	for i := range list.Items {
		p := &list.Items[i]
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != dep.UID || p.DeletionTimestamp != nil {
			continue
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded || p.Labels[LabelPodTemplateHash] != hash {
			if err := d.deletePod(ctx, p); err != nil {
				return err
			}
			continue
		}
		all = append(all, p)
		current = append(current, p)
	}
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	for i := int32(len(current)); i < want; i++ {
		p, err := d.createPod(ctx, dep, hash)
		if err != nil {
			return err
		}
		all, current = append(all, p), append(current, p)
	}
	if extra := len(current) - int(want); extra > 0 {
		// Not ready first, then the newest.
		slices.SortStableFunc(current, func(a, b *corev1.Pod) int {
			if ra, rb := podReady(a), podReady(b); ra != rb {
				if !ra {
					return -1
				}
				return 1
			}
			return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
		})
		for _, p := range current[:extra] {
			if err := d.deletePod(ctx, p); err != nil {
				return err
			}
			all = slices.DeleteFunc(all, func(o *corev1.Pod) bool { return o == p })
		}
		current = current[extra:]
	}
	return d.writeStatus(ctx, dep, want, all, current)
}

func (d *deployments) createPod(ctx context.Context, dep *appsv1.Deployment, hash string) (*corev1.Pod, error) {
	t := dep.Spec.Template.DeepCopy()
	lbl := maps.Clone(t.Labels)
	if lbl == nil {
		lbl = map[string]string{}
	}
	lbl[LabelPodTemplateHash] = hash
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: dep.Name + "-" + hash + "-",
			Namespace:    dep.Namespace,
			Labels:       lbl,
			Annotations:  t.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID,
				Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: t.Spec,
	}
	created, err := d.client.CoreV1().Pods(dep.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err == nil {
		d.log.Info("deployment created a pod", "deployment", dep.Namespace+"/"+dep.Name, "pod", created.Name)
	}
	return created, err
}

func (d *deployments) deletePod(ctx context.Context, p *corev1.Pod) error {
	err := d.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if kerrors.IsNotFound(err) || kerrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		d.log.Info("deployment deleted a pod", "pod", p.Namespace+"/"+p.Name, "phase", p.Status.Phase)
	}
	return err
}

func (d *deployments) writeStatus(ctx context.Context, dep *appsv1.Deployment, want int32, all, current []*corev1.Pod) error {
	ready := int32(0)
	for _, p := range all {
		if podReady(p) {
			ready++
		}
	}
	st := dep.Status.DeepCopy()
	st.ObservedGeneration = dep.Generation
	st.Replicas, st.UpdatedReplicas = int32(len(all)), int32(len(current))
	st.ReadyReplicas, st.AvailableReplicas = ready, ready
	st.UnavailableReplicas = max(0, want-ready)
	now := metav1.NewTime(time.Now())
	avail, reason := corev1.ConditionFalse, "MinimumReplicasUnavailable"
	if ready >= want {
		avail, reason = corev1.ConditionTrue, "MinimumReplicasAvailable"
	}
	setDeploymentCondition(st, appsv1.DeploymentAvailable, avail, reason, now)
	progress := "ReplicaSetUpdated"
	if int32(len(current)) == want && ready >= want {
		progress = "NewReplicaSetAvailable"
	}
	setDeploymentCondition(st, appsv1.DeploymentProgressing, corev1.ConditionTrue, progress, now)
	if equality.Semantic.DeepEqual(st, &dep.Status) {
		return nil
	}
	dep = dep.DeepCopy()
	dep.Status = *st
	_, err := d.client.AppsV1().Deployments(dep.Namespace).UpdateStatus(ctx, dep, metav1.UpdateOptions{})
	if kerrors.IsConflict(err) || kerrors.IsNotFound(err) {
		d.queue.Add(cache.ObjectName{Namespace: dep.Namespace, Name: dep.Name}) // look again
		return nil
	}
	return err
}

// setDeploymentCondition sets a condition, keeping its times when nothing
// about it changed.
func setDeploymentCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason string, now metav1.Time) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status || c.Reason != reason {
			c.LastUpdateTime = now
			if c.Status != status {
				c.LastTransitionTime = now
			}
		}
		c.Status, c.Reason = status, reason
		return
	}
	st.Conditions = append(st.Conditions, appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, LastUpdateTime: now, LastTransitionTime: now})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
