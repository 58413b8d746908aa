package quarantine

import (
	"testing"
	"time"

	"github.com/idemctl/idemctl/internal/cli/clitest"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/audit"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/quarantine"
)

func TestQuarantineTriageOptions(t *testing.T) {
	t.Parallel()
	ios, in, _, _ := cmdutil.Test(false)
	f := cmdutil.NewFactory(ios)
	f.OperatorFlag = "alice"
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Now = func() time.Time { return now }

	var list *QuarantineListOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, NewCmdQuarantineList(f, func(o *QuarantineListOptions) error { list = o; return nil }),
		"--op-prefix", "s-06", "--changed", "/amount", "--source", "mobile", "--class", "payments.charge",
		"--since", "2h", "--until", "1h", "--count"))
	assert.Equal(t, quarantine.Filter{Status: quarantine.StatusOpen, OpPrefix: "s-06", Changed: "/amount", Source: "mobile",
		Class: "payments.charge", Since: now.Add(-2 * time.Hour), Until: now.Add(-time.Hour), Limit: quarantine.DefaultLimit}, list.Filter)
	assert.True(t, list.Count)
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, NewCmdQuarantineList(f, func(o *QuarantineListOptions) error { list = o; return nil }),
		"--op", "s-06376", "--tenant", "acme"))
	assert.Equal(t, "s-06376", list.Filter.Op)

	var groups *QuarantineGroupsOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, NewCmdQuarantineGroups(f, func(o *QuarantineGroupsOptions) error { groups = o; return nil }),
		"--by", "tenant,source", "--changed", "/to", "--limit", "20"))
	assert.Equal(t, quarantine.GroupBy{Tenant: true, Source: true}, groups.Groups.By)
	assert.Equal(t, "/to", groups.Groups.Filter.Changed)
	assert.Equal(t, 20, groups.Groups.Limit)

	var reject *QuarantineRejectOptions
	rejectCmd := func() *cobra.Command {
		return NewCmdQuarantineReject(f, func(o *QuarantineRejectOptions) error { reject = o; return nil })
	}
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, rejectCmd(), "--group", "g-0123456789ab", "--reason", "INC-1", "--dry-run"))
	assert.Equal(t, "g-0123456789ab", reject.Group)
	assert.True(t, reject.DryRun)
	assert.Zero(t, reject.ID)
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, rejectCmd(), "--changed", "/amount", "--class", "c", "--reason", "INC-1", "--batch", "50"))
	assert.Equal(t, "/amount", reject.Selection.Filter.Changed)
	assert.Equal(t, 50, reject.Batch)
	in.WriteString("42\n#43\n\n{\"id\":44,\"tenant\":\"t\"}\n")
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, rejectCmd(), "-", "--reason", "INC-1"))
	assert.Equal(t, []int64{42, 43, 44}, reject.Selection.IDs)
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, rejectCmd(), "--token", "pv-0123", "--reason", "INC-1", "--yes", "--batch", "50"))
	assert.Equal(t, "pv-0123", reject.Token)
	// A command line from shell history decides nothing: --yes needs a token.
	assert.Equal(t, cmdutil.ExitUsage, clitest.ExecSub(t, rejectCmd(), "--group", "g-0123456789ab", "--reason", "INC-1", "--yes"))
	assert.Equal(t, cmdutil.ExitUsage, clitest.ExecSub(t, rejectCmd(), "--token", "pv-0123", "--group", "g-0123456789ab", "--reason", "INC-1", "--yes"))

	var accept *QuarantineAcceptOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, NewCmdQuarantineAccept(f, func(o *QuarantineAcceptOptions) error { accept = o; return nil }),
		"--group", "gs-0123456789ab", "--rule", "{operation_id}-rev2", "--max", "100", "--reason", "revisions"))
	require.NotNil(t, accept.Bulk)
	assert.Equal(t, QuarantineAcceptPlanOptions{Group: "gs-0123456789ab", Rule: "{operation_id}-rev2", Max: 100,
		Selection: quarantine.Selection{Filter: quarantine.Filter{}}}, *accept.Bulk)

	var bulk *QuarantineBulkOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, NewCmdQuarantineBulkAction(f, "run", func(o *QuarantineBulkOptions) error { bulk = o; return nil }),
		"7", "--yes", "--batch", "10"))
	assert.Equal(t, int64(7), bulk.ID)
	assert.Equal(t, 10, bulk.Batch)

	var auditList *audit.AuditListOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, audit.NewCmdAuditList(f, func(o *audit.AuditListOptions) error { auditList = o; return nil }), "--after", "120"))
	assert.Equal(t, int64(120), auditList.Filter.Before, "--after is the audit cursor")

	bad := []struct {
		name  string
		cmd   *cobra.Command
		stdin string
		args  []string
	}{
		{"list pointer without /", NewCmdQuarantineList(f, nil), "", []string{"--changed", "amount"}},
		{"list op and prefix", NewCmdQuarantineList(f, nil), "", []string{"--op", "a", "--op-prefix", "b"}},
		{"list since after until", NewCmdQuarantineList(f, nil), "", []string{"--since", "1h", "--until", "2h"}},
		{"list bad until", NewCmdQuarantineList(f, nil), "", []string{"--until", "soon"}},
		{"groups bad by", NewCmdQuarantineGroups(f, nil), "", []string{"--by", "colour"}},
		{"groups zero limit", NewCmdQuarantineGroups(f, nil), "", []string{"--limit", "0"}},
		{"reject nothing named", NewCmdQuarantineReject(f, nil), "", []string{"--reason", "x"}},
		{"reject id and filter", NewCmdQuarantineReject(f, nil), "", []string{"42", "--tenant", "t", "--reason", "x"}},
		{"reject stdin and filter", NewCmdQuarantineReject(f, nil), "1\n", []string{"-", "--tenant", "t", "--reason", "x", "--yes"}},
		{"reject bad group", NewCmdQuarantineReject(f, nil), "", []string{"--group", "g-12", "--reason", "x", "--yes"}},
		{"reject bulk with --yes and no token", NewCmdQuarantineReject(f, nil), "", []string{"--tenant", "t", "--reason", "x", "--yes"}},
		{"reject bulk without reason", NewCmdQuarantineReject(f, nil), "", []string{"--tenant", "t", "--yes"}},
		{"reject empty stdin", NewCmdQuarantineReject(f, nil), "", []string{"-", "--reason", "x", "--yes"}},
		{"reject bad stdin line", NewCmdQuarantineReject(f, nil), "1\nabc\n", []string{"-", "--reason", "x", "--yes"}},
		{"reject zero id on stdin", NewCmdQuarantineReject(f, nil), "0\n", []string{"-", "--reason", "x", "--yes"}},
		{"reject huge batch", NewCmdQuarantineReject(f, nil), "", []string{"--tenant", "t", "--reason", "x", "--yes", "--batch", "5000"}},
		{"accept bulk without rule", NewCmdQuarantineAccept(f, nil), "", []string{"--tenant", "t", "--max", "5", "--reason", "x"}},
		{"accept rule without placeholder", NewCmdQuarantineAccept(f, nil), "", []string{"--tenant", "t", "--rule", "rev2", "--max", "5", "--reason", "x"}},
		{"accept bulk without max", NewCmdQuarantineAccept(f, nil), "", []string{"--tenant", "t", "--rule", "{operation_id}-2", "--reason", "x"}},
		{"accept max over the cap", NewCmdQuarantineAccept(f, nil), "", []string{"--tenant", "t", "--rule", "{operation_id}-2", "--max", "20000", "--reason", "x"}},
		{"accept id and rule", NewCmdQuarantineAccept(f, nil), "", []string{"42", "--rule", "{operation_id}-2", "--max", "5", "--reason", "x"}},
		{"accept bulk with new id", NewCmdQuarantineAccept(f, nil), "", []string{"--tenant", "t", "--rule", "{operation_id}-2", "--max", "5", "--reason", "x", "--new-operation-id", "n"}},
		{"bulk run without --yes", NewCmdQuarantineBulkAction(f, "run", nil), "", []string{"3"}},
		{"bulk abort without reason", NewCmdQuarantineBulkAction(f, "abort", nil), "", []string{"3"}},
		{"bulk approve bad id", NewCmdQuarantineBulkAction(f, "approve", nil), "", []string{"three"}},
		{"audit bad cursor", audit.NewCmdAuditList(f, nil), "", []string{"--after", "x"}},
		{"audit two cursors", audit.NewCmdAuditList(f, nil), "", []string{"--after", "3", "--before", "4"}},
	}
	for _, tc := range bad {
		in.Reset()
		in.WriteString(tc.stdin)
		assert.Equal(t, cmdutil.ExitUsage, clitest.ExecSub(t, tc.cmd, tc.args...), tc.name)
	}
}
