package runstate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"fmgr.dev/gen/go/flyteidl2/common"
	"fmgr.dev/gen/go/flyteidl2/workflow"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/listreq"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// actionTree is one WatchActions stream's view of a run: every action with
// the phases of all its descendants (EnrichedAction.children_phase_counts,
// the run page's badges and fan-out tables) and whether it meets the
// stream's filters. An action meets them when it matches them itself or
// when a descendant does: the console shows the path to every match.
type actionTree struct {
	match func(*store.Action) bool
	nodes map[string]*treeNode
	// orphans are actions seen before their parent, by parent name.
	orphans map[string][]string
	// held are the actions not shown yet because an ancestor is not known
	// yet: a change whose row came too early is skipped (rowOf), so a child
	// can come before its parent, which the stream shows first.
	held map[string]bool
}

type treeNode struct {
	row    *store.Action
	parent string // "" for the root
	// attached is set once the node's counts are part of its ancestors'.
	attached bool
	// counts are the phases of every descendant.
	counts map[phase.Phase]int32
	// matches says whether the action matches the filters itself;
	// matching is how many of its descendants do.
	matches  bool
	matching int
}

func newActionTree(match func(*store.Action) bool) *actionTree {
	return &actionTree{match: match, nodes: map[string]*treeNode{}, orphans: map[string][]string{}, held: map[string]bool{}}
}

// put records a row (new, or a newer one of a known action) and returns
// the names of the actions whose view changed: the action and, when its
// phase or match changed, all its ancestors; none while an ancestor of the
// action is not known, and with a new action, the held ones it shows.
func (t *actionTree) put(a *store.Action) []string {
	changed := t.record(a)
	if !t.shown(t.nodes[a.Name]) {
		t.held[a.Name] = true
		return nil
	}
	if len(t.held) > 0 { // few, and only while a parent is on its way
		for name := range t.held {
			if t.shown(t.nodes[name]) {
				delete(t.held, name)
				changed = append(changed, name)
			}
		}
	}
	return changed
}

// shown reports whether n and all its ancestors are known.
func (t *actionTree) shown(n *treeNode) bool {
	for ; n.parent != ""; n = t.nodes[n.parent] {
		if !n.attached {
			return false
		}
	}
	return true
}

// record is put without holding back.
func (t *actionTree) record(a *store.Action) []string {
	n, known := t.nodes[a.Name]
	if !known {
		n = &treeNode{row: a, counts: map[phase.Phase]int32{}, matches: t.match(a)}
		if a.ParentName != nil {
			n.parent = *a.ParentName
		}
		t.nodes[a.Name] = n
		// Children that came first hang under it now.
		for _, child := range t.orphans[a.Name] {
			c := t.nodes[child]
			t.addSubtree(n, c, 1)
			c.attached = true
		}
		delete(t.orphans, a.Name)
		return t.attach(n)
	}
	old, oldMatch := n.row.Phase, n.matches
	n.row, n.matches = a, t.match(a)
	if old == a.Phase && oldMatch == n.matches || !n.attached {
		return []string{a.Name}
	}
	changed := []string{a.Name}
	for p := t.nodes[n.parent]; p != nil; p = t.parentOf(p) {
		p.counts[old]--
		if p.counts[old] == 0 {
			delete(p.counts, old)
		}
		p.counts[a.Phase]++
		p.matching += boolInt(n.matches) - boolInt(oldMatch)
		changed = append(changed, p.row.Name)
	}
	return changed
}

// attach adds a new node's subtree to its ancestors.
func (t *actionTree) attach(n *treeNode) []string {
	changed := []string{n.row.Name}
	if n.parent == "" {
		n.attached = true
		return changed
	}
	parent := t.nodes[n.parent]
	if parent == nil {
		t.orphans[n.parent] = append(t.orphans[n.parent], n.row.Name)
		return changed
	}
	n.attached = true
	for p := parent; p != nil; p = t.parentOf(p) {
		t.addSubtree(p, n, 1)
		changed = append(changed, p.row.Name)
	}
	return changed
}

// addSubtree adds (sign 1) n and its descendants to p's counts.
func (t *actionTree) addSubtree(p, n *treeNode, sign int32) {
	p.counts[n.row.Phase] += sign
	for ph, c := range n.counts {
		p.counts[ph] += sign * c
	}
	p.matching += int(sign) * (n.matching + boolInt(n.matches))
}

// parentOf is n's parent while n hangs in the tree, nil at the top.
func (t *actionTree) parentOf(n *treeNode) *treeNode {
	if n.parent == "" || !n.attached {
		return nil
	}
	return t.nodes[n.parent]
}

// enriched is the stream's view of one action.
func (t *actionTree) enriched(name string) *workflow.EnrichedAction {
	n := t.nodes[name]
	e := &workflow.EnrichedAction{Action: ActionOf(n.row), MeetsFilter: n.matches || n.matching > 0}
	if len(n.counts) > 0 {
		e.ChildrenPhaseCounts = make(map[int32]int32, len(n.counts))
		for ph, c := range n.counts {
			e.ChildrenPhaseCounts[int32(ph.Proto())] = c
		}
	}
	return e
}

// batch is the views of names, each once, oldest action first.
func (t *actionTree) batch(names []string) []*workflow.EnrichedAction {
	slices.SortFunc(names, func(a, b string) int {
		ra, rb := t.nodes[a].row, t.nodes[b].row
		if c := ra.CreatedAt.Compare(rb.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(ra.ID, rb.ID)
	})
	names = slices.Compact(names)
	out := make([]*workflow.EnrichedAction, len(names))
	for i, name := range names {
		out[i] = t.enriched(name)
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// actionFilter reads WatchActionsRequest.filter as the official console
// sends it: field NAME with CONTAINS_CASE_INSENSITIVE (on the action's
// function or action name) and PHASE with VALUE_IN or EQUAL (numbers or
// names); field names in any case. All filters must hold.
func actionFilter(filters []*common.Filter) (func(*store.Action) bool, error) {
	var preds []func(*store.Action) bool
	for i, f := range filters {
		where := fmt.Sprintf("filter[%d]", i)
		field, fn := strings.ToUpper(f.GetField()), f.GetFunction()
		switch {
		case field == "NAME" && fn == common.Filter_CONTAINS_CASE_INSENSITIVE:
			if len(f.GetValues()) != 1 {
				return nil, errs.Invalidf("%s: NAME %s needs exactly one value, got %d", where, fn, len(f.GetValues()))
			}
			needle := strings.ToLower(f.GetValues()[0])
			preds = append(preds, func(a *store.Action) bool {
				return strings.Contains(strings.ToLower(a.ShortName), needle) || strings.Contains(strings.ToLower(a.Name), needle)
			})
		case field == "PHASE" && (fn == common.Filter_VALUE_IN || fn == common.Filter_EQUAL):
			if len(f.GetValues()) == 0 {
				return nil, errs.Invalidf("%s: PHASE %s needs at least one value", where, fn)
			}
			set := map[phase.Phase]bool{}
			for _, v := range f.GetValues() {
				p, err := listreq.ParsePhase(v)
				if err != nil {
					return nil, errs.Invalidf("%s: %v", where, err)
				}
				set[p] = true
			}
			preds = append(preds, func(a *store.Action) bool { return set[a.Phase] })
		default:
			return nil, errs.Invalidf("%s: %s %s is not supported; use NAME CONTAINS_CASE_INSENSITIVE or PHASE VALUE_IN", where, f.GetField(), fn)
		}
	}
	return func(a *store.Action) bool {
		for _, p := range preds {
			if !p(a) {
				return false
			}
		}
		return true
	}, nil
}
