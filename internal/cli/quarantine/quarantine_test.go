package quarantine

import (
	"testing"
	"time"

	"github.com/idemctl/idemctl/internal/cli/clitest"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/quarantine"
)

func TestQuarantineCommandOptions(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := cmdutil.Test(false)
	f := cmdutil.NewFactory(ios)
	f.OperatorFlag = "alice"
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Now = func() time.Time { return now }

	var list *QuarantineListOptions
	listCmd := func() *cobra.Command {
		return NewCmdQuarantineList(f, func(o *QuarantineListOptions) error { list = o; return nil })
	}
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, listCmd()))
	assert.Equal(t, quarantine.StatusOpen, list.Filter.Status)
	assert.Equal(t, quarantine.DefaultLimit, list.Filter.Limit)
	assert.True(t, list.JSON, "not a terminal: JSON")

	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, listCmd(), "--status", "all", "--tenant", "acme", "--class", "demo.transfer",
		"--since", "24h", "--limit", "7", "--after", "1764489600123456:42"))
	assert.Equal(t, quarantine.StatusAll, list.Filter.Status)
	assert.Equal(t, "acme", list.Filter.Tenant)
	assert.Equal(t, "demo.transfer", list.Filter.Class)
	assert.Equal(t, now.Add(-24*time.Hour), list.Filter.Since)
	assert.Equal(t, 7, list.Filter.Limit)
	require.NotNil(t, list.Filter.After)
	assert.Equal(t, int64(42), list.Filter.After.ID)
	assert.Equal(t, int64(1764489600123456), list.Filter.After.LastSeen.UnixMicro())

	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, listCmd(), "--since", "2026-11-01"))
	assert.Equal(t, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), list.Filter.Since)

	var show *QuarantineShowOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, NewCmdQuarantineShow(f, func(o *QuarantineShowOptions) error { show = o; return nil }), "#42"))
	assert.Equal(t, int64(42), show.ID)

	var reject *QuarantineRejectOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, NewCmdQuarantineReject(f, func(o *QuarantineRejectOptions) error { reject = o; return nil }),
		"42", "--reason", "fraud", "-y"))
	assert.Equal(t, int64(42), reject.ID)
	assert.True(t, reject.Yes)
	assert.Equal(t, "fraud", reject.Reason)
	assert.Equal(t, "alice", reject.Operator)

	var accept *QuarantineAcceptOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, NewCmdQuarantineAccept(f, func(o *QuarantineAcceptOptions) error { accept = o; return nil }),
		"42", "--new-operation-id", "op-rev2", "--reason", "revision", "--yes"))
	assert.Equal(t, int64(42), accept.ID)
	assert.Equal(t, "op-rev2", accept.NewOperationID)
	assert.Equal(t, "revision", accept.Reason)
	assert.Equal(t, "alice", accept.Operator)
	assert.True(t, accept.Yes)

	var export *QuarantineExportOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, NewCmdQuarantineExport(f, func(o *QuarantineExportOptions) error { export = o; return nil }),
		"42", "--file", "b.json"))
	assert.Equal(t, "b.json", export.File)
	assert.Equal(t, "alice", export.Operator)

	bad := []struct {
		name string
		cmd  *cobra.Command
		args []string
	}{
		{"list bad status", NewCmdQuarantineList(f, nil), []string{"--status", "closed"}},
		{"list bad since", NewCmdQuarantineList(f, nil), []string{"--since", "yesterday"}},
		{"list bad cursor", NewCmdQuarantineList(f, nil), []string{"--after", "42"}},
		{"list zero limit", NewCmdQuarantineList(f, nil), []string{"--limit", "0"}},
		{"list huge limit", NewCmdQuarantineList(f, nil), []string{"--limit", "100000"}},
		{"show no id", NewCmdQuarantineShow(f, nil), nil},
		{"show bad id", NewCmdQuarantineShow(f, nil), []string{"forty-two"}},
		{"show negative id", NewCmdQuarantineShow(f, nil), []string{"-5"}},
		{"reject no reason", NewCmdQuarantineReject(f, nil), []string{"42"}},
		{"reject blank reason", NewCmdQuarantineReject(f, nil), []string{"42", "--reason", "  "}},
		{"reject no id", NewCmdQuarantineReject(f, nil), []string{"--reason", "x"}},
		{"accept no new id", NewCmdQuarantineAccept(f, nil), []string{"42", "--reason", "x"}},
		{"accept bad new id", NewCmdQuarantineAccept(f, nil), []string{"42", "--reason", "x", "--new-operation-id", "a\tb"}},
		{"accept no reason", NewCmdQuarantineAccept(f, nil), []string{"42", "--new-operation-id", "n"}},
		{"export two ids", NewCmdQuarantineExport(f, nil), []string{"1", "2"}},
	}
	for _, tc := range bad {
		assert.Equal(t, cmdutil.ExitUsage, clitest.ExecSub(t, tc.cmd, tc.args...), tc.name)
	}
}

// quarantine show of a record an import made names the plan, says
// accept-as-new is refused, and prints the old store's answer.
func TestQuarantineShowEnteredSide(t *testing.T) {
	t.Parallel()
	ios, _, out, _ := cmdutil.Test(false)
	rec := quarantine.Record{ID: 3, Tenant: "7", OperationID: "k-1", Class: "rides.charge", IncomingClass: "rides.charge",
		Status: quarantine.StatusOpen, StoredSide: quarantine.StoredInbox, StoredHash: "jcs-sha256:aa", IncomingHash: "jcs-sha256:bb",
		StoredPayload: []byte(`{"amount":5}`), IncomingPayload: []byte(`{"amount":900}`),
		Entered: &quarantine.EnteredSide{EntryPlan: 12, OldStoreResponse: []byte(`{"charge":"ch_old"}`)}}
	require.NoError(t, printQuarantineRecord(ios, rec))
	assert.Contains(t, out.String(), "imported (entry plan 12): the old store finished it; accept-as-new is refused (reject it)")
	assert.Regexp(t, `its answer\s+│\s+\{"charge":"ch_old"\}`, out.String())
	out.Reset()
	rec.Entered = &quarantine.EnteredSide{By: "record", EntryPlan: 4, OldStoreResponse: []byte(`{"posting_id":"p9"}`)}
	require.NoError(t, printQuarantineRecord(ios, rec))
	assert.Contains(t, out.String(), "recorded by hand as done (entry plan 4); accept-as-new is refused (reject it)")
	out.Reset()
	rec.Entered = nil
	require.NoError(t, printQuarantineRecord(ios, rec))
	assert.NotContains(t, out.String(), "accept-as-new is refused")
}
