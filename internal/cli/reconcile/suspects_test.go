package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

func TestSuspectsCommandOptions(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := cmdutil.Test(false)
	f := cmdutil.NewFactory(ios)
	var got *SuspectsOptions
	cmd := NewCmdSuspects(f, func(o *SuspectsOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--since", "2h", "--class", "pay.charge,pay.refund", "--window", "2m", "--exclude-class", "proj.tick"})
	require.NoError(t, cmd.Execute())
	assert.Equal(t, []string{"pay.charge", "pay.refund"}, got.Query.Classes)
	assert.Equal(t, []string{"proj.tick"}, got.Query.Exclude)
	assert.Equal(t, 2*time.Minute, got.Query.Window)
	assert.WithinDuration(t, time.Now().Add(-2*time.Hour), got.Query.Since, time.Minute)

	cmd = NewCmdSuspects(f, func(o *SuspectsOptions) error { return nil })
	cmd.SetArgs([]string{"--since", "yesterdayish"})
	assert.Equal(t, cmdutil.ExitUsage, cmdutil.CodeOf(cmd.Execute()))
}
