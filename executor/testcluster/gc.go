package testcluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// The collector stands in for the garbage collector of kube-controller-manager,
// which envtest does not run, for the resources it is given: an object whose
// owners (metadata.ownerReferences) are all gone is deleted, in the
// background; an owner deleted in the foreground (finalizer
// foregroundDeletion) has its dependents deleted first and then its
// finalizer removed. Owners may be of any kind; dependents are the objects
// of the watched resources.
type collector struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	log    *slog.Logger
	queue  workqueue.TypedRateLimitingInterface[gcItem]
	// informers of the watched resources, each indexed by owner UID.
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	factory   dynamicinformer.DynamicSharedInformerFactory
}

// gcItem is one object to look at: as a dependent (are its owners gone?) or,
// when foreground is set, as an owner being deleted in the foreground.
type gcItem struct {
	gvr             schema.GroupVersionResource
	namespace, name string
	foreground      bool
}

const (
	byOwnerUID            = "ownerUID"
	finalizerForeground   = "foregroundDeletion"
	collectorResyncPeriod = 30 * time.Second
)

// newCollector watches the resources of gvrs that the API server serves
// (others are skipped: a CRD that is not installed).
func newCollector(cfg *rest.Config, gvrs []schema.GroupVersionResource, log *slog.Logger) (*collector, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c := &collector{
		dyn:       dyn,
		mapper:    restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		log:       log,
		queue:     workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[gcItem]()),
		informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		factory:   dynamicinformer.NewDynamicSharedInformerFactory(dyn, collectorResyncPeriod),
	}
	for _, gvr := range gvrs {
		if _, err := c.mapper.KindFor(gvr); err != nil {
			log.Info("garbage collection skips a resource the API server does not serve", "resource", gvr.String())
			continue
		}
		inf := c.factory.ForResource(gvr).Informer()
		if err := inf.AddIndexers(cache.Indexers{byOwnerUID: ownerUIDs}); err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(c.handlers(gvr)); err != nil {
			return nil, err
		}
		c.informers[gvr] = inf
	}
	return c, nil
}

func ownerUIDs(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	var uids []string
	for _, ref := range m.GetOwnerReferences() {
		uids = append(uids, string(ref.UID))
	}
	return uids, nil
}

func (c *collector) handlers(gvr schema.GroupVersionResource) cache.ResourceEventHandler {
	look := func(obj any) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return
		}
		if m.GetDeletionTimestamp() != nil && slices.Contains(m.GetFinalizers(), finalizerForeground) {
			c.queue.Add(gcItem{gvr: gvr, namespace: m.GetNamespace(), name: m.GetName(), foreground: true})
		}
		if len(m.GetOwnerReferences()) > 0 {
			c.queue.Add(gcItem{gvr: gvr, namespace: m.GetNamespace(), name: m.GetName()})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    look,
		UpdateFunc: func(_, obj any) { look(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			m, err := meta.Accessor(obj)
			if err != nil {
				return
			}
			// Its dependents may be orphans now, and an owner deleted in the
			// foreground may be waiting for it.
			c.enqueueDependents(string(m.GetUID()))
			for _, ref := range m.GetOwnerReferences() {
				c.enqueueOwner(ref, m.GetNamespace())
			}
		},
	}
}

func (c *collector) enqueueDependents(uid string) {
	for gvr, inf := range c.informers {
		deps, _ := inf.GetIndexer().ByIndex(byOwnerUID, uid)
		for _, d := range deps {
			if m, err := meta.Accessor(d); err == nil {
				c.queue.Add(gcItem{gvr: gvr, namespace: m.GetNamespace(), name: m.GetName()})
			}
		}
	}
}

// enqueueOwner looks again at an owner that may be waiting in the foreground.
func (c *collector) enqueueOwner(ref metav1.OwnerReference, namespace string) {
	gvr, namespaced, err := c.resourceOf(ref)
	if err != nil {
		return
	}
	if _, watched := c.informers[gvr]; !watched {
		return
	}
	if !namespaced {
		namespace = ""
	}
	c.queue.Add(gcItem{gvr: gvr, namespace: namespace, name: ref.Name, foreground: true})
}

// run starts the informers and works until ctx ends; synced is closed once
// the informers have listed everything.
func (c *collector) run(ctx context.Context, synced chan<- struct{}) {
	c.factory.Start(ctx.Done())
	c.factory.WaitForCacheSync(ctx.Done())
	close(synced)
	go func() { <-ctx.Done(); c.queue.ShutDown() }()
	for {
		item, quit := c.queue.Get()
		if quit {
			c.factory.Shutdown()
			return
		}
		var err error
		if item.foreground {
			err = c.finishForeground(ctx, item)
		} else {
			err = c.collect(ctx, item)
		}
		if err != nil && ctx.Err() == nil {
			c.log.Warn("garbage collection failed; retrying", "resource", item.gvr.Resource, "object", item.namespace+"/"+item.name, "err", err)
			c.queue.AddRateLimited(item)
		} else {
			c.queue.Forget(item)
		}
		c.queue.Done(item)
	}
}

// collect deletes the object when every one of its owners is gone.
func (c *collector) collect(ctx context.Context, item gcItem) error {
	obj, err := c.dyn.Resource(item.gvr).Namespace(item.namespace).Get(ctx, item.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	refs := obj.GetOwnerReferences()
	if len(refs) == 0 || obj.GetDeletionTimestamp() != nil {
		return nil
	}
	for _, ref := range refs {
		exists, err := c.ownerExists(ctx, ref, item.namespace)
		if err != nil || exists {
			return err
		}
	}
	c.log.Debug("deleting an object whose owners are gone", "resource", item.gvr.Resource, "object", item.namespace+"/"+item.name)
	return c.delete(ctx, item.gvr, obj, metav1.DeletePropagationBackground)
}

// finishForeground deletes the dependents of an owner deleted in the
// foreground, and removes its finalizer once none is left.
func (c *collector) finishForeground(ctx context.Context, item gcItem) error {
	res := c.dyn.Resource(item.gvr).Namespace(item.namespace)
	owner, err := res.Get(ctx, item.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if owner.GetDeletionTimestamp() == nil || !slices.Contains(owner.GetFinalizers(), finalizerForeground) {
		return nil
	}
	left := 0
	for gvr, inf := range c.informers {
		deps, _ := inf.GetIndexer().ByIndex(byOwnerUID, string(owner.GetUID()))
		for _, d := range deps {
			dep, ok := d.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			left++
			if dep.GetDeletionTimestamp() == nil {
				if err := c.delete(ctx, gvr, dep, metav1.DeletePropagationForeground); err != nil {
					return err
				}
			}
		}
	}
	if left > 0 {
		return nil // the dependents' deletion events bring the owner back here
	}
	finalizers := slices.DeleteFunc(slices.Clone(owner.GetFinalizers()), func(f string) bool { return f == finalizerForeground })
	owner.SetFinalizers(finalizers)
	_, err = res.Update(ctx, owner, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *collector) delete(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, policy metav1.DeletionPropagation) error {
	uid := obj.GetUID()
	err := c.dyn.Resource(gvr).Namespace(obj.GetNamespace()).Delete(ctx, obj.GetName(), metav1.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or replaced by a new object of that name
	}
	return err
}

// ownerExists reads the owner from the API server (a cache could lag behind
// an owner created a moment ago): it exists when an object of that kind,
// name and UID does.
func (c *collector) ownerExists(ctx context.Context, ref metav1.OwnerReference, namespace string) (bool, error) {
	gvr, namespaced, err := c.resourceOf(ref)
	if err != nil {
		return true, err // unknown kind: keep the dependent, try again later
	}
	if !namespaced {
		namespace = ""
	}
	owner, err := c.dyn.Resource(gvr).Namespace(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	return owner.GetUID() == ref.UID, nil
}

func (c *collector) resourceOf(ref metav1.OwnerReference) (schema.GroupVersionResource, bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("owner reference %s: %w", ref.Name, err)
	}
	m, err := c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("owner reference %s: %w", ref.Name, err)
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}
