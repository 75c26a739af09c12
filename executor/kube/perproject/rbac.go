// Package perproject holds, as markers only, the ClusterRole a manager with
// executor.kubernetes.namespacePerProject needs: `make -C executor
// manifests` writes it to config/rbac-per-project/role.yaml.
//
// Its actions live in a namespace per project and domain that the manager
// creates on first use, so it needs the rules of the namespaced Role
// (kube/rbac.go, whose comments say why each verb is there) in every
// namespace, and to create namespaces and read the ones it finds (to
// refuse those it did not create). TestPerProjectRoleMatches checks that
// the two stay the same but for namespaces.
package perproject

// +kubebuilder:rbac:groups=flyte.org,resources=taskactions,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=flyte.org,resources=taskactions/status,verbs=update
// +kubebuilder:rbac:groups=flyte.org,resources=taskactions/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=list
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;create;update;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;create;update;delete
