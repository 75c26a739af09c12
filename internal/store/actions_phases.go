package store

import (
	"context"
	"fmt"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/phase"
)

// phasesChunk bounds the keys bound into one statement (the databases cap a
// statement's parameters; each key takes five).
const phasesChunk = 200

// Phases returns the phase of each of keys that exists, in one query per
// phasesChunk keys whatever runs they belong to (the cache's heartbeat asks
// about every reservation holder at once; a Get each would be a query per
// action).
func (r *Actions) Phases(ctx context.Context, keys []ActionKey) (map[ActionKey]phase.Phase, error) {
	out := make(map[ActionKey]phase.Phase, len(keys))
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), phasesChunk)]
		keys = keys[len(chunk):]
		tuples := make([][]any, len(chunk))
		for i, k := range chunk {
			tuples[i] = []any{k.Org, k.Project, k.Domain, k.RunName, k.Name}
		}
		var rows []struct {
			Org, Project, Domain, RunName, Name string
			Phase                               phase.Phase
		}
		err := r.db.WithContext(ctx).Model(&Action{}).Select("org, project, domain, run_name, name, phase").
			Where("(org, project, domain, run_name, name) IN ?", tuples).Scan(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("phases of %d actions: %w", len(chunk), db.Translate(err))
		}
		for _, row := range rows {
			out[RunKey{Org: row.Org, Project: row.Project, Domain: row.Domain, RunName: row.RunName}.Action(row.Name)] = row.Phase
		}
	}
	return out, nil
}
