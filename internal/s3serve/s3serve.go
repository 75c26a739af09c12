// Package s3serve serves a blob store over the S3 API, so that S3 clients
// (the flyte SDK's obstore, boto, the AWS CLI) read and write the manager's
// own store as they would S3. It is the storage.s3Endpoint listener
// (docs/storage.md).
//
// What it serves: one bucket, mapped to the store's root, with path-style
// addressing (<endpoint>/<bucket>/<key>); GetObject (with Range and
// If-Match / If-None-Match), HeadObject, PutObject (If-None-Match: * makes
// it create-only), CopyObject, DeleteObject, DeleteObjects,
// ListObjectsV2 and ListObjects (prefix, delimiter, paging), HeadBucket,
// GetBucketLocation, ListBuckets and multipart uploads (create, upload part,
// complete, abort, list parts). Every request must carry an AWS Signature
// Version 4 (header or presigned URL) by one of the configured access keys;
// anything else is refused with S3's XML error. Keys follow the store's
// rules (blob.ValidateKey: no "..", no leading "/"), and on a file store no
// key may pass through a symbolic link, so no request reaches a file
// outside the store.
package s3serve

import (
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
)

// Options configure a Server.
type Options struct {
	// Bucket is the one bucket's name.
	Bucket string
	// Keys maps each accepted access key ID to its secret key: keys that
	// may do everything (but write under ReadOnly).
	Keys map[string]string
	// ScopedMaster, when set, is the secret scoped keys (ScopedKey) are
	// derived from: the endpoint then also accepts those, each within its
	// grant. "" accepts none.
	ScopedMaster string
	// StagingDir keeps the parts of multipart uploads until they complete;
	// it is created if missing.
	StagingDir string
	// Log receives internal errors (never keys or signatures).
	Log *slog.Logger
	// Now is the clock signatures are checked against (time.Now if nil).
	Now func() time.Time
	// ReadOnly are key prefixes (each ending in "/") under which the
	// endpoint only reads: what the manager alone writes there (uploaded
	// code bundles, run inputs) no client of the endpoint may replace or
	// delete.
	ReadOnly []string
}

// Server is an http.Handler serving the S3 API over a blob store.
type Server struct {
	store *blob.Store
	o     Options
	reqID atomic.Uint64
}

// New returns a server over store.
func New(store *blob.Store, o Options) (*Server, error) {
	if o.Bucket == "" {
		return nil, errs.Invalidf("s3 endpoint: a bucket name is required")
	}
	if len(o.Keys) == 0 {
		return nil, errs.Invalidf("s3 endpoint: at least one access key is required")
	}
	if o.StagingDir == "" {
		return nil, errs.Invalidf("s3 endpoint: a staging directory is required")
	}
	if err := os.MkdirAll(o.StagingDir, 0o700); err != nil {
		return nil, fmt.Errorf("s3 endpoint: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{store: store, o: o}
	s.removeStaleUploads()
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := fmt.Sprintf("%016X", s.reqID.Add(1))
	w.Header().Set("x-amz-request-id", id)
	w.Header().Set("Server", "flyte-manager")
	sig, err := verify(r, s.secretOf, s.o.Now())
	if err != nil {
		s.fail(w, r, id, err)
		return
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	switch {
	case bucket == "":
		if r.Method != http.MethodGet {
			err = errMethod(r.Method)
		} else {
			err = s.listBuckets(w)
		}
	case bucket != s.o.Bucket:
		err = &apiError{status: http.StatusNotFound, code: "NoSuchBucket", msg: "The specified bucket does not exist"}
	case key == "":
		err = s.bucketOp(w, r, q, sig)
	default:
		if err = s.checkKey(key); err == nil {
			err = s.objectOp(w, r, key, q, sig)
		}
	}
	if err != nil {
		s.fail(w, r, id, err)
	}
}

func (s *Server) bucketOp(w http.ResponseWriter, r *http.Request, q map[string][]string, sig signed) error {
	has := func(k string) bool { _, ok := q[k]; return ok }
	switch r.Method {
	case http.MethodHead:
		w.WriteHeader(http.StatusOK)
		return nil
	case http.MethodGet:
		switch {
		case has("location"):
			return writeXML(w, http.StatusOK, locationConstraint{})
		case has("uploads"):
			return writeXML(w, http.StatusOK, listUploadsResult{Bucket: s.o.Bucket})
		}
		return s.list(w, r, sig.grant)
	case http.MethodPost:
		if has("delete") {
			return s.deleteObjects(w, r, sig)
		}
	}
	return errMethod(r.Method)
}

func (s *Server) objectOp(w http.ResponseWriter, r *http.Request, key string, q map[string][]string, sig signed) error {
	has := func(k string) bool { _, ok := q[k]; return ok }
	upload := ""
	if v := q["uploadId"]; len(v) > 0 {
		upload = v[0]
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if !sig.grant.mayRead(key) {
			return errOutOfScope()
		}
	case http.MethodPut, http.MethodDelete, http.MethodPost:
		if err := s.checkWritable(key); err != nil {
			return err
		}
		if !sig.grant.mayWrite(key) {
			return errOutOfScope()
		}
	}
	switch r.Method {
	case http.MethodGet:
		if upload != "" {
			return s.listParts(w, key, upload)
		}
		return s.get(w, r, key, true)
	case http.MethodHead:
		return s.get(w, r, key, false)
	}
	switch r.Method {
	case http.MethodPut:
		switch {
		case upload != "" && r.Header.Get("x-amz-copy-source") != "":
			return &apiError{status: http.StatusNotImplemented, code: "NotImplemented", msg: "UploadPartCopy is not supported"}
		case upload != "":
			return s.uploadPart(w, r, key, upload, sig)
		case r.Header.Get("x-amz-copy-source") != "":
			return s.copyObject(w, r, key, sig.grant)
		}
		return s.put(w, r, key, sig)
	case http.MethodDelete:
		if upload != "" {
			return s.abortUpload(w, key, upload)
		}
		return s.delete(w, r, key)
	case http.MethodPost:
		switch {
		case has("uploads"):
			return s.createUpload(w, r, key)
		case upload != "":
			return s.completeUpload(w, r, key, upload, sig)
		}
	}
	return errMethod(r.Method)
}

// checkKey refuses keys the store would not take, and on file stores keys
// that pass through a symbolic link.
func (s *Server) checkKey(key string) error {
	if err := s.store.CheckKey(key); err != nil {
		return &apiError{status: http.StatusBadRequest, code: "InvalidArgument", msg: "invalid object key: " + userText(err)}
	}
	if err := s.store.CheckNoLinks(key); err != nil {
		return &apiError{status: http.StatusForbidden, code: "AccessDenied", msg: "the key passes through a symbolic link, which this endpoint does not follow"}
	}
	return nil
}

// checkWritable refuses writes under the ReadOnly prefixes.
func (s *Server) checkWritable(key string) error {
	for _, p := range s.o.ReadOnly {
		if strings.HasPrefix(key, p) {
			return errAccessDenied("objects under " + p + " are written by the manager only; this endpoint reads them")
		}
	}
	return nil
}

// apiError is an answer in S3's XML error form.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errAccessDenied(msg string) *apiError {
	return &apiError{status: http.StatusForbidden, code: "AccessDenied", msg: msg}
}

func errAuthorization(msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "AuthorizationHeaderMalformed", msg: msg}
}

func errMethod(m string) *apiError {
	return &apiError{status: http.StatusMethodNotAllowed, code: "MethodNotAllowed", msg: "The specified method " + m + " is not allowed against this resource."}
}

func errInvalid(msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "InvalidArgument", msg: msg}
}

// toAPI turns a store error into S3's vocabulary; anything unexpected is an
// InternalError whose text stays in the log.
func toAPI(err error) (*apiError, bool) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae, true
	case errors.Is(err, blob.ErrObjectExists):
		return &apiError{status: http.StatusPreconditionFailed, code: "PreconditionFailed", msg: "At least one of the pre-conditions you specified did not hold"}, true
	case errors.Is(err, errs.ErrNotFound):
		return &apiError{status: http.StatusNotFound, code: "NoSuchKey", msg: "The specified key does not exist."}, true
	case errors.Is(err, errs.ErrInvalid):
		return errInvalid(userText(err)), true
	case errors.Is(err, errs.ErrPrecondition):
		return &apiError{status: http.StatusConflict, code: "OperationAborted", msg: "the key cannot hold an object here: a prefix of it is an object, or other objects are under it"}, true
	}
	return &apiError{status: http.StatusInternalServerError, code: "InternalError", msg: "We encountered an internal error. Please try again."}, false
}

// userText is an error's message without the sentinel's suffix.
func userText(err error) string {
	msg := err.Error()
	for _, sfx := range []string{": " + errs.ErrInvalid.Error(), ": " + errs.ErrNotFound.Error()} {
		msg = strings.TrimSuffix(msg, sfx)
	}
	return msg
}

type errorDoc struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, id string, err error) {
	ae, known := toAPI(err)
	if !known {
		s.o.Log.Error("s3 endpoint", "method", r.Method, "path", r.URL.Path, "request", id, "error", err)
	}
	if r.Method == http.MethodHead {
		w.Header().Set("x-amz-error-code", ae.code)
		w.WriteHeader(ae.status)
		return
	}
	_ = writeXML(w, ae.status, errorDoc{Code: ae.code, Message: ae.msg, Resource: r.URL.Path, RequestID: id})
}

func writeXML(w http.ResponseWriter, status int, v any) error {
	b, err := xml.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(b)
	return nil
}

const s3NS = "http://s3.amazonaws.com/doc/2006-03-01/"

type locationConstraint struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ LocationConstraint"`
}

type listBucketsResult struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListAllMyBucketsResult"`
	Owner   owner    `xml:"Owner"`
	Buckets []bucket `xml:"Buckets>Bucket"`
}

type owner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

type bucket struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
}

func (s *Server) listBuckets(w http.ResponseWriter) error {
	return writeXML(w, http.StatusOK, listBucketsResult{
		Owner:   owner{ID: "flyte-manager", DisplayName: "flyte-manager"},
		Buckets: []bucket{{Name: s.o.Bucket, CreationDate: time.Unix(0, 0).UTC().Format(time.RFC3339)}},
	})
}
