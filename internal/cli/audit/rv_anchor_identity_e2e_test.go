package audit_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// rv finding: the anchor file is verify's defence against someone with full
// control who cuts the log's end or rewrites it (audit verify --help). Its
// entry is keyed by the address and idem.database_id(), which is a row of
// idem.database_identity: the same person UPDATEs it, and the next verify
// of the cut log says "first run ... no anchor was kept for this database",
// "audit chain intact", exit 0, and keeps the cut head as the new anchor.
// Nothing says the address held an anchor (row N) of another identity.
//
// Expected: an address whose anchor belongs to another identity is not a
// silent first run: the cut is reported (exit 5), or at least the earlier
// anchor is named and verify does not say intact without comparing.
func TestRVAnchorBypassedByRestampingTheDatabase(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	auditor := dbtest.As(dsn, dbtest.Auditor)
	anchors := filepath.Join(t.TempDir(), "anchors.json")
	for i := range 3 {
		_, err := audit.Append(t.Context(), pool, audit.Entry{Actor: "alice", Action: "resolve.step", Target: fmt.Sprintf("t:%d", i)})
		require.NoError(t, err)
	}
	code, out, errOut := runQ(t, auditor, "audit", "verify", "--anchor-file", anchors, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	head := jsonLines(t, out)[0]["last_id"].(float64)

	// Full control: the last two rows cut, the head moved back; the cut is found.
	dbtest.Admin(t, dsn, fmt.Sprintf(`SET session_replication_role = replica;
DELETE FROM idem.audit WHERE id > %[1]d;
UPDATE idem.audit_head h SET last_id = a.id, last_hash = a.hash FROM idem.audit a WHERE a.id = %[1]d`, int64(head)-2))
	code, _, errOut = runQ(t, auditor, "audit", "verify", "--anchor-file", anchors, "-o", "json")
	require.Equal(t, cmdutil.ExitInvalid, code, "the cut is found against the anchor: %s", errOut)

	// The same person stamps the database again: one UPDATE.
	dbtest.Admin(t, dsn, "UPDATE idem.database_identity SET id = replace(gen_random_uuid()::text, '-', '')")
	code, out, errOut = runQ(t, auditor, "audit", "verify", "--anchor-file", anchors, "-o", "json")
	assert.Equal(t, cmdutil.ExitInvalid, code, "the cut log passes as a first run once the identity changed: %s %s", out, errOut)
}
