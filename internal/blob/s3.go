package blob

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"

	"fmgr.dev/internal/errs"
)

// S3Options reach an S3 or S3-compatible store (storage.s3.* in the
// configuration). The zero value is AWS S3 with the default credential
// chain (environment, shared config, web identity, instance role).
type S3Options struct {
	// Endpoint is the store's base URL (http://host:9000) for S3-compatible
	// stores; "" is AWS's regional endpoint.
	Endpoint string
	// Region is the bucket's region; "" takes AWS_REGION (and, with an
	// Endpoint, falls back to us-east-1, which S3-compatible stores accept).
	Region string
	// AccessKeyID and SecretAccessKey are static credentials; both or
	// neither. SecretAccessKey is a secret: never logged nor printed.
	AccessKeyID, SecretAccessKey string
	// ForcePathStyle addresses buckets as <endpoint>/<bucket>/<key> rather
	// than <bucket>.<endpoint>/<key>; most S3-compatible stores need it.
	ForcePathStyle bool
	// EmulateConditionalWrites is for stores that ignore If-None-Match:
	// create-only writes then check for the object and write it, two steps
	// that racing writers can interleave (the later write wins). Without it
	// such a store is refused by CheckConditionalWrites.
	EmulateConditionalWrites bool
}

// String never shows the secret key.
func (o S3Options) String() string {
	return fmt.Sprintf("s3{endpoint=%q region=%q accessKeyID=%q pathStyle=%v}", o.Endpoint, o.Region, o.AccessKeyID, o.ForcePathStyle)
}

// GoString is String, so %#v does not print the secret key either.
func (o S3Options) GoString() string { return o.String() }

// Options tune Open for a store's driver.
type Options struct {
	S3 S3Options
	// FileAlias, for a file store, is s3://<bucket>: URI then names objects
	// as s3://<bucket>/<key> (alias.go).
	FileAlias string
}

// s3Store is what a Store on S3 keeps besides its gocloud bucket.
type s3Store struct {
	client *s3.Client
	bucket string
	// prefix is "" or "<prefix>/", the part of every object key before the
	// Store's key.
	prefix string
	opts   S3Options
}

// regionForEndpoint is the region used with an Endpoint when none is
// configured: S3-compatible stores accept it, and SigV4 needs one.
const regionForEndpoint = "us-east-1"

func openS3(ctx context.Context, u *url.URL, o S3Options) (*Store, error) {
	if u.Host == "" {
		return nil, errs.Invalidf("s3 storage URL must name a bucket (s3://bucket[/prefix])")
	}
	if u.RawQuery != "" {
		return nil, errs.Invalidf("s3 storage URL takes no query parameters (s3://bucket[/prefix]); set the endpoint, region and credentials with storage.s3.*")
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("s3 storage URL prefix: %w", err)
		}
	}
	if (o.AccessKeyID == "") != (o.SecretAccessKey == "") {
		return nil, errs.Invalidf("s3 storage: give both an access key ID and a secret access key, or neither")
	}
	client, err := newS3Client(ctx, o)
	if err != nil {
		return nil, err
	}
	b, err := s3blob.OpenBucket(ctx, client, u.Host, nil)
	if err != nil {
		return nil, fmt.Errorf("opening s3 bucket %s: %w", u.Host, err)
	}
	uriPrefix := "s3://" + u.Host + "/"
	st := &s3Store{client: client, bucket: u.Host, opts: o}
	if prefix != "" {
		b = gcblob.PrefixedBucket(b, prefix+"/")
		uriPrefix += prefix + "/"
		st.prefix = prefix + "/"
	}
	return &Store{bucket: b, kind: KindS3, uriPrefix: uriPrefix, s3: st}, nil
}

func newS3Client(ctx context.Context, o S3Options) (*s3.Client, error) {
	load := []func(*awsconfig.LoadOptions) error{
		// Checksums only where S3 requires them: S3-compatible stores do not
		// all understand the newer trailing checksums, and presigned URLs
		// must not ask clients for them.
		awsconfig.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		awsconfig.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if o.Region != "" {
		load = append(load, awsconfig.WithRegion(o.Region))
	}
	if o.AccessKeyID != "" {
		load = append(load, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("s3 storage: loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" && o.Endpoint != "" {
		cfg.Region = regionForEndpoint
	}
	return s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.ForcePathStyle
	}), nil
}

// ProbePrefix is where CheckConditionalWrites writes its probe objects.
const ProbePrefix = ".flyte-manager-probe/"

// ErrNoConditionalWrites: the store ignores If-None-Match.
var ErrNoConditionalWrites = errors.New("the store ignores conditional writes (If-None-Match)")

// CheckConditionalWrites proves, on S3 stores, that the store honours
// If-None-Match: a create-only write over an object it just wrote must be
// refused. Uploads and cache entries rely on it never to replace one
// another. A store that does not is an error wrapping
// ErrNoConditionalWrites, unless the store was opened with
// EmulateConditionalWrites. Other stores pass at once. The probe object
// is deleted afterwards.
func (s *Store) CheckConditionalWrites(ctx context.Context) error {
	if s.s3 == nil || s.s3.opts.EmulateConditionalWrites {
		return nil
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	key := ProbePrefix + hex.EncodeToString(id[:])
	if err := s.Put(ctx, key, []byte("first"), &WriteOptions{IfNotExist: true}); err != nil {
		return fmt.Errorf("writing the storage probe %s: %w", s.URI(key), err)
	}
	defer func() { _ = s.Delete(context.WithoutCancel(ctx), key) }()
	err := s.Put(ctx, key, []byte("second"), &WriteOptions{IfNotExist: true})
	switch {
	case errors.Is(err, ErrObjectExists):
		return nil
	case err != nil:
		return fmt.Errorf("writing the storage probe %s again: %w", s.URI(key), err)
	}
	return ErrNoConditionalWrites
}

// createOnlyEmulated says whether a create-only write must be a check then
// a write (EmulateConditionalWrites).
func (s *Store) createOnlyEmulated() bool {
	return s.s3 != nil && s.s3.opts.EmulateConditionalWrites
}

// Presigned is a URL that lets a client reach an object in the store
// directly, without credentials.
type Presigned struct {
	URL string
	// Headers must be sent with the request (they are signed).
	Headers map[string]string
}

// CanPresign reports whether the store can presign URLs (S3 stores).
func (s *Store) CanPresign() bool { return s.s3 != nil }

// PresignOptions tune a presigned PUT.
type PresignOptions struct {
	// ContentMD5 binds the upload to that content: the store refuses any
	// other body.
	ContentMD5 []byte
	// IfNotExist makes the upload create-only (If-None-Match: *), when the
	// store honours it.
	IfNotExist bool
}

// Presign returns a URL granting method (GET or PUT) on key for expiresIn,
// signed with the store's credentials and pointing at its endpoint.
func (s *Store) Presign(ctx context.Context, method, key string, expiresIn time.Duration, o *PresignOptions) (Presigned, error) {
	if s.s3 == nil {
		return Presigned{}, fmt.Errorf("%s stores cannot presign URLs: %w", s.kind, errs.ErrPrecondition)
	}
	if err := s.check(key); err != nil {
		return Presigned{}, err
	}
	if o == nil {
		o = &PresignOptions{}
	}
	pc := s3.NewPresignClient(s.s3.client, s3.WithPresignExpires(expiresIn))
	full := aws.String(s.s3.prefix + key)
	bucket := aws.String(s.s3.bucket)
	var signedURL string
	var signed http.Header
	switch method {
	case http.MethodGet:
		r, err := pc.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: full})
		if err != nil {
			return Presigned{}, s.wrap("presign", key, err)
		}
		signedURL, signed = r.URL, r.SignedHeader
	case http.MethodPut:
		in := &s3.PutObjectInput{Bucket: bucket, Key: full}
		if len(o.ContentMD5) > 0 {
			in.ContentMD5 = aws.String(base64.StdEncoding.EncodeToString(o.ContentMD5))
		}
		if o.IfNotExist && !s.s3.opts.EmulateConditionalWrites {
			in.IfNoneMatch = aws.String("*")
		}
		r, err := pc.PresignPutObject(ctx, in)
		if err != nil {
			return Presigned{}, s.wrap("presign", key, err)
		}
		signedURL, signed = r.URL, r.SignedHeader
	default:
		return Presigned{}, errs.Invalidf("cannot presign method %q", method)
	}
	p := Presigned{URL: signedURL, Headers: map[string]string{}}
	for k, v := range signed {
		// Host is the URL's; the client sets it.
		if len(v) > 0 && !strings.EqualFold(k, "Host") {
			p.Headers[http.CanonicalHeaderKey(k)] = v[0]
		}
	}
	return p, nil
}
