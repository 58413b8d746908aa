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

// The anchor file is verify's defence against someone with full control
// who cuts the log's end or rewrites it. Its entry is keyed by the address
// and idem.database_id(), a row of idem.database_identity that the same
// person can UPDATE. A restamped identity at an address that holds an entry
// is compared with that entry: the cut log is reported (exit 5), not taken
// for a first run, and the earlier identity is named.
func TestAuditVerifyComparesARestampedDatabaseWithItsAddressEntry(t *testing.T) {
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
	line := jsonLines(t, out)[0]
	assert.Equal(t, false, line["first_run"], out)
	assert.NotEmpty(t, line["kept_for_identity"], out)
	assert.Contains(t, errOut, "move its entry")
}
