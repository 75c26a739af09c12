package store

import (
	"regexp"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

// createPiped records n's creation for the batch's pipeline (pipeline.go)
// as one statement that reads nothing first: the action's row, then its
// spec, change, first attempt and first event, each of the last two taking
// the new row's id from the insert ("FROM s1"). It checks itself that the
// row went in and that the parent is there; when either is not so (the
// action exists already, a lost race, a wrong parent) the job takes the
// long way, which reads and tells those apart. The returned action gets its
// id once the pipeline ran.
func createPiped(w *writeTx, n NewAction) (*Action, error) {
	if n.Spec != nil && n.SpecDigest != SpecDigest(n.Spec) {
		return nil, errs.Invalidf("task spec digest %q does not match its content", n.SpecDigest)
	}
	rv := w.version()
	a := n.row(rv)
	first := Event{Attempt: 1, Phase: a.Phase, Version: 0, OccurredAt: a.CreatedAt}
	if err := checkEvents(a, []Event{first}); err != nil {
		return nil, err
	}
	insert, args := insertSQL(w.rec.g, a)
	ch := w.chain()
	ch.queued = append(ch.queued, statement{sql: insert, args: args}) // s1
	if n.Spec != nil {
		if err := ch.add("", "INSERT INTO task_specs (digest, spec, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
			n.SpecDigest, n.Spec, db.Now()); err != nil {
			return nil, err
		}
	}
	if err := appendChange(ch, rv, ChangeAdded, a.ActionKey, a.UpdatedAt); err != nil {
		return nil, err
	}
	err := ch.add("", "INSERT INTO action_attempts (action_id, attempt, phase, started_at, ended_at) SELECT id, 1, ?, ?, ? FROM s1",
		a.Phase, a.CreatedAt, a.EndedAt)
	if err != nil {
		return nil, err
	}
	err = ch.add("", `INSERT INTO action_events (action_id, attempt, phase, version, occurred_at, recorded_at, reason, info)
SELECT id, 1, ?, 0, ?, ?, ?, ? FROM s1`, first.Phase, first.OccurredAt, db.Now(), first.Reason, first.Info)
	if err != nil {
		return nil, err
	}
	check, checkArgs := "(SELECT COUNT(*) FROM s1) = 1", []any(nil)
	if n.ParentName != "" {
		k := n.Key
		check += " AND EXISTS (SELECT 1 FROM actions WHERE org = ? AND project = ? AND domain = ? AND run_name = ? AND name = ?)"
		checkArgs = []any{k.Org, k.Project, k.Domain, k.RunName, n.ParentName}
	}
	var ok int
	ch.record("SELECT (SELECT id FROM s1), 1 / ("+check+")::int", checkArgs, []any{&a.ID, &ok}, errTakeTheLongWay)
	return a, nil
}

// dollar is a PostgreSQL placeholder as gorm writes it.
var dollar = regexp.MustCompile(`\$[0-9]+`)

// insertSQL is the INSERT of a (ON CONFLICT DO NOTHING, RETURNING its id)
// as gorm builds it, with ? placeholders (gorm numbers its arguments in
// order, and an action's columns hold no slices to expand).
func insertSQL(g *gorm.DB, a *Action) (string, []any) {
	q := g.Session(&gorm.Session{DryRun: true, NewDB: true}).Clauses(clause.OnConflict{DoNothing: true})
	if a.SpecDigest == "" {
		q = q.Omit("spec_digest") // NULL, so the foreign key does not apply
	}
	st := q.Create(a).Statement
	return dollar.ReplaceAllString(st.SQL.String(), "?"), st.Vars
}
