package kube

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/executor/testcluster"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
)

// The driver needs nothing but the generated Role in its namespace: it runs
// as a service account holding only that Role (the test cluster's API
// server enforces RBAC) through a run with a secret and a child, a
// PodTemplate, an abort, logs and garbage collection. Every request it
// makes is recorded: none may be refused, and every verb the Role grants
// must have been used, but for the few whose path such a run cannot take.
func TestGeneratedRoleSuffices(t *testing.T) {
	role := loadRole(t)
	rec := &requests{seen: map[string]int{}}
	var granted *rest.Config
	h := newHarnessOpts(t, dbtest.SQLiteDSN(t), harnessOpts{
		hooks: secretHooks(t, map[string]string{"api-token": "tok"}),
		asDriver: func(c *testcluster.Cluster) *rest.Config {
			granted = grantRole(t, c, role, rec)
			return granted
		},
	}, func(c *config.KubernetesExecutor) {
		c.GCInterval, c.GCTTL = 200*time.Millisecond, 0 // ended runs' TaskActions go at once: deletes and finalizers
	})
	if err := h.k.Create(h.ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "flyte", Name: "tmpl"},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "primary", Image: "x"}}}}}); err != nil {
		t.Fatal(err)
	}

	parent := h.run("rparent", `[ "$API_TOKEN" = tok ] || exit 3
touch "$FIXTURES/parent-started"
while [ ! -e "$FIXTURES/release" ]; do sleep 0.1; done
`+succeed, taskOpts{secrets: []*core.Secret{{Key: "api-token", MountRequirement: core.Secret_ENV_VAR, EnvVar: "API_TOKEN"}}})
	h.started("parent-started")
	child := h.child(parent, "c1", succeed)
	h.terminal(child, phase.Succeeded)
	if err := h.d.Logs(h.ctx, parent, 0, false, func([]*dataplane.LogLine) error { return nil }); err == nil {
		t.Log("the test cluster served a Pod's log") // it has no kubelet: the request is what counts
	}
	if err := os.WriteFile(filepath.Join(h.fixtures, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.terminal(parent, phase.Succeeded)

	aborted := h.run("rabort", `touch "$FIXTURES/abort-started"; sleep 600`, taskOpts{podTemplate: "tmpl"})
	h.started("abort-started")
	if err := h.state.Abort(h.ctx, aborted, "the test aborts it", ""); err != nil {
		t.Fatal(err)
	}
	h.terminal(aborted, phase.Aborted)
	h.eventually("garbage collection to delete every TaskAction", func() bool {
		var list v1.TaskActionList
		return h.k.List(h.ctx, &list) == nil && len(list.Items) == 0
	})

	// Apps under the same Role: created, updated, deleted.
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(granted, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	apps := NewApps(AppsConfig{Client: kc, Placement: v1.Placement{Namespace: "flyte"}, Endpoint: func() string { return "manager:8090" },
		Reporter: &reports{}, Log: testLog()})
	app := appTarget("rbac", &core.Container{Image: "img:1", Args: []string{"fserve"}})
	apps.Apply(app)
	apps.reconcileAll(h.ctx)
	// The API server accepted both objects as built.
	appName := types.NamespacedName{Namespace: "flyte", Name: appObjectName(app.Key)}
	if err := h.k.Get(h.ctx, appName, &appsv1.Deployment{}); err != nil {
		t.Fatalf("the app's Deployment: %v", err)
	}
	if err := h.k.Get(h.ctx, appName, &corev1.Service{}); err != nil {
		t.Fatalf("the app's Service: %v", err)
	}
	// An unchanged app writes nothing.
	updates := func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.seen["update apps/deployments"] + rec.seen["update /services"]
	}
	before := updates()
	apps.reconcileAll(h.ctx)
	if n := updates() - before; n != 0 {
		t.Errorf("an unchanged app's objects were updated %d times", n)
	}
	app.Revision++
	apps.Apply(app)
	apps.reconcileAll(h.ctx)
	apps.Remove(app.Key)
	apps.reconcileAll(h.ctx)

	// Events are posted in the background: the abort's is the last.
	h.eventually("the driver to post its events", func() bool { return rec.used("create events.k8s.io/events") })
	if denied := rec.denied(); len(denied) > 0 {
		t.Errorf("the Role refused the driver: %v", denied)
	}
	// What such a run cannot show: a Pod read past the informer (only
	// when it lags behind a Pod just created), a Secret replaced (a
	// restarted manager launching an attempt again), an event series
	// patched (an event repeated), and the finalizers update, which the API
	// server checks on an owner reference with blockOwnerDeletion where it
	// enforces OwnerReferencesPermissionEnforcement, not as a request.
	unexercised := []string{"get /pods", "update /secrets", "patch events.k8s.io/events", "update flyte.org/taskactions/finalizers"}
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					k := fmt.Sprintf("%s %s/%s", verb, g, res)
					if !rec.used(k) && !slices.Contains(unexercised, k) {
						t.Errorf("the Role grants %q, which the driver never used (used: %v)", k, rec.list())
					}
				}
			}
		}
	}
}

// loadRole reads the generated Role.
func loadRole(t *testing.T) *rbacv1.Role {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{}
	if err := yaml.UnmarshalStrict([]byte(strings.TrimPrefix(string(b), "---\n")), role); err != nil {
		t.Fatal(err)
	}
	if role.Kind != "Role" || role.Namespace != "flyte" {
		t.Fatalf("role.yaml holds %s %s/%s, want a Role in flyte", role.Kind, role.Namespace, role.Name)
	}
	return role
}

// grantRole creates role in the cluster, binds it to a service account of
// its namespace, and returns a configuration acting as that account alone,
// its requests recorded in rec.
func grantRole(t *testing.T, c *testcluster.Cluster, role *rbacv1.Role, rec *requests) *rest.Config {
	t.Helper()
	ctx := t.Context()
	ns := role.Namespace
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const sa = "flyte-executor"
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return actingAs(c, ns, sa, rec)
}

// actingAs is a configuration acting as service account ns/sa alone, its
// requests recorded in rec.
func actingAs(c *testcluster.Cluster, ns, sa string, rec *requests) *rest.Config {
	rc := rest.CopyConfig(c.Config)
	rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return recording{rt, rec} })
	return rc
}

// requests records the API requests of a client as "verb group/resource",
// with those the API server refused.
type requests struct {
	mu     sync.Mutex
	seen   map[string]int
	refuse []string
}

func (r *requests) used(k string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[k] > 0
}

func (r *requests) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k := range r.seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (r *requests) denied() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.refuse)
}

type recording struct {
	next http.RoundTripper
	rec  *requests
}

func (rt recording) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.next.RoundTrip(req)
	k, ok := requestKey(req)
	if !ok {
		return resp, err
	}
	rt.rec.mu.Lock()
	rt.rec.seen[k]++
	if strings.HasPrefix(k, "watch ") && req.URL.Query().Get("sendInitialEvents") == "true" {
		// An informer's first list, streamed as a watch by an API server
		// that can (this one); one that cannot is sent a LIST instead.
		rt.rec.seen["list "+strings.TrimPrefix(k, "watch ")]++
	}
	if err == nil && resp.StatusCode == http.StatusForbidden {
		rt.rec.refuse = append(rt.rec.refuse, k+" "+req.URL.Path)
	}
	rt.rec.mu.Unlock()
	return resp, err
}

// requestKey is "verb group/resource[/subresource]" of a resource request
// (as RBAC names it); discovery and other paths are not resource requests.
func requestKey(req *http.Request) (string, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // a namespaced resource
	}
	resource, name := parts[0], ""
	if len(parts) >= 2 {
		name = parts[1]
	}
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[req.Method]
	if req.Method == http.MethodGet {
		switch {
		case name != "":
			verb = "get"
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		default:
			verb = "list"
		}
	}
	if verb == "" {
		return "", false
	}
	return verb + " " + group + "/" + resource, true
}

// With namespacePerProject the driver needs nothing but the generated
// ClusterRole: it creates a project's namespace, runs there, and reads a
// namespace it finds to refuse it.
func TestPerProjectRoleSuffices(t *testing.T) {
	cr := loadClusterRole(t)
	rec := &requests{seen: map[string]int{}}
	h := newHarnessOpts(t, dbtest.SQLiteDSN(t), harnessOpts{asDriver: func(c *testcluster.Cluster) *rest.Config {
		ctx := t.Context()
		if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cr.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "flyte", Name: "flyte-executor"}}}
		if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return actingAs(c, "flyte", "flyte-executor", rec)
	}}, func(c *config.KubernetesExecutor) { c.NamespacePerProject = true })
	if err := h.k.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "q-development"}}); err != nil {
		t.Fatal(err)
	}
	h.terminal(h.runIn(h.state, "My_Proj", "rcaps", succeed, taskOpts{}), phase.Succeeded)
	h.refusedWith(h.runIn(h.state, "q", "rforeign", succeed, taskOpts{}), "not created by flyte-manager")
	if denied := rec.denied(); len(denied) > 0 {
		t.Errorf("the ClusterRole refused the driver: %v", denied)
	}
	for _, k := range []string{"create /namespaces", "get /namespaces", "create /pods", "create flyte.org/taskactions"} {
		if !rec.used(k) {
			t.Errorf("the driver did not %s (used: %v)", k, rec.list())
		}
	}
}

func loadClusterRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "config", "rbac-per-project", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cr := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict([]byte(strings.TrimPrefix(string(b), "---\n")), cr); err != nil {
		t.Fatal(err)
	}
	if cr.Kind != "ClusterRole" {
		t.Fatalf("rbac-per-project/role.yaml holds a %s", cr.Kind)
	}
	return cr
}

// The namespace-per-project ClusterRole (kube/perproject) grants what the
// Role does, everywhere, and namespaces besides: its markers are a copy
// that must not drift.
func TestPerProjectRoleMatches(t *testing.T) {
	role, cluster := loadRole(t), loadClusterRole(t)
	grants := func(rules []rbacv1.PolicyRule) []string {
		var out []string
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out = append(out, fmt.Sprintf("%s %s/%s", v, g, res))
					}
				}
			}
		}
		sort.Strings(out)
		return out
	}
	want := append(grants(role.Rules), "create /namespaces", "get /namespaces")
	sort.Strings(want)
	if got := grants(cluster.Rules); !slices.Equal(got, want) {
		t.Errorf("the ClusterRole grants\n%v\nwant the Role's and namespaces:\n%v", got, want)
	}
}
