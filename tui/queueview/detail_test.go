package queueview

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemctl/idemctl/quarantine"
)

// A conflict whose stored body was purged says so, with the date and the
// plan, in the evidence and in the groups.
func TestStoredBodyPurgedLabelled(t *testing.T) {
	t.Parallel()
	at, plan := time.Date(2026, 11, 2, 3, 4, 5, 0, time.UTC), int64(7)
	assert.Equal(t, "stored body purged 2026-11-02 (plan 7)",
		storedPurged(quarantine.Change{Kind: quarantine.ChangeStoredPurged, PurgedAt: &at, PurgePlan: &plan}))
	g := quarantine.Group{GroupKey: quarantine.GroupKey{Fields: []string{""}}, StoredPurged: true, StoredPurgedAt: &at}
	assert.Equal(t, "stored body purged 2026-11-02", g.Changed())
	g.StoredPurged = false
	assert.Equal(t, "(whole payload)", g.Changed())
	g.Fields = []string{}
	assert.Equal(t, "(class only)", g.Changed())
}
