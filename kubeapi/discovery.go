package kubeapi

import (
	"net/http"
	"runtime"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	v1 "fmgr.dev/executor/api/v1"
)

// Discovery. kubectl asks /api and /apis for the aggregated form (v2) and
// reads the answer's Content-Type to tell which it got; the legacy form
// (an APIGroupList, then /apis/flyte.org/v1) serves older clients. /api,
// the core group, is not served: clients tolerate its 404.

var verbs = []string{"delete", "get", "list", "watch"}

const aggregatedV2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// wantsAggregated reports whether the Accept header asks for the v2
// aggregated discovery document.
func wantsAggregated(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if strings.Contains(part, "g=apidiscovery.k8s.io") && strings.Contains(part, "v=v2") &&
			!strings.Contains(part, "v=v2beta1") && strings.Contains(part, "as=APIGroupDiscoveryList") {
			return true
		}
	}
	return false
}

func (a *API) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, "application/json", version.Info{
		Major: "1", Minor: "35", GitVersion: "v1.35.0-flyte-manager+" + a.d.Version,
		GitTreeState: "clean", GoVersion: runtime.Version(), Compiler: runtime.Compiler,
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	})
}

func groupVersion() metav1.GroupVersionForDiscovery {
	return metav1.GroupVersionForDiscovery{GroupVersion: v1.GroupVersion.String(), Version: v1.GroupVersion.Version}
}

func apiGroup() metav1.APIGroup {
	return metav1.APIGroup{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:     v1.GroupVersion.Group, Versions: []metav1.GroupVersionForDiscovery{groupVersion()},
		PreferredVersion: groupVersion(),
	}
}

func (a *API) groups(w http.ResponseWriter, r *http.Request) {
	if wantsAggregated(r) {
		writeJSON(w, http.StatusOK, aggregatedV2, apidiscoveryv2.APIGroupDiscoveryList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"},
			Items: []apidiscoveryv2.APIGroupDiscovery{{
				ObjectMeta: metav1.ObjectMeta{Name: v1.GroupVersion.Group},
				Versions: []apidiscoveryv2.APIVersionDiscovery{{
					Version:   v1.GroupVersion.Version,
					Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
					Resources: []apidiscoveryv2.APIResourceDiscovery{{
						Resource: Resource, SingularResource: Singular,
						ResponseKind: &metav1.GroupVersionKind{Group: v1.GroupVersion.Group, Version: v1.GroupVersion.Version, Kind: Kind},
						Scope:        apidiscoveryv2.ScopeNamespace, Verbs: verbs,
					}},
				}},
			}},
		})
		return
	}
	writeJSON(w, http.StatusOK, "application/json", metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   []metav1.APIGroup{apiGroup()},
	})
}

func (a *API) group(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, "application/json", apiGroup())
}

func (a *API) resources(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, "application/json", metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: v1.GroupVersion.String(),
		APIResources: []metav1.APIResource{{
			Name: Resource, SingularName: Singular, Namespaced: true, Kind: Kind, Verbs: verbs,
		}},
	})
}
