// Package kubeapi serves the manager's actions as the Kubernetes resource
// taskactions.flyte.org/v1, read from the database, so that kubectl and
// client-go work against the manager in every mode, with or without a
// cluster: discovery, list and get (JSON or Table), watch from the change
// log, and delete (which aborts the action).
//
// It is a small hand-written handler on apimachinery's wire types, not a
// k8s.io/apiserver GenericAPIServer: one resource and four verbs need no
// scheme, codegen or etcd stack, and the hard part (resource versions and
// watches over SQL) is the store's change log either way.
package kubeapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "fmgr.dev/executor/api/v1"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/runstate"
	"fmgr.dev/internal/store"
)

// The served resource.
const (
	Resource = "taskactions"
	Kind     = "TaskAction"
	ListKind = "TaskActionList"
	Singular = "taskaction"
)

var groupResource = schema.GroupResource{Group: v1.GroupVersion.Group, Resource: Resource}

// Aborter aborts an action and every unfinished descendant
// (runstate.Service.Abort).
type Aborter interface {
	Abort(ctx context.Context, key store.ActionKey, reason, by string) error
}

// Deps is what the API reads and acts through.
type Deps struct {
	Actions *store.Actions
	Hub     *runstate.Hub
	Aborter Aborter
	// Placement names and places every action's object, as the
	// kubernetes executor does.
	Placement v1.Placement
	// Tokens are the bearer tokens a request may carry; nil lets every
	// request through (tests only).
	Tokens *Tokens
	// Keys, when set (auth.mode required), verifies the other bearer
	// tokens: API keys and their tokens, scoped by their roles (auth.go).
	Keys authn.Verifier
	// Version is the manager's version, for /version.
	Version string
	Log     *slog.Logger
	// BookmarkEvery is the period of watch bookmarks (default a minute).
	BookmarkEvery time.Duration
}

// API is the HTTP handler.
type API struct {
	d   Deps
	mux *http.ServeMux
}

// New returns the API over d.
func New(d Deps) *API {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.BookmarkEvery <= 0 {
		d.BookmarkEvery = time.Minute
	}
	a := &API{d: d, mux: http.NewServeMux()}
	a.routes()
	return a
}

func (a *API) routes() {
	const base = "/apis/flyte.org/v1/"
	a.mux.HandleFunc("/version", a.only("GET", a.version))
	a.mux.HandleFunc("/apis", a.only("GET", a.groups))
	a.mux.HandleFunc("/apis/flyte.org", a.only("GET", a.group))
	a.mux.HandleFunc("/apis/flyte.org/v1", a.only("GET", a.resources))
	a.mux.HandleFunc(base+Resource, a.only("GET", func(w http.ResponseWriter, r *http.Request) { a.collection(w, r, "") }))
	a.mux.HandleFunc(base+"namespaces/{ns}/"+Resource, a.namespaced)
	a.mux.HandleFunc(base+"namespaces/{ns}/"+Resource+"/{name}", a.object)
	a.mux.HandleFunc("/api/v1/namespaces/{ns}", a.only("GET", a.namespace))
	a.mux.HandleFunc("/api/v1/namespaces/{ns}/events", a.only("GET", a.events))
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path).ErrStatus)
	})
}

// ServeHTTP checks the bearer token, then serves the request.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r, ok := a.caller(w, r)
	if !ok {
		return
	}
	a.mux.ServeHTTP(w, r)
}

// only answers 405 to every method but method.
func (a *API) only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == "GET" && r.Method == "HEAD") {
			writeStatus(w, methodNotSupported(r))
			return
		}
		h(w, r)
	}
}

func methodNotSupported(r *http.Request) metav1.Status {
	return apierrors.NewMethodNotSupported(groupResource, strings.ToLower(r.Method)).ErrStatus
}

func (a *API) namespaced(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case "GET", "HEAD":
		a.collection(w, r, r.PathValue("ns"))
	case "DELETE":
		writeStatus(w, apierrors.NewForbidden(groupResource, "", errString("deleting every TaskAction of a namespace at once is not allowed; delete them by name or label")).ErrStatus)
	default:
		writeStatus(w, methodNotSupported(r))
	}
}

func (a *API) object(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case "GET", "HEAD":
		a.get(w, r)
	case "DELETE":
		a.delete(w, r)
	default:
		writeStatus(w, methodNotSupported(r))
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// writeStatus answers with a metav1.Status and its code.
func writeStatus(w http.ResponseWriter, st metav1.Status) {
	st.Kind, st.APIVersion = "Status", "v1"
	if st.Status == "" {
		st.Status = metav1.StatusFailure
	}
	writeJSON(w, int(st.Code), "application/json", st)
}

func writeJSON(w http.ResponseWriter, code int, contentType string, v any) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// internalError answers 500 without the error's text (logged instead).
func (a *API) internalError(w http.ResponseWriter, r *http.Request, err error) {
	if st, ok := err.(apierrors.APIStatus); ok {
		writeStatus(w, st.Status())
		return
	}
	a.d.Log.Error("kube API request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	writeStatus(w, apierrors.NewInternalError(errString("the manager could not read its database; see its log")).ErrStatus)
}
