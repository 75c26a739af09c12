package kubeapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// Watches follow the store's change log: a resource version is a change's
// version, so a watch from version v replays every later change from the
// database (on every replica alike, the log being in the database) and
// then follows the hub, which hears other replicas' commits too.

// InitialEventsEnd is the annotation on the bookmark that ends the initial
// events of a watch asked to send them (sendInitialEvents=true).
const InitialEventsEnd = "k8s.io/initial-events-end"

// maxWatch bounds a watch that gives no timeoutSeconds, as the API
// server's request timeout does.
const maxWatch = 30 * time.Minute

type watcher struct {
	w       http.ResponseWriter
	flusher http.Flusher
	enc     *json.Encoder
	table   bool
	include metav1.IncludeObjectPolicy
	columns bool // the next Table event still owes the column definitions
}

func (ww *watcher) send(typ string, obj any) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if err := ww.enc.Encode(metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}); err != nil {
		return err
	}
	if ww.flusher != nil {
		ww.flusher.Flush()
	}
	return nil
}

func (ww *watcher) object(typ string, ta *v1.TaskAction) error {
	if !ww.table {
		return ww.send(typ, ta)
	}
	t := table([]*v1.TaskAction{ta}, metav1.ListMeta{ResourceVersion: ta.ResourceVersion}, ww.include, ww.columns)
	ww.columns = false
	return ww.send(typ, t)
}

func (ww *watcher) bookmark(rv int64, initialEnd bool) error {
	meta := map[string]any{"resourceVersion": strconv.FormatInt(rv, 10)}
	if initialEnd {
		meta["annotations"] = map[string]string{InitialEventsEnd: "true"}
	}
	if ww.table {
		return ww.send(string(watchBookmark), map[string]any{"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "rows": []any{}})
	}
	return ww.send(string(watchBookmark), map[string]any{"kind": Kind, "apiVersion": v1.GroupVersion.String(), "metadata": meta})
}

const watchBookmark = "BOOKMARK"

func (a *API) watch(w http.ResponseWriter, r *http.Request, q query) {
	v := r.URL.Query()
	timeout := maxWatch
	if s := v.Get("timeoutSeconds"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			writeStatus(w, apierrors.NewBadRequest("timeoutSeconds: not a number of seconds").ErrStatus)
			return
		}
		if n > 0 {
			timeout = min(time.Duration(n)*time.Second, maxWatch)
		}
	}
	var from int64
	rv := v.Get("resourceVersion")
	initial := v.Get("sendInitialEvents") == "true"
	synthetic := initial || rv == "" || rv == "0"
	if !synthetic {
		n, err := strconv.ParseInt(rv, 10, 64)
		if err != nil || n < 0 {
			writeStatus(w, apierrors.NewBadRequest("resourceVersion: not a resource version").ErrStatus)
			return
		}
		from = n
	}
	if a.d.Hub == nil {
		writeStatus(w, methodNotSupported(r))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	// Subscribe before reading: whatever commits from here on reaches the
	// subscription, and what the reads below also saw is skipped by version.
	sub := a.d.Hub.Subscribe(runstate.Matching(func(c store.Change) bool { return c.Kind == store.KindAction }))
	defer sub.Close()

	var items []*v1.TaskAction
	if synthetic {
		var err error
		if items, _, from, err = a.list(r, q, token{}, 0); err != nil {
			a.internalError(w, r, err)
			return
		}
	} else {
		oldest, err := a.d.Actions.OldestChange(ctx)
		if err != nil {
			a.internalError(w, r, err)
			return
		}
		if from+1 < oldest {
			ww := a.newWatcher(w, r)
			st := apierrors.NewResourceExpired("too old resource version: " + rv + " (" + strconv.FormatInt(oldest-1, 10) + ")").ErrStatus
			st.Kind, st.APIVersion = "Status", "v1"
			_ = ww.send("ERROR", st)
			return
		}
	}
	ww := a.newWatcher(w, r)
	for _, ta := range items {
		if ww.object("ADDED", ta) != nil {
			return
		}
	}
	if initial && ww.bookmark(from, true) != nil {
		return
	}

	last := from
	// A superseded change (store.Change.Superseded) sends nothing: its row
	// is the object as a later change left it, and sent now, at this
	// change's version, it would show the object ahead of the objects
	// changed in between. The later change sends it, as ADDED when the
	// object's ADDED was the one skipped.
	unannounced := map[store.ActionKey]bool{}
	deliver := func(c store.Change) error {
		if c.ResourceVersion <= last {
			return nil
		}
		last = c.ResourceVersion
		if c.Kind != store.KindAction || c.Action == nil {
			return nil
		}
		if c.Superseded() {
			if c.Op == store.ChangeAdded {
				unannounced[c.Key] = true
			}
			return nil
		}
		typ := c.Op
		if unannounced[c.Key] {
			typ = store.ChangeAdded
			delete(unannounced, c.Key)
		}
		ta := a.objectOf(c.Action, c.ResourceVersion)
		if !q.matches(ta) {
			return nil
		}
		if gone(c.Action) {
			typ = store.ChangeDeleted
		}
		return ww.object(typ, ta)
	}
	// Replay what the log holds past the starting version.
	for {
		changes, err := a.d.Actions.ChangeFeed(ctx, last, store.MaxPageSize)
		if err != nil {
			if ctx.Err() == nil {
				a.d.Log.Warn("kube API watch could not read the change log", "error", err)
			}
			return
		}
		for _, c := range changes {
			if deliver(c) != nil {
				return
			}
		}
		if len(changes) < store.MaxPageSize {
			break
		}
	}

	bookmarks := v.Get("allowWatchBookmarks") == "true"
	tick := time.NewTicker(a.d.BookmarkEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-sub.C:
			if !ok {
				return // fell too far behind: the client watches again from its last version
			}
			if deliver(c) != nil {
				return
			}
		case <-tick.C:
			if bookmarks && ww.bookmark(last, false) != nil {
				return
			}
		}
	}
}

func (a *API) newWatcher(w http.ResponseWriter, r *http.Request) *watcher {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	if f != nil {
		f.Flush()
	}
	return &watcher{w: w, flusher: f, enc: json.NewEncoder(w), table: wantsTable(r), include: includeObject(r), columns: true}
}
