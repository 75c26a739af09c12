// Package kube is the Kubernetes executor: the controller-runtime reconciler
// of TaskActions. The markers below are the permissions it needs; `make -C
// executor manifests` turns them into config/rbac/role.yaml.
package kube

// +kubebuilder:rbac:groups=flyte.org,resources=taskactions,verbs=*
// +kubebuilder:rbac:groups=flyte.org,resources=taskactions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flyte.org,resources=taskactions/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=*
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch;list
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=*
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create
