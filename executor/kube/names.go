package kube

import (
	"strconv"

	"k8s.io/apimachinery/pkg/types"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/internal/store"
)

// Where an action's objects live (v1.Placement). Names are derived from the
// action's key alone, so a reconcile finds an action's TaskAction and Pods
// without a lookup table, and a restarted manager finds the same objects.

// placement is the driver's configuration as a v1.Placement.
func (d *Driver) placement() v1.Placement {
	return v1.Placement{Namespace: d.cfg.Namespace, NamespacePerProject: d.cfg.NamespacePerProject}
}

// namespaceOf is the namespace of key's objects.
func (d *Driver) namespaceOf(key store.ActionKey) string {
	return d.placement().NamespaceOf(key.Project, key.Domain)
}

// nameOf is the TaskAction of key.
func (d *Driver) nameOf(key store.ActionKey) types.NamespacedName {
	return types.NamespacedName{Namespace: d.namespaceOf(key), Name: d.placement().NameOf(refOf(key))}
}

// refOf is key as a v1.ActionRef.
func refOf(key store.ActionKey) v1.ActionRef {
	return v1.ActionRef{Org: key.Org, Project: key.Project, Domain: key.Domain, Run: key.RunName, Action: key.Name}
}

// keyOf is the action a TaskAction stands for.
func keyOf(ta *v1.TaskAction) store.ActionKey {
	return store.ActionKey{
		RunKey: store.RunKey{Org: ta.Annotations[annotationOrg], Project: ta.Spec.Project, Domain: ta.Spec.Domain, RunName: ta.Spec.RunName},
		Name:   ta.Spec.ActionName,
	}
}

// podName is the Pod of attempt n of ta.
func podName(ta *v1.TaskAction, n int32) string { return podNameFor(ta.Name, n) }

// podNameFor is the Pod of attempt n of the TaskAction named name.
func podNameFor(name string, n int32) string { return v1.ObjectName(name, strconv.Itoa(int(n))) }

// Labels and annotations of the objects the driver creates, besides the
// flyte.org labels of v1.
const (
	// annotationOrg keeps the action's org, which is not a spec field.
	annotationOrg = v1.AnnotationOrg
	// LabelManaged marks the TaskActions and Pods a manager created: its
	// Pod cache watches only those, and a TaskAction without it is one a
	// user created (see adopt).
	LabelManaged = "flyte.org/managed-by"
	managedBy    = "flyte-manager"
	labelAttempt = "flyte.org/attempt"
	labelTask    = "flyte.org/task-name"
	// containerName is the task's container in its Pod.
	containerName = "task"
)
