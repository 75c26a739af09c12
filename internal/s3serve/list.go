package s3serve

import (
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"fmgr.dev/internal/blob"
)

// maxListKeys is the most a list answers at once (S3's).
const maxListKeys = 1000

type listResult struct {
	XMLName     xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name        string   `xml:"Name"`
	Prefix      string   `xml:"Prefix"`
	Delimiter   string   `xml:"Delimiter,omitempty"`
	MaxKeys     int      `xml:"MaxKeys"`
	IsTruncated bool     `xml:"IsTruncated"`
	// V2
	KeyCount              *int   `xml:"KeyCount,omitempty"`
	ContinuationToken     string `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string `xml:"NextContinuationToken,omitempty"`
	StartAfter            string `xml:"StartAfter,omitempty"`
	// V1
	Marker     *string `xml:"Marker,omitempty"`
	NextMarker string  `xml:"NextMarker,omitempty"`

	EncodingType   string         `xml:"EncodingType,omitempty"`
	Contents       []listObject   `xml:"Contents"`
	CommonPrefixes []commonPrefix `xml:"CommonPrefixes"`
}

type listObject struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
}

type commonPrefix struct {
	Prefix string `xml:"Prefix"`
}

// list answers ListObjectsV2 (list-type=2) and ListObjects: the keys under
// prefix in key order, those with the delimiter after the prefix rolled up
// into common prefixes, max-keys at a time. A scoped key lists only what
// it may read: a prefix wholly outside its grant is refused, others are
// filtered.
func (s *Server) list(w http.ResponseWriter, r *http.Request, g *Grant) error {
	q := r.URL.Query()
	v2 := q.Get("list-type") == "2"
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	if !g.mayList(prefix) {
		return errOutOfScope()
	}
	maxKeys := maxListKeys
	if v := q.Get("max-keys"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return errInvalid("max-keys must be a non-negative integer")
		}
		maxKeys = min(n, maxListKeys)
	}
	encode := func(v string) string { return v }
	switch q.Get("encoding-type") {
	case "":
	case "url":
		encode = func(v string) string { return escape(v, false) }
	default:
		return errInvalid("encoding-type must be url")
	}

	res := listResult{Name: s.o.Bucket, Prefix: encode(prefix), Delimiter: encode(delim), MaxKeys: maxKeys, EncodingType: q.Get("encoding-type")}
	// after: items at or before it were answered already.
	var after string
	if v2 {
		if tok := q.Get("continuation-token"); tok != "" {
			b, err := base64.RawURLEncoding.DecodeString(tok)
			if err != nil {
				return errInvalid("The continuation token provided is incorrect")
			}
			after, res.ContinuationToken = string(b), tok
		} else if sa := q.Get("start-after"); sa != "" {
			after, res.StartAfter = sa, encode(sa)
		}
	} else {
		m := q.Get("marker")
		after, res.Marker = m, &m
	}

	var last string
	count := 0
	objs, err := s.objects(r, prefix, g)
	if err != nil {
		return err
	}
	for _, o := range objs {
		item, isPrefix := o.Key, false
		if delim != "" {
			if i := strings.Index(o.Key[len(prefix):], delim); i >= 0 {
				item, isPrefix = o.Key[:len(prefix)+i+len(delim)], true
			}
		}
		if item <= after || (isPrefix && item == last) {
			continue
		}
		if count == maxKeys {
			res.IsTruncated = true
			break
		}
		count++
		last = item
		if isPrefix {
			res.CommonPrefixes = append(res.CommonPrefixes, commonPrefix{Prefix: encode(item)})
			continue
		}
		res.Contents = append(res.Contents, listObject{Key: encode(o.Key), LastModified: o.ModTime.UTC().Format(time.RFC3339Nano),
			ETag: etag(o.Size, o.ModTime), Size: o.Size, StorageClass: "STANDARD"})
	}
	if v2 {
		res.KeyCount = &count
		if res.IsTruncated {
			res.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(last))
		}
	} else if res.IsTruncated {
		res.NextMarker = encode(last)
	}
	return writeXML(w, http.StatusOK, res)
}

// objects returns the store's objects whose keys start with prefix, in
// key order. The store lists by directory-like prefixes, so it is asked
// for the prefix's last whole "directory" and the rest is filtered here; a
// prefix no key can have has none. Objects reached through a symbolic
// link are left out.
func (s *Server) objects(r *http.Request, prefix string, g *Grant) ([]blob.Object, error) {
	dir := ""
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		dir = prefix[:i+1]
	}
	if blob.ValidatePrefix(dir) != nil {
		return nil, nil
	}
	var out []blob.Object
	for o, err := range s.store.List(r.Context(), dir) {
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(o.Key, prefix) && g.mayRead(o.Key) && s.store.CheckNoLinks(o.Key) == nil {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b blob.Object) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}
