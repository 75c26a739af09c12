package dataproxy

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/dataproxy"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/errs"
)

// UploadPrefix is the first segment of every upload key.
const UploadPrefix = "uploads"

// noOrg stands for the empty org (localhost SDKs send none) in keys.
const noOrg = "_"

// md5Dir names an upload directory after its content: base32 (standard
// alphabet, no padding) of the MD5, 26 characters.
var md5Dir = base32.StdEncoding.WithPadding(base32.NoPadding)

// CreateUploadLocation hands out a signed PUT URL for one file, served by
// this manager under /blobs/, and the native location tasks read it from.
//
// The key is uploads/<org or "_">/<project>/<domain>/<dir>/<filename>, where
// dir is filename_root when given, else base32 of content_md5 — so the same
// content always maps to the same key and asking twice is harmless. When
// filename_root is given and an object already exists there, the request
// must carry the same content_md5, or it is AlreadyExists. That check only
// gives an early answer: the URL itself never replaces a file, whenever it
// is used (see serveBlob).
func (s *Service) CreateUploadLocation(ctx context.Context, req *connect.Request[dataproxy.CreateUploadLocationRequest]) (*connect.Response[dataproxy.CreateUploadLocationResponse], error) {
	m := req.Msg
	key, err := uploadKey(m)
	if err != nil {
		return nil, err
	}
	if err := s.store.CheckKey(key); err != nil {
		return nil, err
	}
	if m.GetContentLength() < 0 {
		return nil, errs.Invalidf("content_length must not be negative")
	}
	if m.GetContentLength() > s.maxUpload {
		return nil, errs.Invalidf("content_length %d exceeds the upload limit of %d bytes", m.GetContentLength(), s.maxUpload)
	}
	expiresAt, err := s.expiry(m.GetExpiresIn())
	if err != nil {
		return nil, err
	}
	base, err := baseURL(ctx)
	if err != nil {
		return nil, err
	}
	if m.GetFilenameRoot() != "" {
		if err := s.checkOverwrite(ctx, key, m.GetContentMd5()); err != nil {
			return nil, err
		}
	}
	if s.presign {
		return s.presignUpload(ctx, key, m, expiresAt)
	}

	resp := &dataproxy.CreateUploadLocationResponse{
		SignedUrl: s.signer.Sign(base, http.MethodPut, key, expiresAt, m.GetContentMd5()),
		NativeUrl: s.store.URI(key),
		ExpiresAt: timestamppb.New(expiresAt),
		Headers:   map[string]string{},
	}
	if m.GetAddContentMd5Metadata() && len(m.GetContentMd5()) > 0 {
		resp.Headers["Content-MD5"] = base64.StdEncoding.EncodeToString(m.GetContentMd5())
	}
	return connect.NewResponse(resp), nil
}

// uploadKey validates the request's naming fields and builds the key.
func uploadKey(m *dataproxy.CreateUploadLocationRequest) (string, error) {
	if err := blob.ValidateName("project", m.GetProject()); err != nil {
		return "", err
	}
	if err := blob.ValidateName("domain", m.GetDomain()); err != nil {
		return "", err
	}
	org := m.GetOrg()
	if org == "" {
		org = noOrg
	} else if err := blob.ValidateName("org", org); err != nil {
		return "", err
	}
	if err := blob.ValidateName("filename", m.GetFilename()); err != nil {
		return "", err
	}
	sum := m.GetContentMd5()
	if len(sum) != 0 && len(sum) != md5.Size {
		return "", errs.Invalidf("content_md5 must be the %d raw bytes of an MD5 digest, got %d bytes", md5.Size, len(sum))
	}
	dir := m.GetFilenameRoot()
	switch {
	case dir != "":
		if err := blob.ValidatePath("filename_root", dir); err != nil {
			return "", err
		}
	case len(sum) > 0:
		dir = md5Dir.EncodeToString(sum)
	default:
		return "", errs.Invalidf("either content_md5 or filename_root is required")
	}
	key := fmt.Sprintf("%s/%s/%s/%s/%s/%s", UploadPrefix, org, m.GetProject(), m.GetDomain(), dir, m.GetFilename())
	if err := blob.ValidateKey(key); err != nil {
		// Every part is valid on its own, so only the total length is left.
		return "", errs.Invalidf("the upload path for %q is too long (limit %d bytes)", m.GetFilename(), blob.MaxKeyBytes)
	}
	return key, nil
}

// checkOverwrite refuses to hand out a URL that would replace an existing
// object at a caller-chosen location with different content.
func (s *Service) checkOverwrite(ctx context.Context, key string, sum []byte) error {
	ok, err := s.store.Exists(ctx, key)
	if err != nil || !ok {
		return err
	}
	if len(sum) == 0 {
		return fmt.Errorf("a file already exists at %s; send content_md5 to confirm it is the same content: %w", key, errs.ErrAlreadyExists)
	}
	have, err := s.store.MD5(ctx, key)
	if errors.Is(err, errs.ErrNotFound) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(have, sum) {
		return fmt.Errorf("a file with different content already exists at %s: %w", key, errs.ErrAlreadyExists)
	}
	return nil
}

// presignUpload answers CreateUploadLocation with a URL presigned for the
// store itself (storage.s3.presignedURLs). The content MD5, when given, is
// signed, so the store takes no other body. The URL is create-only
// (If-None-Match: *) when nothing is at key yet; when something is, the
// overwrite check above found it to be the same content (or the key is
// named after the content), and the upload may write those bytes again.
// The upload size limit is then the store's, not MaxUploadBytes.
func (s *Service) presignUpload(ctx context.Context, key string, m *dataproxy.CreateUploadLocationRequest, expiresAt time.Time) (*connect.Response[dataproxy.CreateUploadLocationResponse], error) {
	exists, err := s.store.Exists(ctx, key)
	if err != nil {
		return nil, err
	}
	if exists && len(m.GetContentMd5()) == 0 {
		return nil, fmt.Errorf("a file already exists at %s; send content_md5 to confirm it is the same content: %w", key, errs.ErrAlreadyExists)
	}
	p, err := s.store.Presign(ctx, http.MethodPut, key, expiresAt.Sub(s.now()), &blob.PresignOptions{ContentMD5: m.GetContentMd5(), IfNotExist: !exists})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&dataproxy.CreateUploadLocationResponse{
		SignedUrl: p.URL,
		NativeUrl: s.store.URI(key),
		ExpiresAt: timestamppb.New(expiresAt),
		Headers:   p.Headers,
	}), nil
}
