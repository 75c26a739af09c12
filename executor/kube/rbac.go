// Package kube is the Kubernetes executor: the controller-runtime reconciler
// of TaskActions. The markers below are the permissions it needs; `make -C
// executor manifests` turns them into config/rbac/role.yaml.
//
// They are a Role in the one namespace the manager works in by default
// (namespace=flyte is executor.kubernetes.namespace's default; a
// kustomization's namespace: moves it): nothing outside that namespace, and
// only the verbs the driver uses (rbac_test.go runs the driver with
// nothing else). With namespacePerProject the same rules, and creating
// namespaces, are needed in every namespace: that ClusterRole is generated
// from package perproject into config/rbac-per-project.
package kube

// TaskActions: read through the informer (list, watch) and the uncached
// reader (get); created per action; updated to add or remove the finalizer;
// deleted by garbage collection. Their status is written with update (never
// patched). Updating finalizers is what an owner reference with
// blockOwnerDeletion (a child's, a Pod's) asks of its creator where the API
// server enforces it (OwnerReferencesPermissionEnforcement).
// +kubebuilder:rbac:groups=flyte.org,resources=taskactions,verbs=get;list;watch;create;update;delete,namespace=flyte
// +kubebuilder:rbac:groups=flyte.org,resources=taskactions/status,verbs=update,namespace=flyte
// +kubebuilder:rbac:groups=flyte.org,resources=taskactions/finalizers,verbs=update,namespace=flyte

// Pods: one per attempt, read through the informer and, when it lags, the
// reader; deleted to stop an attempt (abort, timeout). Their logs serve
// TailLogs.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete,namespace=flyte
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get,namespace=flyte

// PodTemplates a task names, read once per launch (no informer).
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get,namespace=flyte

// An attempt's secrets: a Secret per attempt, created (replaced when a
// restarted manager launches the attempt again) and deleted when its Pod
// ends. The manager never reads a Secret.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;update;delete,namespace=flyte

// Events: the driver's own about TaskActions (events.k8s.io, created and
// patched as a series), and a Pod's listed into its attempt's history.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch,namespace=flyte
// +kubebuilder:rbac:groups="",resources=events,verbs=list,namespace=flyte

// Apps (appruntime.go): a Deployment and a Service per app, read with the
// uncached client (get), created, updated to a new revision or scale,
// deleted with the app. Their Pods are listed with the pods rule above.
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;create;update;delete,namespace=flyte
// +kubebuilder:rbac:groups="",resources=services,verbs=get;create;update;delete,namespace=flyte
