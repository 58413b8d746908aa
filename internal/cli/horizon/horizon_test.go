package horizon

import (
	"testing"
	"time"

	"github.com/idemctl/idemctl/internal/cli/clitest"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/cli/class"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/cli/corrections"
)

func TestHorizonCommandOptions(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := cmdutil.Test(false)
	f := cmdutil.NewFactory(ios)
	f.OperatorFlag = "alice"

	var plan *HorizonPlanOptions
	planCmd := func() *cobra.Command {
		return NewCmdHorizonPlan(f, func(o *HorizonPlanOptions) error { plan = o; return nil })
	}
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, planCmd(), "--class", "proj.view", "--before", "30d", "--contract", "LEGAL-1", "--margin", "10m"))
	assert.Equal(t, "proj.view", plan.Class)
	assert.Equal(t, "30d", plan.Before)
	assert.Equal(t, "LEGAL-1", plan.Contract)
	assert.Equal(t, 10*time.Minute, plan.Margin)
	assert.Equal(t, "alice", plan.Operator)
	assert.True(t, plan.JSON)
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, planCmd(), "--class", "c", "--before", "1d"))
	assert.Equal(t, horizon.DefaultMargin, plan.Margin)

	var purge *HorizonPurgeOptions
	purgeCmd := func() *cobra.Command {
		return NewCmdHorizonPurge(f, func(o *HorizonPurgeOptions) error { purge = o; return nil })
	}
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, purgeCmd(), "12", "--yes"))
	assert.EqualValues(t, 12, purge.ID)
	assert.Equal(t, horizon.DefaultBatchRows, purge.BatchRows)

	var check *HorizonCheckOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, NewCmdHorizonCheck(f, func(o *HorizonCheckOptions) error { check = o; return nil }),
		"--class", "c"))
	assert.Empty(t, check.Before)

	var add *HorizonSourceAddOptions
	addCmd := func() *cobra.Command {
		return NewCmdHorizonSourceAdd(f, func(o *HorizonSourceAddOptions) error { add = o; return nil })
	}
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, addCmd(), "dlq", "--kind", "kafka", "--brokers", "k1:9092, k2:9092", "--topic", "t",
		"--mode", "enumerating", "--timeout", "5s"))
	assert.Equal(t, []string{"k1:9092", "k2:9092"}, add.Source.Config.Brokers)
	assert.Equal(t, horizon.Enumerating, add.Source.Config.Mode)
	assert.Equal(t, 5*time.Second, add.Source.Timeout)
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, addCmd(), "outbox", "--kind", "postgres", "--source-dsn", "postgres://reader@db1/app",
		"--password-env", "IDEMCTL_SOURCE_OUTBOX_PASSWORD", "--query", "SELECT now()"))
	assert.Equal(t, "IDEMCTL_SOURCE_OUTBOX_PASSWORD", add.Source.Config.PasswordEnv)

	var set *class.ClassSetOptions
	classCmd := func() *cobra.Command {
		return class.NewCmdClassSet(f, func(o *class.ClassSetOptions) error { set = o; return nil })
	}
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, classCmd(), "proj.view", "--retention", "horizon", "--min-age", "30d"))
	assert.Equal(t, horizon.Horizon, set.Retention)
	require.NotNil(t, set.MinAge)
	assert.Equal(t, 30*24*time.Hour, *set.MinAge)
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, classCmd(), "proj.view", "--retention", "forever"))
	assert.Nil(t, set.MinAge, "min-age kept when not given")

	var done *corrections.CorrectionsDoneOptions
	require.Equal(t, cmdutil.ExitOK, clitest.ExecSub(t, corrections.NewCmdCorrectionsDone(f, func(o *corrections.CorrectionsDoneOptions) error { done = o; return nil }), "#7"))
	assert.EqualValues(t, 7, done.ID)

	never := func(any) error { t.Fatal("runF must not run on bad input"); return nil }
	bad := []struct {
		name string
		cmd  *cobra.Command
		args []string
	}{
		{"plan without class", NewCmdHorizonPlan(f, func(o *HorizonPlanOptions) error { return never(o) }), []string{"--before", "1d"}},
		{"plan without before", NewCmdHorizonPlan(f, func(o *HorizonPlanOptions) error { return never(o) }), []string{"--class", "c"}},
		{"plan negative margin", NewCmdHorizonPlan(f, func(o *HorizonPlanOptions) error { return never(o) }), []string{"--class", "c", "--before", "1d", "--margin", "-1m"}},
		{"check without class", NewCmdHorizonCheck(f, func(o *HorizonCheckOptions) error { return never(o) }), nil},
		{"purge without --yes off a terminal", NewCmdHorizonPurge(f, func(o *HorizonPurgeOptions) error { return never(o) }), []string{"12"}},
		{"purge bad id", NewCmdHorizonPurge(f, func(o *HorizonPurgeOptions) error { return never(o) }), []string{"x", "--yes"}},
		{"purge bad batch", NewCmdHorizonPurge(f, func(o *HorizonPurgeOptions) error { return never(o) }), []string{"1", "--yes", "--batch-rows", "0"}},
		{"approve no id", NewCmdHorizonApprove(f, func(o *HorizonApproveOptions) error { return never(o) }), nil},
		{"source without kind", NewCmdHorizonSourceAdd(f, func(o *HorizonSourceAddOptions) error { return never(o) }), []string{"x"}},
		{"postgres source without dsn", NewCmdHorizonSourceAdd(f, func(o *HorizonSourceAddOptions) error { return never(o) }), []string{"x", "--kind", "postgres", "--query", "SELECT now()"}},
		{"postgres source with a password", NewCmdHorizonSourceAdd(f, func(o *HorizonSourceAddOptions) error { return never(o) }), []string{"x", "--kind", "postgres", "--source-dsn", "postgres://u:pw@h/db", "--query", "SELECT now()"}},
		{"postgres source with an sslpassword", NewCmdHorizonSourceAdd(f, func(o *HorizonSourceAddOptions) error { return never(o) }), []string{"x", "--kind", "postgres", "--source-dsn", "host=h sslpassword=pw", "--query", "SELECT now()"}},
		{"password-env not a variable name", NewCmdHorizonSourceAdd(f, func(o *HorizonSourceAddOptions) error { return never(o) }), []string{"x", "--kind", "postgres", "--source-dsn", "postgres://u@h/db", "--password-env", "A-B", "--query", "SELECT now()"}},
		{"source named manual", NewCmdHorizonSourceAdd(f, func(o *HorizonSourceAddOptions) error { return never(o) }), []string{"manual", "--kind", "archive", "--dir", "/x"}},
		{"class bad retention", class.NewCmdClassSet(f, func(o *class.ClassSetOptions) error { return never(o) }), []string{"c", "--retention", "sometimes"}},
		{"class bad min-age", class.NewCmdClassSet(f, func(o *class.ClassSetOptions) error { return never(o) }), []string{"c", "--retention", "horizon", "--min-age", "soon"}},
		{"corrections add without reason", corrections.NewCmdCorrectionsAdd(f, func(o *corrections.CorrectionsAddOptions) error { return never(o) }), []string{"--tenant", "t", "--op", "o"}},
		{"corrections add without op", corrections.NewCmdCorrectionsAdd(f, func(o *corrections.CorrectionsAddOptions) error { return never(o) }), []string{"--tenant", "t", "--reason", "r"}},
		{"corrections done bad id", corrections.NewCmdCorrectionsDone(f, func(o *corrections.CorrectionsDoneOptions) error { return never(o) }), []string{"0"}},
		{"plan expiring too soon", NewCmdHorizonPlan(f, func(o *HorizonPlanOptions) error { return never(o) }), []string{"--class", "c", "--before", "1d", "--expires-in", "10s"}},
		{"plan expiring too late", NewCmdHorizonPlan(f, func(o *HorizonPlanOptions) error { return never(o) }), []string{"--class", "c", "--before", "1d", "--expires-in", "1000h"}},
	}
	for _, c := range bad {
		assert.Equal(t, cmdutil.ExitUsage, clitest.ExecSub(t, c.cmd, c.args...), c.name)
	}
}
