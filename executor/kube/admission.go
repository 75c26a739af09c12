package kube

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/machine"
	"fmgr.dev/internal/store"
)

// What an action may use of the cluster. A task must not reach beyond what
// its project was given: a namespace someone else made (its quotas, its
// secrets, its other workloads), or a service account with more rights
// than the configuration grants the project. Either is refused before
// anything is created, and the action fails at once (retrying cannot make
// it allowed), naming what was refused and the key that allows it.

// refusal is a launch the configuration does not allow.
type refusal struct{ msg string }

func (r refusal) Error() string { return r.msg }

// refused is the failure that records r: not recoverable, so not retried.
func refused(a *store.Action, r refusal) machine.Failed {
	return machine.Failed{Attempt: uint32(a.Attempts), Kind: machine.KindUser, Code: attempt.CodeLaunchFailed, Message: r.msg}
}

// ensureNamespace creates the namespace of key's project and domain on
// first use (with namespacePerProject; the shared namespace is the
// administrator's), labelled as the manager's and the project's. One that
// exists is used only when those labels say it is this project's: the
// manager never runs tasks in a namespace it did not make, nor in another
// project's whose name happens to be the same ("a-b" of domain "c" and "a"
// of domain "b-c").
func (d *Driver) ensureNamespace(ctx context.Context, key store.ActionKey, ns string) error {
	if !d.cfg.NamespacePerProject {
		return nil
	}
	d.mu.Lock()
	known := d.namespaces[ns]
	d.mu.Unlock()
	if known {
		return nil
	}
	want := map[string]string{LabelManaged: managedBy,
		v1.LabelProject: v1.LabelValue(key.Project), v1.LabelDomain: v1.LabelValue(key.Domain)}
	err := d.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: want}})
	if apierrors.IsAlreadyExists(err) {
		// The uncached reader: a namespace informer would need list and
		// watch of every namespace for this one read.
		have := &corev1.Namespace{}
		if err := d.reader.Get(ctx, types.NamespacedName{Name: ns}, have); err != nil {
			return fmt.Errorf("reading namespace %s: %w", ns, err)
		}
		if err := namespaceOwned(have, key, want); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	d.mu.Lock()
	d.namespaces[ns] = true
	d.mu.Unlock()
	return nil
}

// namespaceOwned refuses ns unless its labels are want's.
func namespaceOwned(ns *corev1.Namespace, key store.ActionKey, want map[string]string) error {
	if ns.Labels[LabelManaged] != managedBy {
		return refusal{fmt.Sprintf("namespace %s of project %s domain %s exists but was not created by flyte-manager (no label %s=%s): "+
			"the manager runs tasks only in namespaces it created; delete it, or label it %s=%s %s=%s %s=%s to hand it over "+
			"(executor.kubernetes.namespacePerProject)", ns.Name, key.Project, key.Domain, LabelManaged, managedBy,
			LabelManaged, managedBy, v1.LabelProject, want[v1.LabelProject], v1.LabelDomain, want[v1.LabelDomain])}
	}
	for _, l := range []string{v1.LabelProject, v1.LabelDomain} {
		if got, ok := ns.Labels[l]; ok && got != want[l] {
			return refusal{fmt.Sprintf("namespace %s belongs to project %s domain %s, not to project %s domain %s, whose namespace has the same name "+
				"(executor.kubernetes.namespacePerProject)", ns.Name, ns.Labels[v1.LabelProject], ns.Labels[v1.LabelDomain], key.Project, key.Domain)}
		}
	}
	return nil
}

// checkServiceAccount refuses the service account a task of key asks for
// (security_context.run_as.k8s_service_account) unless it is the
// configured one or a grant of key's project and domain lists it. A task
// that asks for none runs as the configured one (or its PodTemplate's).
func (d *Driver) checkServiceAccount(key store.ActionKey, asked string) error {
	if asked == "" || asked == d.cfg.ServiceAccount {
		return nil
	}
	for _, g := range d.cfg.ServiceAccounts {
		if (g.Project == "" || g.Project == key.Project) && (g.Domain == "" || g.Domain == key.Domain) && slices.Contains(g.Allow, asked) {
			return nil
		}
	}
	return refusal{fmt.Sprintf("the task asks for service account %q, which project %s domain %s may not use: "+
		"allow it under executor.kubernetes.serviceAccounts (project %s, domain %s), or run the task as executor.kubernetes.serviceAccount (%q)",
		asked, key.Project, key.Domain, key.Project, key.Domain, d.cfg.ServiceAccount)}
}
