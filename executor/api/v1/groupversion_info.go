// Package v1 is the TaskAction API, group flyte.org, version v1: the custom
// resource through which the Kubernetes executor runs one action. The manager
// creates a TaskAction per action it enqueues; the reconciler turns each
// attempt into a Pod and reports progress in the status (conditions, attempt
// counters, phase history), which the manager folds back into its database.
//
// The CRD YAML (config/crd/bases) and zz_generated.deepcopy.go are generated
// from the markers in this package: run `make -C executor manifests generate`
// after changing a type.
//
// +kubebuilder:object:generate=true
// +groupName=flyte.org
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of every type here.
	GroupVersion = schema.GroupVersion{Group: "flyte.org", Version: "v1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds TaskAction and TaskActionList to a scheme, e.g. the
	// one a controller-runtime client or manager is built with.
	AddToScheme = SchemeBuilder.AddToScheme
)
