package queueview

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/tui/keys"
	"github.com/idemctl/idemctl/tui/styles"
	"github.com/idemctl/idemctl/tui/view"
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

// A record an import made shows the old store's answer and the plan, and
// offers only a rejection (the database refuses accept-as-new: IX128).
func TestImportedRecordShowsTheOldStoresAnswer(t *testing.T) {
	t.Parallel()
	c := &view.Context{Width: 80, Height: 40, Styles: styles.DefaultStyles(), Keys: keys.Default(), Now: time.Now}
	v := New(c, nil, 0)
	v.rec = &quarantine.Record{ID: 3, Tenant: "7", OperationID: "k-1", Class: "rides.charge", IncomingClass: "rides.charge",
		Status: quarantine.StatusOpen, StoredHash: "jcs-sha256:aa", IncomingHash: "jcs-sha256:bb",
		StoredResponse: []byte(`{"charged":5}`), IncomingPayload: []byte(`{"amount":900}`),
		Entered: &quarantine.EnteredSide{EntryPlan: 12, OldStoreResponse: []byte(`{"charge":"ch_old"}`)}}
	text := strings.Join(v.detailLines(80), "\n")
	assert.Contains(t, text, "Its answer")
	assert.Contains(t, text, "imported (entry plan 12): the old store finished it: accept-as-new is refused")
	assert.Contains(t, text, `"charge": "ch_old"`)
	assert.NotContains(t, text, "a accept as new")
	v.rec.Entered = nil
	text = strings.Join(v.detailLines(80), "\n")
	assert.NotContains(t, text, "Its answer")
	assert.Contains(t, text, "a accept as new")
}
