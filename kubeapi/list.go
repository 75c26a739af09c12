package kubeapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/duration"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/internal/authz"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

// query is what a list or watch asks for: a namespace ("" for all), label
// and field selectors, and the columns the store can narrow by.
type query struct {
	ctx    context.Context // the caller's (may)
	ns     string
	labels labels.Selector
	fields fields.Selector
	filter store.AllFilter
}

// hashed matches a label value that v1.LabelValue may have derived from
// another string (its hash suffix): such a value cannot narrow the SQL.
var hashed = regexp.MustCompile(`(^|-)[0-9a-f]{8}$`)

func parseQuery(r *http.Request, ns string) (query, *metav1.Status) {
	q := query{ctx: r.Context(), ns: ns, labels: labels.Everything(), fields: fields.Everything()}
	v := r.URL.Query()
	if s := v.Get("labelSelector"); s != "" {
		sel, err := labels.Parse(s)
		if err != nil {
			st := apierrors.NewBadRequest("labelSelector: " + err.Error()).ErrStatus
			return q, &st
		}
		q.labels = sel
		reqs, _ := sel.Requirements()
		for _, req := range reqs {
			vals := req.Values().UnsortedList()
			if (req.Operator() != selection.Equals && req.Operator() != selection.DoubleEquals && req.Operator() != selection.In) || len(vals) != 1 {
				continue
			}
			val := vals[0]
			switch req.Key() {
			case v1.LabelIsRoot:
				q.filter.Roots, q.filter.Children = val == "true", val == "false"
			case v1.LabelRun, v1.LabelProject, v1.LabelDomain, v1.LabelAction:
				if hashed.MatchString(val) {
					continue
				}
				switch req.Key() {
				case v1.LabelRun:
					q.filter.RunName = val
				case v1.LabelProject:
					q.filter.Project = val
				case v1.LabelDomain:
					q.filter.Domain = val
				case v1.LabelAction:
					q.filter.Name = val
				}
			}
		}
	}
	if s := v.Get("fieldSelector"); s != "" {
		sel, err := fields.ParseSelector(s)
		if err == nil {
			for _, req := range sel.Requirements() {
				if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
					err = errString("field label not supported: " + req.Field)
				}
			}
		}
		if err != nil {
			st := apierrors.NewBadRequest("fieldSelector: " + err.Error()).ErrStatus
			return q, &st
		}
		q.fields = sel
	}
	return q, nil
}

func (q query) matches(ta *v1.TaskAction) bool {
	if q.ns != "" && ta.Namespace != q.ns {
		return false
	}
	if !may(q.ctx, authz.View, ta.Spec.Project, ta.Spec.Domain) {
		return false
	}
	return q.labels.Matches(labels.Set(ta.Labels)) &&
		q.fields.Matches(fields.Set{"metadata.name": ta.Name, "metadata.namespace": ta.Namespace})
}

// token is the continue token: where the next page starts and the list's
// resource version.
type token struct {
	After int64 `json:"a"`
	RV    int64 `json:"v"`
}

func (t token) encode() string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(s string) (token, error) {
	var t token
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	return t, err
}

// collection serves a list, or a watch when asked.
func (a *API) collection(w http.ResponseWriter, r *http.Request, ns string) {
	q, bad := parseQuery(r, ns)
	if bad != nil {
		writeStatus(w, *bad)
		return
	}
	if v := r.URL.Query().Get("watch"); v == "true" || v == "1" {
		a.watch(w, r, q)
		return
	}
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	var tok token
	if c := r.URL.Query().Get("continue"); c != "" {
		var err error
		if tok, err = decodeToken(c); err != nil {
			writeStatus(w, apierrors.NewBadRequest("continue: malformed token").ErrStatus)
			return
		}
	}
	items, next, rv, err := a.list(r, q, tok, limit)
	if err != nil {
		a.internalError(w, r, err)
		return
	}
	meta := metav1.ListMeta{ResourceVersion: strconv.FormatInt(rv, 10), Continue: next}
	if wantsTable(r) {
		writeJSON(w, http.StatusOK, "application/json", table(items, meta, includeObject(r), true))
		return
	}
	list := v1.TaskActionList{TypeMeta: metav1.TypeMeta{Kind: ListKind, APIVersion: v1.GroupVersion.String()}, ListMeta: meta,
		Items: make([]v1.TaskAction, 0, len(items))}
	for _, ta := range items {
		list.Items = append(list.Items, *ta)
	}
	writeJSON(w, http.StatusOK, "application/json", list)
}

// list returns up to limit (0: every) objects q selects after tok, the
// next page's token ("" for the last page) and the list's version.
func (a *API) list(r *http.Request, q query, tok token, limit int) ([]*v1.TaskAction, string, int64, error) {
	var out []*v1.TaskAction
	after, rv := tok.After, tok.RV
	for {
		page, err := a.d.Actions.ListAll(r.Context(), q.filter, after, store.MaxPageSize)
		if err != nil {
			return nil, "", 0, err
		}
		if rv == 0 {
			rv = page.ResourceVersion
		}
		for i := range page.Actions {
			row := &page.Actions[i]
			after = row.ID
			if gone(row) {
				continue
			}
			if ta := a.objectOf(row, 0); q.matches(ta) {
				out = append(out, ta)
				if limit > 0 && len(out) == limit {
					if i == len(page.Actions)-1 && !page.More {
						return out, "", rv, nil
					}
					return out, token{After: after, RV: rv}.encode(), rv, nil
				}
			}
		}
		if !page.More {
			return out, "", rv, nil
		}
	}
}

// named finds the action the request's path names; when there is none, or
// the lookup failed, it has answered (404 or 500) and returns nil.
func (a *API) named(w http.ResponseWriter, r *http.Request) *store.Action {
	name := r.PathValue("name")
	row, err := a.find(r.Context(), r.PathValue("ns"), name)
	if err != nil {
		a.internalError(w, r, err)
		return nil
	}
	if row == nil {
		writeStatus(w, apierrors.NewNotFound(groupResource, name).ErrStatus)
	}
	return row
}

// get serves one object, with its phase history.
func (a *API) get(w http.ResponseWriter, r *http.Request) {
	row := a.named(w, r)
	if row == nil {
		return
	}
	ta := a.objectOf(row, 0)
	if evs, err := a.d.Actions.Events(r.Context(), row.ActionKey); err == nil && len(evs) > 0 {
		withHistory(ta, evs)
	}
	if wantsTable(r) {
		writeJSON(w, http.StatusOK, "application/json", table([]*v1.TaskAction{ta}, metav1.ListMeta{ResourceVersion: ta.ResourceVersion}, includeObject(r), true))
		return
	}
	writeJSON(w, http.StatusOK, "application/json", ta)
}

// delete aborts the action and its unfinished descendants. The object
// stays, with a deletionTimestamp, until the executor has recorded the
// abort; then get answers 404 and watches see DELETED, which is what
// kubectl delete waits for.
func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	row := a.named(w, r)
	if row == nil {
		return
	}
	if a.d.Aborter == nil {
		writeStatus(w, methodNotSupported(r))
		return
	}
	if !may(r.Context(), authz.Execute, row.Project, row.Domain) {
		writeStatus(w, apierrors.NewForbidden(groupResource, r.PathValue("name"), errors.New("the key's role does not allow aborting actions of this project and domain")).ErrStatus)
		return
	}
	if err := a.d.Aborter.Abort(r.Context(), row.ActionKey, "deleted with the Kubernetes API (kubectl delete)", "kubectl"); err != nil && !errors.Is(err, errs.ErrNotFound) {
		a.internalError(w, r, err)
		return
	}
	now, err := a.d.Actions.Get(r.Context(), row.ActionKey)
	if err != nil {
		a.internalError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, "application/json", a.objectOf(now, 0))
}

var schemaNamespaces = schema.GroupResource{Resource: "namespaces"}

// namespace answers for the namespaces actions live in, so that kubectl's
// "not found" names the TaskAction rather than the namespace.
func (a *API) namespace(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("ns")
	if !a.d.Placement.NamespacePerProject && ns != a.d.Placement.Namespace {
		writeStatus(w, apierrors.NewNotFound(schemaNamespaces, ns).ErrStatus)
		return
	}
	writeJSON(w, http.StatusOK, "application/json", map[string]any{
		"kind": "Namespace", "apiVersion": "v1",
		"metadata": map[string]any{"name": ns},
		"status":   map[string]any{"phase": "Active"},
	})
}

// events serves the history of the action a field selector
// involvedObject.name=NAME names, as kubectl describe asks for it.
func (a *API) events(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("ns")
	name := ""
	if sel, err := fields.ParseSelector(r.URL.Query().Get("fieldSelector")); err == nil {
		name, _ = sel.RequiresExactMatch("involvedObject.name")
	}
	list := eventsOf(&v1.TaskAction{}, nil)
	if name != "" {
		row, err := a.find(r.Context(), ns, name)
		if err != nil {
			a.internalError(w, r, err)
			return
		}
		if row != nil {
			evs, err := a.d.Actions.Events(r.Context(), row.ActionKey)
			if err != nil {
				a.internalError(w, r, err)
				return
			}
			list = eventsOf(a.objectOf(row, 0), evs)
		}
	}
	writeJSON(w, http.StatusOK, "application/json", list)
}

// The Table protocol: kubectl get asks for a Table and prints its cells;
// -o wide shows the priority-1 columns too. The columns are the CRD's
// printer columns (see v1.TaskAction), computed here rather than by
// JSONPath.

func wantsTable(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if strings.Contains(part, "as=Table") && strings.Contains(part, "g=meta.k8s.io") {
			return true
		}
	}
	return false
}

func includeObject(r *http.Request) metav1.IncludeObjectPolicy {
	switch p := metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject")); p {
	case metav1.IncludeNone, metav1.IncludeObject:
		return p
	}
	return metav1.IncludeMetadata
}

var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name must be unique within a namespace."},
	{Name: "Run", Type: "string", Description: "The run the action belongs to."},
	{Name: "Action", Type: "string", Description: "The action's name within its run."},
	{Name: "TaskType", Type: "string", Description: "The task's type."},
	{Name: "Status", Type: "string", Description: "The reason of the Progressing condition."},
	{Name: "Age", Type: "date", Description: "Time since the action was created."},
	{Name: "Progressing", Type: "string", Priority: 1, Description: "The Progressing condition's status."},
	{Name: "Succeeded", Type: "string", Priority: 1, Description: "The Succeeded condition's status."},
	{Name: "Failed", Type: "string", Priority: 1, Description: "The Failed condition's status."},
}

func table(items []*v1.TaskAction, meta metav1.ListMeta, include metav1.IncludeObjectPolicy, withColumns bool) *metav1.Table {
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}, ListMeta: meta, Rows: []metav1.TableRow{}}
	if withColumns {
		t.ColumnDefinitions = columns
	}
	for _, ta := range items {
		t.Rows = append(t.Rows, row(ta, include))
	}
	return t
}

func row(ta *v1.TaskAction, include metav1.IncludeObjectPolicy) metav1.TableRow {
	cond := func(typ string, reason bool) any {
		c := ta.Condition(typ)
		switch {
		case c == nil:
			return nil
		case reason:
			return c.Reason
		}
		return string(c.Status)
	}
	r := metav1.TableRow{Cells: []any{
		ta.Name, ta.Spec.RunName, ta.Spec.ActionName, ta.Spec.TaskType, cond(v1.ConditionProgressing, true),
		duration.HumanDuration(time.Since(ta.CreationTimestamp.Time)),
		cond(v1.ConditionProgressing, false), cond(v1.ConditionSucceeded, false), cond(v1.ConditionFailed, false),
	}}
	// RawExtension marshals its Raw bytes, not its Object.
	switch include {
	case metav1.IncludeObject:
		r.Object.Raw, _ = json.Marshal(ta)
	case metav1.IncludeMetadata:
		r.Object.Raw, _ = json.Marshal(&metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
			ObjectMeta: ta.ObjectMeta,
		})
	}
	return r
}
