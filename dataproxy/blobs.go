package dataproxy

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
)

// serveBlob is the signed-URL endpoint: <base>/blobs/<key>?m=&exp=[&md5=]&sig=.
//
//   - PUT stores the body under key. If the URL binds an MD5, the request
//     must send it as Content-MD5 (base64) and the body must match it; a
//     Content-MD5 sent to a URL without one is checked too. A body that
//     does not match is never visible, and neither is a partial one. A PUT
//     never replaces an object: if one exists by the time the body is
//     committed, the same bytes answer 200 without a write and different
//     bytes answer 409.
//   - GET and HEAD (on a GET URL) stream the object, with Range support.
//
// Answers: 200 on success; 400 bad key or checksum; 403 "signature
// invalid", "URL expired" or a URL used with another method; 404 no such
// object; 405 other methods; 409 a different object exists; 413 body over
// the limit.
func (s *Service) serveBlob(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPut, http.MethodGet, http.MethodHead:
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT")
		plain(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	key, ok := blob.KeyFromPath(r.URL.Path)
	if !ok {
		plain(w, http.StatusNotFound, "not found")
		return
	}
	if err := s.store.CheckKey(key); err != nil {
		plain(w, http.StatusBadRequest, err.Error())
		return
	}
	grant, err := s.signer.Verify(key, r.URL.Query(), s.now())
	if err != nil {
		plain(w, http.StatusForbidden, err.Error())
		return
	}
	if !grant.Allows(r.Method) {
		plain(w, http.StatusForbidden, "URL not valid for "+r.Method)
		return
	}
	if r.Method == http.MethodPut {
		s.putBlob(w, r, grant)
		return
	}
	s.getBlob(w, r, key)
}

func (s *Service) putBlob(w http.ResponseWriter, r *http.Request, g blob.Grant) {
	if r.ContentLength > s.maxUpload {
		plain(w, http.StatusRequestEntityTooLarge, tooLarge(s.maxUpload))
		return
	}
	want := g.ContentMD5
	if h := r.Header.Get("Content-MD5"); h != "" {
		sent, err := base64.StdEncoding.DecodeString(h)
		if err != nil || len(sent) != md5.Size {
			plain(w, http.StatusBadRequest, "Content-MD5 header is not a base64-encoded MD5 digest")
			return
		}
		if want != nil && !bytes.Equal(sent, want) {
			plain(w, http.StatusBadRequest, "Content-MD5 header does not match the MD5 this URL was issued for")
			return
		}
		want = sent
	} else if want != nil {
		plain(w, http.StatusBadRequest, "this URL requires a Content-MD5 header")
		return
	}

	// Signed PUTs only ever create: the overwrite check CreateUploadLocation
	// makes when it issues a URL is long stale by the time an old URL is
	// used, so the store checks again, atomically, as the object commits.
	bw, err := s.store.NewWriter(r.Context(), g.Key, &blob.WriteOptions{
		ContentType: r.Header.Get("Content-Type"),
		ContentMD5:  want,
		IfNotExist:  true,
	})
	if err != nil {
		s.storageError(w, r, "opening upload", err)
		return
	}
	if _, err := io.Copy(bw, http.MaxBytesReader(w, r.Body, s.maxUpload)); err != nil {
		bw.Abort()
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			plain(w, http.StatusRequestEntityTooLarge, tooLarge(s.maxUpload))
		case r.Context().Err() != nil:
			// The client is gone; nobody reads the answer.
		default:
			s.log.WarnContext(r.Context(), "blob upload interrupted", "key", g.Key, "error", err)
			plain(w, http.StatusBadRequest, "reading the request body failed")
		}
		return
	}
	if err := bw.Close(); err != nil {
		switch {
		case errors.Is(err, blob.ErrContentMD5Mismatch):
			plain(w, http.StatusBadRequest, "body does not match its Content-MD5 (BadDigest)")
		case errors.Is(err, blob.ErrObjectExists):
			s.putOverExisting(w, r, g.Key, bw.MD5())
		default:
			s.storageError(w, r, "committing upload", err)
		}
		return
	}
	w.Header().Set("ETag", `"`+hex.EncodeToString(bw.MD5())+`"`)
	w.WriteHeader(http.StatusOK)
}

// putOverExisting answers a PUT that found an object at its key: the same
// bytes again (a retried upload, or the same file from another URL) is a
// success that changes nothing; anything else is 409 and the object stays.
func (s *Service) putOverExisting(w http.ResponseWriter, r *http.Request, key string, sent []byte) {
	have, err := s.store.MD5(r.Context(), key)
	if err != nil {
		s.storageError(w, r, "checking the existing object", err)
		return
	}
	if !bytes.Equal(have, sent) {
		plain(w, http.StatusConflict, "a different file was uploaded to this location after this URL was issued; "+
			"upload URLs never replace a file: ask for a new location")
		return
	}
	w.Header().Set("ETag", `"`+hex.EncodeToString(sent)+`"`)
	w.WriteHeader(http.StatusOK)
}

func (s *Service) getBlob(w http.ResponseWriter, r *http.Request, key string) {
	rd, err := s.store.NewReader(r.Context(), key)
	if err != nil {
		s.storageError(w, r, "opening download", err)
		return
	}
	defer rd.Close()
	h := w.Header()
	h.Set("Content-Type", rd.ContentType())
	h.Set("X-Content-Type-Options", "nosniff")
	// Reports are HTML: let their scripts run, but in an opaque origin,
	// never with the manager's.
	h.Set("Content-Security-Policy", "sandbox allow-scripts")
	h.Set("Cache-Control", "private, no-cache")
	http.ServeContent(w, r, "", rd.ModTime(), rd)
}

// storageError answers a failed store operation; internal detail is only
// logged.
func (s *Service) storageError(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, errs.ErrNotFound):
		plain(w, http.StatusNotFound, "not found")
	case errors.Is(err, errs.ErrInvalid):
		plain(w, http.StatusBadRequest, "invalid request")
	case r.Context().Err() != nil:
	default:
		s.log.ErrorContext(r.Context(), "blob endpoint: "+what, "path", r.URL.Path, "error", err)
		plain(w, http.StatusInternalServerError, "storage error")
	}
}

func tooLarge(limit int64) string {
	return fmt.Sprintf("body exceeds the upload limit of %s bytes", strconv.FormatInt(limit, 10))
}

func plain(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("ETag")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}
