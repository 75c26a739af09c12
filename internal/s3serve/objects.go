package s3serve

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
)

// etag is an object's entity tag: derived from its size and modification
// time, which every answer (GET, HEAD, PUT, lists) knows without reading
// the object; it changes whenever the object is written again.
func etag(size int64, mod time.Time) string {
	h := sha256.Sum256([]byte(strconv.FormatInt(size, 10) + "/" + strconv.FormatInt(mod.UnixNano(), 10)))
	return `"` + hex.EncodeToString(h[:16]) + `"`
}

// get answers GetObject (body) and HeadObject, with Range, If-Match,
// If-None-Match and the If-(Un)Modified-Since headers (http.ServeContent).
func (s *Server) get(w http.ResponseWriter, r *http.Request, key string, body bool) error {
	rd, err := s.store.NewReader(r.Context(), key)
	if err != nil {
		return err
	}
	defer rd.Close()
	w.Header().Set("ETag", etag(rd.Size(), rd.ModTime()))
	w.Header().Set("Content-Type", rd.ContentType())
	if !body && r.Method != http.MethodHead {
		return errMethod(r.Method)
	}
	http.ServeContent(w, r, "", rd.ModTime(), rd)
	return nil
}

// put answers PutObject: the body becomes the object once it is whole and
// matches its signed SHA-256 and its Content-MD5, never before.
func (s *Server) put(w http.ResponseWriter, r *http.Request, key string, sig signed) error {
	opts, err := writeOptions(r)
	if err != nil {
		return err
	}
	if err := s.write(r, key, newHashedBody(r.Body, sig.payloadHash), opts); err != nil {
		return err
	}
	return s.answerWritten(w, r, key)
}

func (s *Server) answerWritten(w http.ResponseWriter, r *http.Request, key string) error {
	a, err := s.store.Stat(r.Context(), key)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(a.Size, a.ModTime))
	w.WriteHeader(http.StatusOK)
	return nil
}

// writeOptions reads PutObject's Content-MD5, Content-Type and
// If-None-Match.
func writeOptions(r *http.Request) (*blob.WriteOptions, error) {
	opts := &blob.WriteOptions{ContentType: r.Header.Get("Content-Type")}
	if h := r.Header.Get("Content-MD5"); h != "" {
		sum, err := base64.StdEncoding.DecodeString(h)
		if err != nil || len(sum) != md5.Size {
			return nil, &apiError{status: http.StatusBadRequest, code: "InvalidDigest", msg: "The Content-MD5 you specified was invalid."}
		}
		opts.ContentMD5 = sum
	}
	switch inm := r.Header.Get("If-None-Match"); inm {
	case "":
	case "*":
		opts.IfNotExist = true
	default:
		return nil, &apiError{status: http.StatusNotImplemented, code: "NotImplemented", msg: "If-None-Match on writes supports only *"}
	}
	if r.Header.Get("If-Match") != "" {
		return nil, &apiError{status: http.StatusNotImplemented, code: "NotImplemented", msg: "If-Match on writes is not supported"}
	}
	return opts, nil
}

// write streams body into key; nothing is visible unless all of it arrived.
func (s *Server) write(r *http.Request, key string, body io.Reader, opts *blob.WriteOptions) error {
	wr, err := s.store.NewWriter(r.Context(), key, opts)
	if err != nil {
		return err
	}
	if _, err := io.Copy(wr, body); err != nil {
		wr.Abort()
		var ae *apiError
		if errors.As(err, &ae) {
			return ae
		}
		if errors.Is(err, blob.ErrContentMD5Mismatch) {
			return errBadDigest()
		}
		return &apiError{status: http.StatusBadRequest, code: "IncompleteBody", msg: "You did not provide the number of bytes specified by the Content-Length HTTP header."}
	}
	if err := wr.Close(); err != nil {
		if errors.Is(err, blob.ErrContentMD5Mismatch) {
			return errBadDigest()
		}
		return err
	}
	return nil
}

func errBadDigest() *apiError {
	return &apiError{status: http.StatusBadRequest, code: "BadDigest", msg: "The Content-MD5 you specified did not match what we received."}
}

// delete answers DeleteObject: 204 whether or not the object was there.
func (s *Server) delete(w http.ResponseWriter, r *http.Request, key string) error {
	if err := s.deleteKey(r.Context(), key); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) deleteKey(ctx context.Context, key string) error {
	err := s.store.Delete(ctx, key)
	if err != nil && !errors.Is(err, errs.ErrNotFound) {
		return err
	}
	return nil
}

type copyResult struct {
	XMLName      xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CopyObjectResult"`
	ETag         string   `xml:"ETag"`
	LastModified string   `xml:"LastModified"`
}

// copyObject answers CopyObject within the bucket.
func (s *Server) copyObject(w http.ResponseWriter, r *http.Request, key string, g *Grant) error {
	src, err := url.PathUnescape(r.Header.Get("x-amz-copy-source"))
	if err != nil {
		return errInvalid("x-amz-copy-source is not a valid URL path")
	}
	src, _, _ = strings.Cut(src, "?") // a versionId: there is one version
	b, srcKey, _ := strings.Cut(strings.TrimPrefix(src, "/"), "/")
	if b != s.o.Bucket {
		return &apiError{status: http.StatusNotFound, code: "NoSuchBucket", msg: "The specified bucket does not exist"}
	}
	if err := s.checkKey(srcKey); err != nil {
		return err
	}
	if !g.mayRead(srcKey) {
		return errOutOfScope()
	}
	opts, err := writeOptions(r)
	if err != nil {
		return err
	}
	opts.ContentMD5 = nil
	rd, err := s.store.NewReader(r.Context(), srcKey)
	if err != nil {
		return err
	}
	defer rd.Close()
	if err := s.write(r, key, rd, opts); err != nil {
		return err
	}
	a, err := s.store.Stat(r.Context(), key)
	if err != nil {
		return err
	}
	return writeXML(w, http.StatusOK, copyResult{ETag: etag(a.Size, a.ModTime), LastModified: a.ModTime.UTC().Format(time.RFC3339Nano)})
}

type deleteRequest struct {
	Quiet   bool `xml:"Quiet"`
	Objects []struct {
		Key string `xml:"Key"`
	} `xml:"Object"`
}

type deleteResult struct {
	XMLName xml.Name      `xml:"http://s3.amazonaws.com/doc/2006-03-01/ DeleteResult"`
	Deleted []deletedKey  `xml:"Deleted"`
	Errors  []deleteError `xml:"Error"`
}

type deletedKey struct {
	Key string `xml:"Key"`
}

type deleteError struct {
	Key     string `xml:"Key"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// maxDeleteKeys is DeleteObjects' limit per request (S3's).
const maxDeleteKeys = 1000

// deleteObjects answers DeleteObjects (POST ?delete).
func (s *Server) deleteObjects(w http.ResponseWriter, r *http.Request, sig signed) error {
	var req deleteRequest
	if err := readXML(r, sig, &req); err != nil {
		return err
	}
	if len(req.Objects) > maxDeleteKeys {
		return &apiError{status: http.StatusBadRequest, code: "MalformedXML", msg: "at most 1000 keys may be deleted in one request"}
	}
	var res deleteResult
	for _, o := range req.Objects {
		err := s.checkKey(o.Key)
		if err == nil {
			err = s.checkWritable(o.Key)
		}
		if err == nil && !sig.grant.mayWrite(o.Key) {
			err = errOutOfScope()
		}
		if err == nil {
			err = s.deleteKey(r.Context(), o.Key)
		}
		if err != nil {
			ae, known := toAPI(err)
			if !known {
				s.o.Log.Error("s3 endpoint: delete", "error", err)
			}
			res.Errors = append(res.Errors, deleteError{Key: o.Key, Code: ae.code, Message: ae.msg})
			continue
		}
		if !req.Quiet {
			res.Deleted = append(res.Deleted, deletedKey{Key: o.Key})
		}
	}
	return writeXML(w, http.StatusOK, res)
}

// maxXMLBody bounds the XML bodies of DeleteObjects and
// CompleteMultipartUpload (10,000 parts fit).
const maxXMLBody = 2 << 20

// readXML reads a small XML request body, checked against its signed
// SHA-256 and its Content-MD5.
func readXML(r *http.Request, sig signed, v any) error {
	body, err := io.ReadAll(io.LimitReader(newHashedBody(r.Body, sig.payloadHash), maxXMLBody+1))
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return ae
		}
		return &apiError{status: http.StatusBadRequest, code: "IncompleteBody", msg: "the request body could not be read"}
	}
	if len(body) > maxXMLBody {
		return &apiError{status: http.StatusBadRequest, code: "MalformedXML", msg: "the request body is too large"}
	}
	if h := r.Header.Get("Content-MD5"); h != "" {
		sum := md5.Sum(body)
		if base64.StdEncoding.EncodeToString(sum[:]) != h {
			return errBadDigest()
		}
	}
	if err := xml.Unmarshal(body, v); err != nil {
		return &apiError{status: http.StatusBadRequest, code: "MalformedXML", msg: "The XML you provided was not well-formed or did not validate against our published schema."}
	}
	return nil
}
