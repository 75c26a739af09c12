package store

import (
	"fmt"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
)

// Substring is a "contains" condition on a text column.
type Substring struct {
	Text string
	// IgnoreCase compares ASCII letters without case (both databases fold
	// only ASCII in lower()).
	IgnoreCase bool
}

// whereContains narrows q to rows whose column col contains s. LIKE is not
// used: its case rules differ between the databases and its wildcards
// would need escaping; instr/strpos compare exactly on both.
func whereContains(q *gorm.DB, col string, s Substring) *gorm.DB {
	fn := "instr"
	if db.Dialect(q) == db.Postgres {
		fn = "strpos"
	}
	if s.IgnoreCase {
		return q.Where(fmt.Sprintf("%s(lower(%s), lower(?)) > 0", fn, col), s.Text)
	}
	return q.Where(fmt.Sprintf("%s(%s, ?) > 0", fn, col), s.Text)
}

// TextOp compares a text column with values.
type TextOp int

const (
	TextEq TextOp = iota
	TextNe
	TextGt
	TextGte
	TextLt
	TextLte
	TextContains
	TextIn
	TextNotIn
)

// TextCond is one condition on a text column of a listing; which columns a
// listing accepts is its own allow-list.
type TextCond struct {
	Column string
	Op     TextOp
	Values []string // one, except for TextIn and TextNotIn
}

var textOps = map[TextOp]string{TextEq: "=", TextNe: "<>", TextGt: ">", TextGte: ">=", TextLt: "<", TextLte: "<="}

// whereText narrows q by c, whose column must already be allow-listed.
func whereText(q *gorm.DB, c TextCond) *gorm.DB {
	switch c.Op {
	case TextContains:
		return whereContains(q, c.Column, Substring{Text: c.Values[0]})
	case TextIn:
		return q.Where(c.Column+" IN ?", c.Values)
	case TextNotIn:
		return q.Where(c.Column+" NOT IN ?", c.Values)
	default:
		return q.Where(c.Column+" "+textOps[c.Op]+" ?", c.Values[0])
	}
}
