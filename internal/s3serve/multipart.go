package s3serve

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Multipart uploads keep their parts as files in
// <StagingDir>/<upload id>/, beside a file naming the upload's key, until
// CompleteMultipartUpload writes them, in order, as one object into the
// store (which makes it visible at once, as a PutObject would) and removes
// them. An upload id is 32 random hex digits, so one client cannot guess
// another's.

const (
	maxPartNumber = 10000
	keyFile       = "key"
	// staleUploads: uploads neither completed nor aborted after this long
	// are removed at start.
	staleUploads = 7 * 24 * time.Hour
)

type initiateResult struct {
	XMLName  xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ InitiateMultipartUploadResult"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	UploadID string   `xml:"UploadId"`
}

type completeRequest struct {
	Parts []struct {
		PartNumber int    `xml:"PartNumber"`
		ETag       string `xml:"ETag"`
	} `xml:"Part"`
}

type completeResult struct {
	XMLName  xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CompleteMultipartUploadResult"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
}

type listUploadsResult struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListMultipartUploadsResult"`
	Bucket  string   `xml:"Bucket"`
}

type listPartsResult struct {
	XMLName  xml.Name   `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListPartsResult"`
	Bucket   string     `xml:"Bucket"`
	Key      string     `xml:"Key"`
	UploadID string     `xml:"UploadId"`
	Parts    []partInfo `xml:"Part"`
}

type partInfo struct {
	PartNumber   int    `xml:"PartNumber"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	LastModified string `xml:"LastModified"`
}

func errNoUpload() *apiError {
	return &apiError{status: http.StatusNotFound, code: "NoSuchUpload", msg: "The specified multipart upload does not exist. The upload ID might be invalid, or the multipart upload might have been aborted or completed."}
}

func (s *Server) createUpload(w http.ResponseWriter, r *http.Request, key string) error {
	var id [16]byte
	_, _ = rand.Read(id[:])
	upload := hex.EncodeToString(id[:])
	dir := filepath.Join(s.o.StagingDir, upload)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, keyFile), []byte(key), 0o600); err != nil {
		return err
	}
	return writeXML(w, http.StatusOK, initiateResult{Bucket: s.o.Bucket, Key: key, UploadID: upload})
}

// uploadDir is the staging directory of upload, which must be one of key.
func (s *Server) uploadDir(key, upload string) (string, error) {
	if b, err := hex.DecodeString(upload); err != nil || len(b) != 16 {
		return "", errNoUpload()
	}
	dir := filepath.Join(s.o.StagingDir, upload)
	k, err := os.ReadFile(filepath.Join(dir, keyFile))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && string(k) != key) {
		return "", errNoUpload()
	}
	return dir, err
}

func partNumber(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxPartNumber {
		return 0, errInvalid("Part number must be an integer between 1 and 10000, inclusive")
	}
	return n, nil
}

func (s *Server) uploadPart(w http.ResponseWriter, r *http.Request, key, upload string, sig signed) error {
	n, err := partNumber(r.URL.Query().Get("partNumber"))
	if err != nil {
		return err
	}
	dir, err := s.uploadDir(key, upload)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "part-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	h := md5.New()
	_, err = io.Copy(io.MultiWriter(f, h), newHashedBody(r.Body, sig.payloadHash))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return ae
		}
		return &apiError{status: http.StatusBadRequest, code: "IncompleteBody", msg: "the part's body could not be read whole"}
	}
	sum := h.Sum(nil)
	if want := r.Header.Get("Content-MD5"); want != "" && want != b64(sum) {
		return errBadDigest()
	}
	part := filepath.Join(dir, strconv.Itoa(n))
	// The part's MD5 first: a part is listed only once both exist.
	if err := os.WriteFile(part+md5Suffix, []byte(hex.EncodeToString(sum)), 0o600); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errNoUpload() // aborted meanwhile
		}
		return err
	}
	if err := os.Rename(f.Name(), part); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errNoUpload() // aborted meanwhile
		}
		return err
	}
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum)+`"`)
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) completeUpload(w http.ResponseWriter, r *http.Request, key, upload string, sig signed) error {
	dir, err := s.uploadDir(key, upload)
	if err != nil {
		return err
	}
	var req completeRequest
	if err := readXML(r, sig, &req); err != nil {
		return err
	}
	if len(req.Parts) == 0 {
		return &apiError{status: http.StatusBadRequest, code: "MalformedXML", msg: "a multipart upload needs at least one part"}
	}
	files := make([]string, len(req.Parts))
	for i, p := range req.Parts {
		if i > 0 && p.PartNumber <= req.Parts[i-1].PartNumber {
			return &apiError{status: http.StatusBadRequest, code: "InvalidPartOrder", msg: "The list of parts was not in ascending order. The parts list must be specified in order by part number."}
		}
		files[i] = filepath.Join(dir, strconv.Itoa(p.PartNumber))
		sum, err := partMD5(files[i])
		if err != nil || (p.ETag != "" && strings.Trim(p.ETag, `"`) != sum) {
			return &apiError{status: http.StatusBadRequest, code: "InvalidPart", msg: fmt.Sprintf("part %d was not uploaded, or its ETag does not match", p.PartNumber)}
		}
	}
	opts, err := writeOptions(r)
	if err != nil {
		return err
	}
	opts.ContentMD5 = nil
	parts := &concatFiles{files: files}
	err = s.write(r, key, parts, opts)
	parts.close()
	if err != nil {
		return err
	}
	_ = os.RemoveAll(dir)
	a, err := s.store.Stat(r.Context(), key)
	if err != nil {
		return err
	}
	return writeXML(w, http.StatusOK, completeResult{Location: "/" + s.o.Bucket + "/" + key, Bucket: s.o.Bucket, Key: key, ETag: etag(a.Size, a.ModTime)})
}

func (s *Server) abortUpload(w http.ResponseWriter, key, upload string) error {
	dir, err := s.uploadDir(key, upload)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listParts(w http.ResponseWriter, key, upload string) error {
	dir, err := s.uploadDir(key, upload)
	if err != nil {
		return err
	}
	res := listPartsResult{Bucket: s.o.Bucket, Key: key, UploadID: upload}
	for n := 1; n <= maxPartNumber; n++ {
		p := filepath.Join(dir, strconv.Itoa(n))
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		sum, err := partMD5(p)
		if err != nil {
			continue
		}
		res.Parts = append(res.Parts, partInfo{PartNumber: n, ETag: `"` + sum + `"`, Size: fi.Size(), LastModified: fi.ModTime().UTC().Format(time.RFC3339Nano)})
	}
	return writeXML(w, http.StatusOK, res)
}

// removeStaleUploads removes the staging directories of uploads older than
// staleUploads.
func (s *Server) removeStaleUploads() {
	entries, err := os.ReadDir(s.o.StagingDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleUploads {
			_ = os.RemoveAll(filepath.Join(s.o.StagingDir, e.Name()))
		}
	}
}

// md5Suffix names the file beside a part that holds its MD5 (hex).
const md5Suffix = ".md5"

// partMD5 is the MD5 of the part at p, which must exist.
func partMD5(p string) (string, error) {
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	b, err := os.ReadFile(p + md5Suffix)
	return string(b), err
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// concatFiles reads files one after the other.
type concatFiles struct {
	files []string
	cur   *os.File
}

func (c *concatFiles) close() {
	if c.cur != nil {
		_ = c.cur.Close()
	}
}

func (c *concatFiles) Read(p []byte) (int, error) {
	for {
		if c.cur == nil {
			if len(c.files) == 0 {
				return 0, io.EOF
			}
			f, err := os.Open(c.files[0])
			if err != nil {
				return 0, err
			}
			c.cur, c.files = f, c.files[1:]
		}
		n, err := c.cur.Read(p)
		if err == io.EOF {
			_ = c.cur.Close()
			c.cur = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}
