package kube

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/machine"
	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/task"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

func metaOf(name types.NamespacedName) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name}
}

// create makes the TaskAction of a new action: its spec from the action's
// row and TaskSpec, the flyte.org labels, the finalizer (set at creation,
// which saves a write), and for a child an owner reference to its parent's
// TaskAction, so deleting a run's root deletes the whole tree.
func (d *Driver) create(ctx context.Context, name types.NamespacedName, a *store.Action) error {
	spec, err := d.core.Spec(ctx, a)
	var bad attempt.BadSpecError
	if errors.As(err, &bad) {
		_, err := d.apply(ctx, nil, a, nil, failedSpec(a, bad.Error()), attempt.Record{})
		return err
	}
	if err != nil {
		return err
	}
	tmpl, err := proto.Marshal(spec.GetTaskTemplate())
	if err != nil {
		return err
	}
	ta := &v1.TaskAction{ObjectMeta: metaOf(name), Spec: v1.TaskActionSpec{
		RunName:          a.RunName,
		Project:          a.Project,
		Domain:           a.Domain,
		ActionName:       a.Name,
		ParentActionName: a.ParentName,
		ActionType:       v1.ActionTypeTask,
		InputURI:         a.InputURI,
		RunOutputBase:    a.RunOutputBase,
		TaskType:         a.TaskType,
		ShortName:        truncate(a.ShortName, 63),
		TaskTemplate:     tmpl,
		Group:            truncate(a.Group, 256),
	}}
	ta.Labels = ta.StandardLabels()
	ta.Labels[LabelManaged] = managedBy
	ta.Annotations = map[string]string{}
	if a.Org != "" {
		ta.Annotations[annotationOrg] = a.Org
	}
	ta.Finalizers = []string{v1.Finalizer}
	if a.IsRoot() {
		rs := &task.RunSpec{}
		if proto.Unmarshal(a.RunSpec, rs) == nil {
			for _, kv := range rs.GetEnvs().GetValues() {
				if ta.Spec.EnvVars == nil {
					ta.Spec.EnvVars = map[string]string{}
				}
				ta.Spec.EnvVars[kv.GetKey()] = kv.GetValue()
			}
			if b := rs.GetInterruptible(); b != nil {
				v := b.GetValue()
				ta.Spec.Interruptible = &v
			}
		}
	} else {
		parent := &v1.TaskAction{}
		err := d.client.Get(ctx, d.nameOf(a.RunKey.Action(*a.ParentName)), parent)
		switch {
		case err == nil:
			yes := true
			ta.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1.GroupVersion.String(), Kind: "TaskAction",
				Name: parent.Name, UID: parent.UID, BlockOwnerDeletion: &yes}}
		case apierrors.IsNotFound(err):
			d.log.Warn("creating a child's TaskAction without its parent's (deleting the parent will not delete it)", "action", a.ActionKey.String())
		default:
			return err
		}
	}
	if err := d.ensureNamespace(ctx, a.ActionKey, name.Namespace); err != nil {
		var r refusal
		if errors.As(err, &r) {
			_, err = d.apply(ctx, nil, a, nil, refused(a, r), attempt.Record{})
		}
		return err
	}
	if err := d.client.Create(ctx, ta); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the TaskAction of %s: %w", a.ActionKey, err)
	}
	return nil
}

func failedSpec(a *store.Action, msg string) machine.Failed {
	return machine.Failed{Attempt: uint32(a.Attempts), Kind: machine.KindSystem, Code: attempt.CodeBadTaskSpec, Message: msg}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// buildPod builds the Pod of launch l, with the PodTemplate the task names
// (TaskMetadata.pod_template_name, in the TaskAction's namespace).
func (d *Driver) buildPod(ctx context.Context, ta *v1.TaskAction, l *attempt.Launch) (*corev1.Pod, error) {
	if err := d.checkServiceAccount(keyOf(ta), l.Spec.GetTaskTemplate().GetSecurityContext().GetRunAs().GetK8SServiceAccount()); err != nil {
		return nil, err // the caller fails the action with it, not retried
	}
	o := podSpec{serviceAccount: d.cfg.ServiceAccount,
		raw: d.rawOptions()}
	var err error
	if o.build, err = d.imageBuild(l); err != nil {
		return nil, err
	}
	if name := l.Spec.GetTaskTemplate().GetMetadata().GetPodTemplateName(); name != "" {
		pt := &corev1.PodTemplate{}
		if err := d.reader.Get(ctx, types.NamespacedName{Namespace: ta.Namespace, Name: name}, pt); err != nil {
			return nil, fmt.Errorf("the task's pod template %q in namespace %s: %w", name, ta.Namespace, err)
		}
		o.base = &pt.Template
	}
	return buildPod(ta, l, o)
}

// reject fails a TaskAction the manager will not run, in its status.
func (d *Driver) reject(ctx context.Context, ta *v1.TaskAction, reason, msg string) error {
	ta.SetCondition(v1.ConditionProgressing, metav1.ConditionFalse, reason, msg)
	ta.SetCondition(v1.ConditionFailed, metav1.ConditionTrue, reason, msg)
	ta.Status.ErrorState = &v1.ErrorState{Code: reason, Kind: v1.ErrorKindUser, Message: msg}
	d.warn(ta, reason, msg)
	return d.client.Status().Update(ctx, ta)
}

// misnamed handles a TaskAction whose name is not the one the manager
// gives its action: the manager would make a second TaskAction (and a
// second Pod) for the same action, so it refuses this one instead, saying
// what to call it. One a manager made is another manager's (see adopt).
func (d *Driver) misnamed(ctx context.Context, ta *v1.TaskAction, key store.ActionKey) error {
	if ta.DeletionTimestamp != nil {
		return d.removeFinalizer(ctx, ta)
	}
	if ta.IsTerminal() || ta.Labels[LabelManaged] == managedBy {
		return nil
	}
	want := d.nameOf(key)
	return d.reject(ctx, ta, v1.ReasonInvalidSpec, fmt.Sprintf(
		"the TaskAction of run %s action %s is named %s in namespace %s; create it under that name", key.RunName, key.Name, want.Name, want.Namespace))
}

// adopt handles a TaskAction the database knows nothing of and no manager
// made: one created with kubectl (config/samples). A root action becomes a new run, as if
// CreateRun had been called with its spec; anything else is refused in its
// status, visibly, and left alone.
func (d *Driver) adopt(ctx context.Context, ta *v1.TaskAction) (ctrl.Result, error) {
	if ta.DeletionTimestamp != nil {
		return ctrl.Result{}, d.removeFinalizer(ctx, ta)
	}
	if ta.IsTerminal() {
		return ctrl.Result{}, nil
	}
	if ta.Labels[LabelManaged] == managedBy {
		// A manager made it, but not over this database (another manager
		// sharing the namespace, or a database that was replaced): not
		// ours to run or to refuse.
		d.log.Debug("ignoring a TaskAction of another manager", "taskaction", client.ObjectKeyFromObject(ta).String())
		return ctrl.Result{}, nil
	}
	reject := func(reason, msg string) (ctrl.Result, error) { return ctrl.Result{}, d.reject(ctx, ta, reason, msg) }
	switch {
	case ta.Type() != v1.ActionTypeTask:
		return reject(v1.ReasonPluginNotFound, "condition actions are created by their parent's task, not with kubectl")
	case !ta.IsRoot():
		return reject(v1.ReasonInvalidSpec, "child actions are created by their parent's task; create a run's root action (a0) instead")
	case ta.Spec.ActionName != "a0":
		return reject(v1.ReasonInvalidSpec, fmt.Sprintf("a run's root action is named a0, not %q", ta.Spec.ActionName))
	}
	tmpl := &core.TaskTemplate{}
	if err := proto.Unmarshal(ta.Spec.TaskTemplate, tmpl); err != nil || len(ta.Spec.TaskTemplate) == 0 {
		return reject(v1.ReasonInvalidSpec, "spec.taskTemplate is not a serialized flyteidl2.core.TaskTemplate")
	}
	req := &workflow.CreateRunRequest{
		Id: &workflow.CreateRunRequest_RunId{RunId: &common.RunIdentifier{Org: ta.Annotations[annotationOrg],
			Project: ta.Spec.Project, Domain: ta.Spec.Domain, Name: ta.Spec.RunName}},
		Task:    &workflow.CreateRunRequest_TaskSpec{TaskSpec: &task.TaskSpec{TaskTemplate: tmpl, ShortName: ta.Spec.ShortName}},
		RunSpec: &task.RunSpec{RunBaseDir: ta.Spec.RunOutputBase},
	}
	if ta.Spec.InputURI != "" {
		req.InputWrapper = &workflow.CreateRunRequest_OffloadedInputData{OffloadedInputData: &common.OffloadedInputData{Uri: ta.Spec.InputURI}}
	} else {
		req.InputWrapper = &workflow.CreateRunRequest_Inputs{Inputs: &task.Inputs{}}
	}
	for k, v := range ta.Spec.EnvVars {
		if req.RunSpec.Envs == nil {
			req.RunSpec.Envs = &task.Envs{}
		}
		req.RunSpec.Envs.Values = append(req.RunSpec.Envs.Values, &core.KeyValuePair{Key: k, Value: v})
	}
	if _, err := d.state.CreateRun(ctx, req); err != nil {
		if _, internal := errs.ToConnect(err); internal {
			return ctrl.Result{}, err // the database, not the spec: try again
		}
		return reject(v1.ReasonInvalidSpec, "the manager refused this run: "+err.Error())
	}
	d.log.Info("adopted a TaskAction created outside the manager as a new run", "taskaction", client.ObjectKeyFromObject(ta).String())
	if controllerutil.AddFinalizer(ta, v1.Finalizer) {
		if err := d.client.Update(ctx, ta); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{Requeue: true}, nil
}
