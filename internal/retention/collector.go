// Package retention collects what a manager no longer needs to keep: ended
// runs older than their project/domain's retention (config retention:),
// with every row and byte they own, and content-addressed run inputs that
// nothing references after a grace period.
//
// A run is collected when its root ended longer ago than its retention, no
// action of it is still going, and it is not pinned. It goes in this order:
//
//  1. its rows, in one transaction (store.Retention.DeleteRun): actions,
//     attempts, events, its trigger record, and the task specs no other
//     action or task version uses. From then on every API answers NotFound
//     for it. Its change log rows go at the end of the pass, a span of
//     versions at a time (compactChanges).
//  2. its objects: everything under its run base in storage (inputs of its
//     children, outputs, errors, reports, and the attempt logs shipped
//     there), except the attempt directories a cache entry points at, which
//     stay for as long as the entry does (the cache's own TTL and purge
//     decide that).
//  3. its attempt directories in the local executor's work dir (the working
//     directory and attempt.log of each attempt), with the same exception.
//  4. the code bundles its deleted specs named that no remaining spec, app
//     or trigger names, once they are older than retention.inputGrace (the
//     SDK reuses an upload for a day without asking): recorded in
//     gc_pending, deleted by a later pass when nothing names them then.
//
// Then the content-addressed inputs (offloaded-inputs/) that no run or
// trigger references and that were last written longer ago than
// retention.inputGrace go: those of the runs just deleted, those of a
// CreateRun that lost its insert race, an UploadInputs whose run never
// came. Every CreateRun writes its inputs again, also when they exist, so
// inputs a new run is about to use are never past the grace period.
//
// A crash between 1 and 4 leaves bytes that nothing references; it never
// removes bytes of a run that still exists.
package retention

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/runlayout"
	"fmgr.dev/internal/store"
)

// Collector deletes what retention no longer keeps.
type Collector struct {
	rows   *store.Retention
	blobs  *blob.Store
	cfg    config.Retention
	runDir func(store.RunKey) (string, error)
	now    func() time.Time
	log    *slog.Logger
	m      *metrics
}

// New returns a collector over the database's rows and the blob store.
// runDir locates a run's attempt directories on this host (nil: the
// executor keeps none, e.g. kubernetes).
func New(st *store.Store, blobs *blob.Store, cfg config.Retention, runDir func(store.RunKey) (string, error), log *slog.Logger) *Collector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Collector{rows: st.Retention, blobs: blobs, cfg: cfg, runDir: runDir, now: time.Now, log: log, m: newMetrics()}
}

// SetClock replaces the clock the collector ages runs and inputs by.
func (c *Collector) SetClock(now func() time.Time) { c.now = now }

// Report is what a pass freed (or, dry, would free).
type Report struct {
	Runs    int64 // runs deleted
	Actions int64 // their actions
	// Objects and Bytes: objects deleted from storage (run data, bundles,
	// inputs) and their size.
	Objects, Bytes int64
	// Dirs and DirBytes: attempt directories removed from the work dir.
	Dirs, DirBytes int64
	Bundles        int64 // code bundles deleted (counted in Objects too)
	Inputs         int64 // content-addressed input directories deleted
	// Kept: objects kept because a cache entry points at them.
	Kept int64
	// Deleted names the runs deleted, the first MaxListed of them.
	Deleted []store.RunKey
}

// MaxListed bounds Report.Deleted, so that a pass over a million runs does
// not hold all their names.
const MaxListed = 10000

// Collect makes one pass: every run past its retention, then the
// unreferenced inputs past the grace period. dryRun deletes nothing and
// reports what would go (code bundles, which only become unreferenced once
// runs are deleted, are not counted then).
func (c *Collector) Collect(ctx context.Context, dryRun bool) (Report, error) {
	var rep Report
	err := c.collectRuns(ctx, dryRun, &rep)
	if err == nil && rep.Runs > 0 && !dryRun {
		err = c.compactChanges(ctx)
	}
	if err == nil {
		err = c.collectDeferred(ctx, dryRun, &rep)
	}
	if err == nil {
		err = c.collectInputs(ctx, dryRun, &rep)
	}
	if !dryRun {
		c.m.record(rep, err)
	}
	return rep, err
}

// shortest is the shortest finite retention configured; forever is true
// when every retention is forever.
func (c *Collector) shortest() (d time.Duration, forever bool) {
	d, forever, _ = config.ParseKeep(c.cfg.Default)
	for _, r := range c.cfg.Rules {
		rd, rf, _ := config.ParseKeep(r.Keep)
		if rf {
			continue
		}
		if forever || rd < d {
			d, forever = rd, false
		}
	}
	return d, forever
}

func (c *Collector) collectRuns(ctx context.Context, dryRun bool, rep *Report) error {
	shortest, forever := c.shortest()
	if forever {
		return nil
	}
	now := c.now()
	var cursor *store.EndedCursor
	for {
		runs, err := c.rows.EndedRuns(ctx, now.Add(-shortest), cursor, c.batch())
		if err != nil {
			return err
		}
		for _, r := range runs {
			keep, forever := c.cfg.Keep(r.Project, r.Domain)
			if forever || now.Sub(r.EndedAt) < keep {
				continue
			}
			if err := c.collectRun(ctx, r, dryRun, rep); err != nil {
				if errors.Is(err, errs.ErrPrecondition) || errors.Is(err, errs.ErrNotFound) {
					c.log.Info("retention: run skipped", "run", r.RunKey.String(), "why", err)
					continue
				}
				return err
			}
		}
		if len(runs) < c.batch() {
			return nil
		}
		last := runs[len(runs)-1]
		cursor = &store.EndedCursor{EndedAt: last.EndedAt, ID: last.ID}
		if err := c.pause(ctx); err != nil {
			return err
		}
	}
}

func (c *Collector) batch() int {
	if c.cfg.BatchSize < 1 {
		return 100
	}
	return c.cfg.BatchSize
}

// pause waits between batches, so that a pass never holds the database
// (SQLite has one writer) for long.
func (c *Collector) pause(ctx context.Context) error {
	if c.cfg.BatchPause <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(c.cfg.BatchPause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// changeSpan is how many resource versions one statement of compactChanges
// covers.
const changeSpan = 10000

// compactChanges deletes the change log rows of collected runs' actions,
// a span of versions at a time with pauses between, up to the current
// version.
func (c *Collector) compactChanges(ctx context.Context) error {
	lo, err := c.rows.OldestChange(ctx)
	if err != nil {
		return err
	}
	current, err := c.rows.CurrentVersion(ctx)
	if err != nil {
		return err
	}
	for after := lo - 1; after < current; after += changeSpan {
		if _, err := c.rows.CompactDeleted(ctx, after, changeSpan); err != nil {
			return err
		}
		if after+changeSpan < current {
			if err := c.pause(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// collectRun deletes one run (see the package comment for the order).
func (c *Collector) collectRun(ctx context.Context, r store.EndedRun, dryRun bool, rep *Report) error {
	base := strings.TrimRight(r.RunOutputBase, "/")
	baseKey, err := c.blobs.Key(base)
	if base == "" || err != nil {
		baseKey = "" // outside this store: nothing of it to delete here
	}
	// keep: attempt directories (relative to the run base) a cache entry
	// points at.
	var keep []string
	if baseKey != "" {
		cached, err := c.rows.CachedOutputsUnder(ctx, c.blobs.URIs(baseKey))
		if err != nil {
			return err
		}
		for _, uri := range cached {
			if k, err := c.blobs.Key(uri); err == nil {
				if rel, ok := strings.CutPrefix(k, baseKey+"/"); ok && rel != "" {
					keep = append(keep, strings.Trim(rel, "/"))
				}
			}
		}
	}
	if !dryRun {
		gone, err := c.rows.DeleteRun(ctx, r.RunKey)
		if err != nil {
			return err
		}
		rep.Actions += gone.Actions
		defer c.deferBundles(ctx, gone.Specs)
	}
	rep.Runs++
	if len(rep.Deleted) < MaxListed {
		rep.Deleted = append(rep.Deleted, r.RunKey)
	}
	if baseKey != "" {
		if err := c.deletePrefix(ctx, baseKey+"/", keep, dryRun, rep); err != nil {
			return err
		}
		if !dryRun {
			if err := c.blobs.PruneDirs(baseKey); err != nil {
				c.log.Warn("retention: empty directories of a run stay", "run", r.RunKey.String(), "err", err)
			}
		}
	}
	if err := c.removeRunDir(r.RunKey, keep, dryRun, rep); err != nil {
		return err
	}
	return nil
}

// under reports whether rel (a path relative to a run's base) lies in one
// of the kept attempt directories.
func under(rel string, keep []string) bool {
	for _, k := range keep {
		if rel == k || strings.HasPrefix(rel, k+"/") {
			return true
		}
	}
	return false
}

// deletePrefix deletes the objects under prefix but those under keep
// (relative to prefix).
func (c *Collector) deletePrefix(ctx context.Context, prefix string, keep []string, dryRun bool, rep *Report) error {
	var doomed []blob.Object
	for o, err := range c.blobs.List(ctx, prefix) {
		if err != nil {
			return err
		}
		if under(strings.TrimPrefix(o.Key, prefix), keep) {
			rep.Kept++
			continue
		}
		doomed = append(doomed, o)
	}
	for _, o := range doomed {
		if !dryRun {
			if err := c.blobs.Delete(ctx, o.Key); err != nil && !errors.Is(err, errs.ErrNotFound) {
				return err
			}
		}
		rep.Objects++
		rep.Bytes += o.Size
	}
	return nil
}

// removeRunDir removes a run's attempt directories from the work dir, but
// those under keep (<action>/<attempt>, relative to the run).
func (c *Collector) removeRunDir(key store.RunKey, keep []string, dryRun bool, rep *Report) error {
	if c.runDir == nil {
		return nil
	}
	dir, err := c.runDir(key)
	if err != nil {
		return nil // a name that cannot be a directory has none
	}
	actions, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, a := range actions {
		attempts, err := os.ReadDir(filepath.Join(dir, a.Name()))
		if err != nil {
			continue
		}
		for _, at := range attempts {
			if under(a.Name()+"/"+at.Name(), keep) {
				continue
			}
			p := filepath.Join(dir, a.Name(), at.Name())
			rep.Dirs++
			rep.DirBytes += DirSize(p)
			if !dryRun {
				if err := os.RemoveAll(p); err != nil {
					return fmt.Errorf("remove attempt directory %s: %w", p, err)
				}
			}
		}
		if !dryRun {
			_ = os.Remove(filepath.Join(dir, a.Name())) // when empty
		}
	}
	if !dryRun {
		_ = os.Remove(dir) // when empty
	}
	return nil
}

// DirSize is the size of the regular files under dir (0 for none).
func DirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// deferBundles records the code bundles that specs (deleted with a run)
// name, to be deleted by collectDeferred once they are older than the
// grace period, if nothing references them by then: the SDK reuses a
// bundle it uploaded for a day without asking the manager, so a bundle
// younger than that may be named by the next run.
func (c *Collector) deferBundles(ctx context.Context, specs [][]byte) {
	for _, uri := range bundleURIs(specs) {
		key, err := c.blobs.Key(uri)
		if err != nil {
			continue // not in this store
		}
		st, err := c.blobs.Stat(ctx, key)
		if err != nil {
			continue // gone already
		}
		if err := c.rows.Defer(ctx, uri, st.ModTime.Add(c.cfg.InputGrace)); err != nil {
			c.log.Warn("retention: a code bundle stays", "uri", uri, "err", err)
		}
	}
}

// collectDeferred deletes the deferred code bundles whose time came and
// that nothing references.
func (c *Collector) collectDeferred(ctx context.Context, dryRun bool, rep *Report) error {
	if dryRun {
		return nil
	}
	for {
		due, err := c.rows.Due(ctx, c.now(), c.batch())
		if err != nil {
			return err
		}
		for _, uri := range due {
			if err := c.collectBundle(ctx, uri, rep); err != nil {
				return err
			}
			if err := c.rows.Done(ctx, uri); err != nil {
				return err
			}
		}
		if len(due) < c.batch() {
			return nil
		}
		if err := c.pause(ctx); err != nil {
			return err
		}
	}
}

func (c *Collector) collectBundle(ctx context.Context, uri string, rep *Report) error {
	key, err := c.blobs.Key(uri)
	if err != nil {
		return nil
	}
	used, err := c.rows.BundleReferenced(ctx, c.blobs.URIs(key))
	if err != nil || used {
		return err
	}
	st, err := c.blobs.Stat(ctx, key)
	if errors.Is(err, errs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.blobs.Delete(ctx, key); err != nil && !errors.Is(err, errs.ErrNotFound) {
		return err
	}
	if err := c.blobs.PruneDirs(path.Dir(key)); err != nil {
		c.log.Warn("retention: an empty directory of a code bundle stays", "key", key, "err", err)
	}
	rep.Bundles++
	rep.Objects++
	rep.Bytes += st.Size
	return nil
}

// collectInputs deletes content-addressed input directories whose every
// object is older than the grace period and that no run or trigger
// references (those of deleted runs, a CreateRun that lost its insert
// race, an UploadInputs whose run never came). Directories are judged in
// batches: one query per batch for the runs' inputs, the triggers' specs
// read once per pass.
func (c *Collector) collectInputs(ctx context.Context, dryRun bool, rep *Report) error {
	cutoff := c.now().Add(-c.cfg.InputGrace)
	var triggers [][]byte
	triggersRead := false
	var batch []string // keys of old directories
	judge := func() error {
		if len(batch) == 0 {
			return nil
		}
		if !triggersRead {
			var err error
			if triggers, err = c.rows.TriggerSpecs(ctx); err != nil {
				return err
			}
			triggersRead = true
		}
		unused, err := c.unusedInputs(ctx, batch, triggers)
		if err != nil {
			return err
		}
		batch = batch[:0]
		for _, key := range unused {
			if err := c.deleteInputDir(ctx, key, dryRun, rep); err != nil {
				return err
			}
		}
		return nil
	}
	// The listing is in key order, so a directory's objects come together:
	// each is judged once the listing has moved past it.
	var cur string
	young := false
	done := func() error {
		if cur == "" || young {
			return nil
		}
		if batch = append(batch, cur); len(batch) < c.batch() {
			return nil
		}
		if err := judge(); err != nil {
			return err
		}
		return c.pause(ctx)
	}
	for o, err := range c.blobs.List(ctx, runlayout.OffloadedInputsRoot+"/") {
		if err != nil {
			return err
		}
		if d := path.Dir(o.Key); d != cur {
			if err := done(); err != nil {
				return err
			}
			cur, young = d, false
		}
		if o.ModTime.After(cutoff) {
			young = true
		}
	}
	if err := done(); err != nil {
		return err
	}
	return judge()
}

// unusedInputs returns the input directories among keys that no run has
// as its inputs and no trigger's spec names, in any of the forms a URI of
// them takes (blob.Store.URIs; a run's input_uri names the directory, with
// or without a slash, or its inputs.pb).
func (c *Collector) unusedInputs(ctx context.Context, keys []string, triggers [][]byte) ([]string, error) {
	forms := map[string][]string{}
	var all []string
	for _, key := range keys {
		for _, uri := range c.blobs.URIs(key) {
			uri = strings.TrimRight(uri, "/")
			f := []string{uri, uri + "/", uri + "/inputs.pb"}
			forms[key] = append(forms[key], f...)
			all = append(all, f...)
		}
	}
	used, err := c.rows.RunInputsAmong(ctx, all)
	if err != nil {
		return nil, err
	}
	var unused []string
	for _, key := range keys {
		if !slices.ContainsFunc(forms[key], func(f string) bool { return used[f] || namedIn(triggers, f) }) {
			unused = append(unused, key)
		}
	}
	return unused, nil
}

// namedIn reports whether one of specs contains uri.
func namedIn(specs [][]byte, uri string) bool {
	for _, s := range specs {
		if bytes.Contains(s, []byte(uri)) {
			return true
		}
	}
	return false
}

// deleteInputDir deletes one content-addressed inputs directory.
func (c *Collector) deleteInputDir(ctx context.Context, key string, dryRun bool, rep *Report) error {
	before := rep.Objects
	if err := c.deletePrefix(ctx, key+"/", nil, dryRun, rep); err != nil {
		return err
	}
	if rep.Objects > before {
		rep.Inputs++
	}
	if !dryRun {
		return c.blobs.PruneDirs(key)
	}
	return nil
}
