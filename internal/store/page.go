package store

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"fmgr.dev/internal/errs"
)

// Page sizes.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// Page asks for one page of a list. Lists are keyset-paginated: the token
// names the last row returned, so rows inserted between calls neither
// repeat nor shift earlier rows out of the listing.
type Page struct {
	Limit int    // 0 means DefaultPageSize; capped at MaxPageSize
	Token string // "" for the first page, else the previous call's next token
}

func (p Page) limit() int {
	switch {
	case p.Limit <= 0:
		return DefaultPageSize
	case p.Limit > MaxPageSize:
		return MaxPageSize
	}
	return p.Limit
}

// cursor is the token's content: the sort key of the last row returned.
type cursor struct {
	Query string `json:"q"`           // which list and order the token belongs to
	Time  int64  `json:"t,omitempty"` // created_at in unix microseconds
	Str   string `json:"s,omitempty"` // a name, for name-ordered lists
	ID    int64  `json:"i"`           // tie-breaker: the row's surrogate id
}

func (c cursor) time() time.Time { return time.UnixMicro(c.Time).UTC() }

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor returns nil for the first page.
func decodeCursor(query, token string) (*cursor, error) {
	if token == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, errs.Invalidf("malformed page token")
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, errs.Invalidf("malformed page token")
	}
	if c.Query != query {
		return nil, errs.Invalidf("page token belongs to a different listing or sort order")
	}
	return &c, nil
}

// cut trims rows fetched with limit+1 to one page and returns the token
// for the next page ("" when this is the last one).
func cut[T any](rows []T, limit int, last func(T) cursor) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	return rows, last(rows[len(rows)-1]).encode()
}

// Size is the number of rows one page holds.
func (p Page) Size() int { return p.limit() }

// NameCursor is where a name-ordered page starts after: the last row's
// name and surrogate id.
type NameCursor struct {
	Name string
	ID   int64
}

// NameToken is the token of the page after (name, id), for repositories
// outside this package that list by name the way this package does.
func NameToken(query, name string, id int64) string {
	return cursor{Query: query, Str: name, ID: id}.encode()
}

// DecodeNameToken reads a NameToken of query; nil for the first page.
func DecodeNameToken(query, token string) (*NameCursor, error) {
	c, err := decodeCursor(query, token)
	if err != nil || c == nil {
		return nil, err
	}
	return &NameCursor{Name: c.Str, ID: c.ID}, nil
}

// EachAction calls fn for every action list returns, page by page of limit
// (a keyset listing such as ListChildren), until fn returns an error.
func EachAction(limit int, list func(Page) ([]Action, string, error), fn func(*Action) error) error {
	page := Page{Limit: limit}
	for {
		rows, next, err := list(page)
		if err != nil {
			return err
		}
		for i := range rows {
			if err := fn(&rows[i]); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		page.Token = next
	}
}
