package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/store"
	"fmgr.dev/internal/testkit"
)

var taskActions = schema.GroupVersionResource{Group: "flyte.org", Version: "v1", Resource: "taskactions"}

// watchListGate turns client-go's WatchListClient feature on or off for
// the informers made after it (the reflector reads it when it is built).
type watchListGate struct {
	on   bool
	rest clientfeatures.Gates
}

func (g watchListGate) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.WatchListClient {
		return g.on
	}
	return g.rest.Enabled(f)
}

func restConfig(t *testing.T, k *kubectlEnv) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// state is name -> resourceVersion and status reason of every object, as
// a list or an informer's store holds them.
func state(items []*unstructured.Unstructured) string {
	var out []string
	for _, u := range items {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		reason := ""
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Progressing" {
				reason, _ = m["reason"].(string)
			}
		}
		out = append(out, u.GetName()+"@"+u.GetResourceVersion()+"="+reason)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func listState(t *testing.T, client dynamic.Interface) string {
	t.Helper()
	list, err := client.Resource(taskActions).Namespace("flyte").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var items []*unstructured.Unstructured
	for i := range list.Items {
		items = append(items, &list.Items[i])
	}
	return state(items)
}

func informerState(inf cache.SharedIndexInformer) string {
	var items []*unstructured.Unstructured
	for _, o := range inf.GetStore().List() {
		items = append(items, o.(*unstructured.Unstructured))
	}
	return state(items)
}

// A client-go informer, with the streaming list (WatchListClient) and
// without, stays in sync with the manager through runs and a restart; a
// watch from a compacted version gets 410 Gone, and an informer whose
// version was compacted away while the manager was down lists again.
func TestKubectlAPIInformerRestart(t *testing.T) {
	for _, watchList := range []bool{true, false} {
		t.Run(fmt.Sprintf("watchList=%v", watchList), func(t *testing.T) {
			port, err := testkit.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			m := startSDKManager(t, "", fmt.Sprintf("FLYTE_MANAGER_KUBEAPI_LISTEN=127.0.0.1:%d", port))
			k := newKubectl(t, m)
			cfg := restConfig(t, k)
			client := dynamic.NewForConfigOrDie(cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()

			before := clientfeatures.FeatureGates()
			clientfeatures.ReplaceFeatureGates(watchListGate{on: watchList, rest: before})
			defer clientfeatures.ReplaceFeatureGates(before)
			factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, "flyte", nil)
			inf := factory.ForResource(taskActions).Informer()
			stop := make(chan struct{})
			defer close(stop)
			go inf.Run(stop)
			sctx, scancel := context.WithTimeout(ctx, time.Minute)
			defer scancel()
			if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
				t.Fatal("the informer did not sync with an empty manager")
			}

			inSync := func(what string) {
				t.Helper()
				if msg := testkit.Poll(time.Minute, 200*time.Millisecond, func() string {
					want, got := listState(t, client), informerState(inf)
					if want == got && want != "" {
						return ""
					}
					return fmt.Sprintf("list:\n%s\ninformer:\n%s", want, got)
				}); msg != "" {
					t.Fatalf("%s: the informer is not in sync: %s", what, msg)
				}
			}
			sentinel := func() string {
				var r struct{ Run, Phase string }
				driver(t, ctx, &r, "drive_abort.py", "sentinel", sdkEndpoint(m), testkit.TaskDir(t))
				if r.Phase != "SUCCEEDED" {
					t.Fatalf("run %s ended %s", r.Run, r.Phase)
				}
				return r.Run
			}
			sentinel()
			inSync("after a run")

			m.Restart(sdkManagerEnv(t)...)
			sentinel()
			inSync("after a restart and another run")

			// Changes the informer cannot see while the manager is down,
			// and the log compacted past its version: it must list again.
			m.Kill()
			gdb, err := db.Open(ctx, "sqlite://"+filepath.Join(m.Home, "flyte-manager.db"))
			if err != nil {
				t.Fatal(err)
			}
			st := store.New(gdb)
			key := store.RunKey{Project: "flytesnacks", Domain: "development", RunName: "written-while-down"}.Action(store.RootName)
			if _, err := st.Actions.CreateRun(ctx, store.NewAction{Key: key, ActionType: store.ActionTypeTask, TaskType: "python", Spec: []byte("x"),
				Task: store.TaskID{Project: "flytesnacks", Domain: "development", Name: "t", Version: "v"}}); err != nil {
				t.Fatal(err)
			}
			current, err := st.Actions.CurrentVersion(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Actions.CompactChanges(ctx, current); err != nil {
				t.Fatal(err)
			}
			_ = db.Close(gdb)
			m.Restart(sdkManagerEnv(t)...)

			w, err := client.Resource(taskActions).Namespace("flyte").Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-w.ResultChan():
				if err := apierrors.FromObject(ev.Object); ev.Type != "ERROR" || !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
					t.Errorf("a watch from a compacted version got %s %v, want ERROR 410", ev.Type, ev.Object)
				}
			case <-time.After(time.Minute):
				t.Error("a watch from a compacted version got nothing")
			}
			w.Stop()
			inSync("after the log was compacted past the informer's version")
			if !strings.Contains(informerState(inf), "written-while-down") {
				t.Errorf("the informer lacks the action written while the manager was down:\n%s", informerState(inf))
			}
		})
	}
}

// Two managers on one PostgreSQL database: a watch through replica B sees
// a run submitted through replica A, the change log being in the database.
func TestKubectlAPITwoReplicas(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	a := startSDKManager(t, dsn)
	b := startSDKManager(t, dsn)
	kb := newKubectl(t, b)
	client := dynamic.NewForConfigOrDie(restConfig(t, kb))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	list, err := client.Resource(taskActions).Namespace("flyte").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.Resource(taskActions).Namespace("flyte").Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	var r struct{ Run, Phase string }
	driver(t, ctx, &r, "drive_abort.py", "sentinel", sdkEndpoint(a), testkit.TaskDir(t))
	want := "flytesnacks-development-" + r.Run + "-a0"
	seen := map[string]bool{}
	deadline := time.After(2 * time.Minute)
	for !seen["ADDED"] || !seen["Completed"] {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("replica B's watch ended; saw %v", seen)
			}
			u, _ := ev.Object.(*unstructured.Unstructured)
			if u == nil || u.GetName() != want {
				continue
			}
			seen[string(ev.Type)] = true
			if state([]*unstructured.Unstructured{u}) == want+"@"+u.GetResourceVersion()+"=Completed" {
				seen["Completed"] = true
			}
		case <-deadline:
			t.Fatalf("replica B's watch did not see run %s (made through replica A) added and completed; saw %v", r.Run, seen)
		}
	}
}
