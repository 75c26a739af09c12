package store_test

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gorm.io/gorm"

	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/store"
)

// TestActiveIndexExcludesTerminalPhases: the partial index the executor's
// recovery scan relies on (actions_active_idx, migration 0002) must exclude
// exactly the terminal phases, or the scan either misses live actions or
// reads finished ones. The index is read back from the migrated database as
// each engine stores it.
func TestActiveIndexExcludesTerminalPhases(t *testing.T) {
	suite(t, func(t *testing.T, _ *store.Store, g *gorm.DB) {
		q := "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'actions_active_idx'"
		if g.Name() == "postgres" {
			q = "SELECT indexdef FROM pg_indexes WHERE indexname = 'actions_active_idx'"
		}
		var def string
		if err := g.Raw(q).Scan(&def).Error; err != nil || def == "" {
			t.Fatalf("index actions_active_idx not found (%v)", err)
		}
		_, where, ok := strings.Cut(strings.ToUpper(def), "WHERE")
		if !ok {
			t.Fatalf("index is not partial: %s", def)
		}
		var excluded []phase.Phase
		for _, n := range regexp.MustCompile(`\d+`).FindAllString(where, -1) {
			v, _ := strconv.Atoi(n)
			excluded = append(excluded, phase.Phase(v))
		}
		slices.Sort(excluded)
		if want := phase.Terminals(); !slices.Equal(excluded, want) {
			t.Errorf("index excludes phases %v, the terminal phases are %v (%s)", excluded, want, def)
		}
	})
}
