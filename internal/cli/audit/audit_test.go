package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/idemctl/idemctl/internal/cli/clitest"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

func TestAuditCommandOptions(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := cmdutil.Test(false)
	f := cmdutil.NewFactory(ios)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Now = func() time.Time { return now }

	var list *AuditListOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, NewCmdAuditList(f, func(o *AuditListOptions) error { list = o; return nil }),
		"--action", "quarantine", "--actor", "alice", "--label", "nightly", "--target", "quarantine:4", "--since", "1h", "--until", "2026-11-30T11:30:00Z",
		"--limit", "10", "--before", "99"))
	assert.Equal(t, audit.Filter{Action: "quarantine", Who: "alice", Actor: "nightly", Target: "quarantine:4", Since: now.Add(-time.Hour),
		Until: time.Date(2026, 11, 30, 11, 30, 0, 0, time.UTC), Limit: 10, Before: 99}, list.Filter)

	hash := "sha256:" + strings.Repeat("ab", 32)
	var verify *AuditVerifyOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, NewCmdAuditVerify(f, func(o *AuditVerifyOptions) error { verify = o; return nil }),
		"--anchor", "3:"+hash, "--anchor", "7:"+hash))
	assert.Equal(t, []audit.Anchor{{ID: 3, Hash: hash}, {ID: 7, Hash: hash}}, verify.Anchors)

	for _, tc := range []struct {
		cmd  *cobra.Command
		args []string
	}{
		{NewCmdAuditList(f, nil), []string{"--limit", "0"}},
		{NewCmdAuditList(f, nil), []string{"--since", "last tuesday"}},
		{NewCmdAuditList(f, nil), []string{"--before", "-1"}},
		{NewCmdAuditList(f, nil), []string{"extra"}},
		{NewCmdAuditVerify(f, nil), []string{"--anchor", "3"}},
		{NewCmdAuditVerify(f, nil), []string{"--anchor", "x:" + hash}},
	} {
		assert.Equal(t, cmdutil.ExitUsage, clitest.ExecSub(t, tc.cmd, tc.args...), "%v", tc.args)
	}
}
