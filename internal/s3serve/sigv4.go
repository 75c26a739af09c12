package s3serve

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AWS Signature Version 4, as S3 checks it: the request's method, path,
// query, signed headers and payload hash are put in canonical form, and
// the signature over them, under a key derived from the secret, the date,
// the region and the service, must match the one the client sent (in the
// Authorization header, or in the query of a presigned URL).

const (
	sigAlgorithm     = "AWS4-HMAC-SHA256"
	unsignedPayload  = "UNSIGNED-PAYLOAD"
	headerAmzDate    = "X-Amz-Date"
	headerAmzContent = "X-Amz-Content-Sha256"
	amzDateFormat    = "20060102T150405Z"
	// maxClockSkew is how far a request's date may be from the server's
	// clock (S3's own limit).
	maxClockSkew = 15 * time.Minute
	// maxPresignExpiry is the longest a presigned URL may be valid (S3's).
	maxPresignExpiry = 7 * 24 * time.Hour
)

// signed is what a verified request was signed with.
type signed struct {
	// payloadHash is the hex SHA-256 the client declared for the body, or
	// "" when the body is not signed (UNSIGNED-PAYLOAD).
	payloadHash string
	// grant limits a scoped key (nil: a configured key, which may do
	// everything).
	grant *Grant
}

// authRequest is the parts of an Authorization header or a presigned URL.
type authRequest struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
	amzDate                          time.Time
	// presigned: the signature is in the query, which it then excludes.
	presigned bool
	expires   time.Duration
}

// verify checks r's SigV4 signature against the credentials lookup gives
// (access key ID → secret key and, for a scoped key, its grant). It
// returns an *apiError for every refusal.
func verify(r *http.Request, lookup func(id string) (string, *Grant, bool), now time.Time) (signed, error) {
	var a authRequest
	var err error
	switch {
	case r.Header.Get("Authorization") != "":
		a, err = parseAuthHeader(r)
	case r.URL.Query().Has("X-Amz-Signature"):
		a, err = parsePresigned(r.URL.Query())
	default:
		return signed{}, errAccessDenied("this endpoint requires requests signed with AWS Signature Version 4")
	}
	if err != nil {
		return signed{}, err
	}
	secret, grant, ok := lookup(a.accessKey)
	if !ok {
		return signed{}, &apiError{status: http.StatusForbidden, code: "InvalidAccessKeyId", msg: "The AWS Access Key Id you provided does not exist in our records."}
	}
	if a.service != "s3" {
		return signed{}, errAuthorization("the credential scope's service must be s3")
	}
	if a.amzDate.Format("20060102") != a.date {
		return signed{}, errAuthorization("the credential scope's date does not match the request's date")
	}
	if a.presigned {
		if now.Before(a.amzDate.Add(-maxClockSkew)) {
			return signed{}, errAccessDenied("the presigned URL is not valid yet")
		}
		if now.After(a.amzDate.Add(a.expires)) {
			return signed{}, errAccessDenied("Request has expired")
		}
	} else if d := now.Sub(a.amzDate); d > maxClockSkew || d < -maxClockSkew {
		return signed{}, &apiError{status: http.StatusForbidden, code: "RequestTimeTooSkewed", msg: "The difference between the request time and the server's time is too large."}
	}

	payload := unsignedPayload
	if !a.presigned {
		payload = r.Header.Get(headerAmzContent)
		switch {
		case payload == "":
			return signed{}, errAuthorization("the x-amz-content-sha256 header is required")
		case strings.HasPrefix(payload, "STREAMING-"):
			return signed{}, &apiError{status: http.StatusNotImplemented, code: "NotImplemented", msg: "chunked (streaming) signed payloads are not supported; sign the payload's SHA-256 or send UNSIGNED-PAYLOAD"}
		case payload != unsignedPayload && !isHexSHA256(payload):
			return signed{}, errAuthorization("the x-amz-content-sha256 header must be a hex SHA-256 or UNSIGNED-PAYLOAD")
		}
	}
	if !slices.Contains(a.signedHeaders, "host") {
		return signed{}, errAuthorization("the host header must be signed")
	}

	key := signingKey(secret, a.date, a.region, a.service)
	scope := strings.Join([]string{a.date, a.region, a.service, "aws4_request"}, "/")
	headers := canonicalHeaders(r, a.signedHeaders)
	query := canonicalQuery(r.URL.RawQuery, a.presigned)
	// Clients escape the path in slightly different ways (S3's canonical
	// form is every byte but the unreserved ones escaped, once); accept the
	// path as it was sent, and the strict escaping of what it names.
	for _, p := range candidatePaths(r) {
		creq := strings.Join([]string{r.Method, p, query, headers, strings.Join(a.signedHeaders, ";"), payload}, "\n")
		sum := sha256.Sum256([]byte(creq))
		toSign := strings.Join([]string{sigAlgorithm, a.amzDate.Format(amzDateFormat), scope, hex.EncodeToString(sum[:])}, "\n")
		want := hex.EncodeToString(hmacSHA256(key, toSign))
		if subtle.ConstantTimeCompare([]byte(want), []byte(a.signature)) == 1 {
			if grant != nil && !now.Before(grant.Expires) {
				return signed{}, errAccessDenied("the access key has expired")
			}
			s := signed{grant: grant}
			if payload != unsignedPayload {
				s.payloadHash = payload
			}
			return s, nil
		}
	}
	return signed{}, &apiError{status: http.StatusForbidden, code: "SignatureDoesNotMatch", msg: "The request signature we calculated does not match the signature you provided. Check your key and signing method."}
}

func parseAuthHeader(r *http.Request) (authRequest, error) {
	h := r.Header.Get("Authorization")
	alg, rest, ok := strings.Cut(h, " ")
	if !ok || alg != sigAlgorithm {
		return authRequest{}, errAuthorization("only " + sigAlgorithm + " (Signature Version 4) is supported")
	}
	var a authRequest
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			if err := a.setCredential(v); err != nil {
				return authRequest{}, err
			}
		case "SignedHeaders":
			a.signedHeaders = strings.Split(v, ";")
		case "Signature":
			a.signature = v
		}
	}
	if a.accessKey == "" || len(a.signedHeaders) == 0 || a.signature == "" {
		return authRequest{}, errAuthorization("the Authorization header needs Credential, SignedHeaders and Signature")
	}
	t, err := time.Parse(amzDateFormat, r.Header.Get(headerAmzDate))
	if err != nil {
		return authRequest{}, errAuthorization("the X-Amz-Date header is missing or not in the form 20060102T150405Z")
	}
	a.amzDate = t
	return a, nil
}

func parsePresigned(q url.Values) (authRequest, error) {
	if q.Get("X-Amz-Algorithm") != sigAlgorithm {
		return authRequest{}, errAuthorization("only " + sigAlgorithm + " (Signature Version 4) is supported")
	}
	a := authRequest{presigned: true, signature: q.Get("X-Amz-Signature")}
	if err := a.setCredential(q.Get("X-Amz-Credential")); err != nil {
		return authRequest{}, err
	}
	a.signedHeaders = strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	t, err := time.Parse(amzDateFormat, q.Get("X-Amz-Date"))
	if err != nil {
		return authRequest{}, errAuthorization("X-Amz-Date is missing or not in the form 20060102T150405Z")
	}
	a.amzDate = t
	secs, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || secs <= 0 || time.Duration(secs)*time.Second > maxPresignExpiry {
		return authRequest{}, errAuthorization("X-Amz-Expires must be a number of seconds up to 604800")
	}
	a.expires = time.Duration(secs) * time.Second
	return a, nil
}

// setCredential parses <key>/<date>/<region>/<service>/aws4_request.
func (a *authRequest) setCredential(v string) error {
	parts := strings.Split(v, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" || parts[0] == "" {
		return errAuthorization("the credential must be <access key>/<date>/<region>/s3/aws4_request")
	}
	a.accessKey, a.date, a.region, a.service = parts[0], parts[1], parts[2], parts[3]
	return nil
}

func canonicalHeaders(r *http.Request, names []string) string {
	var b strings.Builder
	for _, n := range names {
		var vals []string
		if n == "host" {
			vals = []string{r.Host}
		} else {
			vals = r.Header.Values(n)
			if n == "content-length" && len(vals) == 0 && r.ContentLength >= 0 {
				// net/http moves Content-Length out of the header map.
				vals = []string{strconv.FormatInt(r.ContentLength, 10)}
			}
		}
		for i, v := range vals {
			vals[i] = strings.Join(strings.Fields(v), " ")
		}
		b.WriteString(n)
		b.WriteByte(':')
		b.WriteString(strings.Join(vals, ","))
		b.WriteByte('\n')
	}
	return b.String()
}

// canonicalQuery sorts the query's pairs, each escaped strictly; a
// presigned URL's own signature is left out.
func canonicalQuery(raw string, presigned bool) string {
	type kv struct{ k, v string }
	var pairs []kv
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		k, _ = url.QueryUnescape(k)
		v, _ = url.QueryUnescape(v)
		if presigned && k == "X-Amz-Signature" {
			continue
		}
		pairs = append(pairs, kv{escape(k, true), escape(v, true)})
	}
	slices.SortFunc(pairs, func(a, b kv) int {
		if c := strings.Compare(a.k, b.k); c != 0 {
			return c
		}
		return strings.Compare(a.v, b.v)
	})
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p.k + "=" + p.v
	}
	return strings.Join(out, "&")
}

// candidatePaths are the canonical paths to try: as sent, and strictly
// escaped.
func candidatePaths(r *http.Request) []string {
	sent, _, _ := strings.Cut(r.RequestURI, "?")
	if sent == "" {
		sent = "/"
	}
	strict := escape(r.URL.Path, false)
	if strict == sent {
		return []string{sent}
	}
	return []string{sent, strict}
}

// escape is SigV4's URI encoding: every byte but A-Z a-z 0-9 - _ . ~
// becomes %XX; '/' stays unless slash is set.
func escape(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !slash:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func signingKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, "aws4_request")
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func isHexSHA256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// hashedBody checks, at the end of the body, that it hashes to the SHA-256
// the client signed; a body that does not fails its last Read, so no write
// that consumed it commits.
type hashedBody struct {
	r    io.Reader
	want string
	h    hashState
}

type hashState interface {
	io.Writer
	Sum([]byte) []byte
}

func newHashedBody(r io.Reader, want string) io.Reader {
	if want == "" {
		return r
	}
	return &hashedBody{r: r, want: want, h: sha256.New()}
}

func (b *hashedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.h.Write(p[:n])
	if err == io.EOF && hex.EncodeToString(b.h.Sum(nil)) != b.want {
		return n, &apiError{status: http.StatusBadRequest, code: "XAmzContentSHA256Mismatch", msg: "The provided 'x-amz-content-sha256' header does not match what was computed."}
	}
	return n, err
}
