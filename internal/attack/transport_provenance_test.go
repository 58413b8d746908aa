package attack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

// Whether a quarantine record's incoming side "was imported from an old
// store that finished it" (or "recorded by hand as done") is read from the
// record's incoming transport ->> 'entered_by' (idem.quarantine_import_refusal,
// quarantine.enteredSide). A caller's transport is its own tracing metadata:
// any service login passes it to idem.execute. A conflict idem.execute
// quarantines keeps it without the keys an import's or a record's run
// writes, so the app login cannot make a plain client retry look imported
// (quarantine show) nor have its accept-as-new refused (IX128).
func TestAppTransportCannotForgeAnImportedConflict(t *testing.T) {
	t.Parallel()
	w := setup(t)
	const class = "pay.transfer"
	dbtest.Admin(t, w.dsn, "SET ROLE "+dbtest.EffectRole+"; CREATE TABLE effects.transfer_posting (t text, o text, amount int)")
	dbtest.RegisterEffect(t, w.dsn, class, "horizon", "transfer_post",
		"INSERT INTO effects.transfer_posting VALUES (t, o, (p->>'amount')::int) RETURNING jsonb_build_object('posted', amount)")
	id := idem.Identity{TenantID: "t1", OperationID: "k-1"}
	_, err := idem.Execute(w.ctx, w.app, idem.Command{Identity: id, Class: class, Payload: []byte(`{"amount":100}`)})
	require.NoError(t, err)

	// A client's retry with another amount, through the service, whose
	// tracing metadata claims an import.
	res, err := idem.Execute(w.ctx, w.app, idem.Command{Identity: id, Class: class, Payload: []byte(`{"amount":150}`),
		Transport: []byte(`{"entered_by":"import","entry_plan":1,"old_store_response":{"forged":"by the app login"}}`)})
	require.NoError(t, err)
	require.Equal(t, idem.Conflict, res.Outcome)

	rec, err := quarantine.Show(w.ctx, w.operator, res.QuarantineID)
	require.NoError(t, err)
	assert.Nil(t, rec.Entered, "a client's retry quarantined by idem.execute is shown as %+v", rec.Entered)

	_, err = quarantine.AcceptAsNew(w.ctx, w.operator, res.QuarantineID, "k-1-rev2", "alice", "the client meant a second transfer")
	assert.NotEqual(t, "IX128", code(err), "accept-as-new refused as an import's conflict: %v", err)
}
